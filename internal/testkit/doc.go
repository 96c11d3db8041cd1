// Package testkit holds the fakes and helpers that the tests of several
// packages of the module share: a configuration builder for clients
// assembled by FromEnv, a call with a short prompt, a slog handler that
// keeps what it is given, a log buffer safe for concurrent writes, a
// polling wait and the typed errors an upstream fails with.
//
// It is internal: only the module's own tests import it. The public test
// kit for users of the library is package polygatewaytest (a fake
// OpenAI-compatible upstream); testkit does not import it, so that the
// tests of polygatewaytest may use testkit.
//
// Everything here is safe for concurrent use unless its doc says
// otherwise.
package testkit
