// Package telemetry holds the sinks that need no driver: Discard (the "none"
// backend) and Memory, an in-process sink for tests and demos. The database
// sinks live in the opt-in packages telemetry/sqlitesink and telemetry/pgsink.
package telemetry
