// Package bench holds the overhead benchmarks of PolyGateway (make bench).
// Every benchmark runs a governed arm and a raw arm — plain net/http plus the
// same JSON handling — against the same in-process fake upstream in the same
// run, and reports both and their ratio.
package bench
