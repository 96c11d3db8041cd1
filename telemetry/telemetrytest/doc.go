// Package telemetrytest is the conformance suite of the TelemetrySink port.
// Every database sink, and the in-memory sink of package telemetry, runs it
// from its tests with a factory that gives a fresh sink and a Reader over
// the sink's table (for Memory, over its Records):
//
//	func TestConformance(t *testing.T) {
//		telemetrytest.RunSinkSuite(t, func(t *testing.T) (core.TelemetrySink, telemetrytest.Reader) {
//			s, err := mysink.Open(filepath.Join(t.TempDir(), "t.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s, myReader{path: s.Path()}
//		})
//	}
//
// The suite pins the semantics every sink shares: an idempotent insert on
// call_id where the first row wins, flushing on Close, ErrClosed after
// Close, nothing lost under concurrent writers. Drops are checked only on a
// sink that counts them (a Dropped() uint64 method); Memory never drops and
// has none.
//
// FullRecord, SparseRecord and Diff are exported for the sinks' own tests.
package telemetrytest
