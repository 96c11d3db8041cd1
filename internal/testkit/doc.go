// Package testkit holds the fakes and helpers that the tests of several
// packages of the module share:
//
//   - Continuer, an upstream that continues a prefill;
//   - Logs, a slog handler that keeps the records it is given, and Buffer,
//     a log destination safe for concurrent writes;
//   - WaitFor, a polling wait;
//   - SplitReader, which makes a body arrive in reads of given sizes;
//   - PlaceAdmitter, a core.Admitter that records the place of every
//     admission;
//   - the means of the heap tests: SkipHeapMeasurement, LiveHeap,
//     TotalAlloc, RaceEnabled and LazyStream (an SSE body made as it is
//     read);
//   - the typed upstream errors (TransientErr, DeadErr, …) and the clock
//     Epoch of the engine's and the middleware's tests.
//
// Its package testenv builds the configurations of clients assembled by
// FromEnv and makes their calls.
//
// It is internal: only the module's own tests import it. testkit imports
// package core only, so that the tests of any package built on core may
// use it; testenv imports the root package, so only the tests of packages
// the root does not import may use that one. The public test kit for
// users of the library is package polygatewaytest (a fake
// OpenAI-compatible upstream); neither imports it, so that its own tests
// may use them.
//
// Everything here is safe for concurrent use unless its doc says
// otherwise.
package testkit
