// Package telemetrytest is the conformance suite of the TelemetrySink port.
// Every database sink runs it from its tests with a factory that gives a
// fresh sink and a Reader over the sink's table:
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
// The suite pins the semantics of the database sinks: an idempotent insert
// on call_id where the first row wins, flushing on Close, ErrClosed after
// Close, nothing lost under concurrent writers. The in-memory sink of package
// telemetry replaces a row on a repeated call_id instead, so it does not run
// this suite.
//
// FullRecord, SparseRecord and Diff are exported for the sinks' own tests.
package telemetrytest
