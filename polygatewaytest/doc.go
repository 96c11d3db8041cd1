// Package polygatewaytest is a scriptable fake of an OpenAI-compatible
// model server, for testing code that calls models through PolyGateway (or
// through any OpenAI client) without a network, keys or cost.
//
// A Server is a real HTTP server on localhost (net/http/httptest). It
// answers
//
//   - POST URL()+"/chat/completions", streamed as SSE when the request asks
//     for "stream": true, otherwise as one JSON body;
//   - POST URL()+"/embeddings", with deterministic vectors (EmbeddingFor)
//     encoded as floats or, for "encoding_format": "base64", as base64
//     little-endian float32, and usage;
//   - GET URL()+"/models" and URL()+"/models/{id}".
//
// URL() already ends in "/v1", so it is the value of a source's BASE_URL;
// Server.Env returns the whole map of keys for polygateway.WithEnv.
//
// Every chat and embeddings request is answered with a Behavior: a healthy
// answer (OK), an HTTP error with a realistic OpenAI error envelope (Status,
// RateLimited with its Retry-After, ServerError, BadKey, ContextLength,
// ContentFilter, InsufficientQuota), a connection reset (Reset), a request
// held without answer (Hang), or an answer that is cut (CutAfter), stalls
// (StallAfter), carries a malformed event (MalformedAt) or an in-stream
// error (ErrorEvent); each adjustable with a latency, a slow first token,
// delays between tokens, no [DONE], no usage, keep-alive comments, extra
// headers, its text, reported model and reasoning text.
//
// # Choosing a behavior
//
// For every chat or embeddings request the server decides, in this order:
//
//  1. WithConcurrencyLimit: when more than n admitted requests would be in
//     flight, the request is answered with the "over" behavior.
//  2. WithFlap: while the server is in a down window, the request is
//     answered with the "down" behavior.
//  3. WithModel: a request whose "model" has its own script gets that
//     script's next behavior.
//  4. WithFunc or WithScript (the last one given wins): the function's
//     result, or the next scripted behavior.
//  5. Otherwise OK().
//
// A script position advances only for the requests that reach its step, so
// requests turned away by earlier steps do not consume scripted entries.
// The zero Behavior is OK() with defaults.
//
// Requests whose body is not valid JSON get a 400 OpenAI parse-error
// envelope, invalid embeddings requests a 400 invalid_request_error, and
// wrong methods a 405, before any option is consulted; other paths under
// URL() get a 404 unless mounted with WithHandler.
//
// # Observability
//
// Attempts is the attempt log: every request with its time, method, path,
// model, stream flag, header, body (the first MaxLoggedBody bytes), the
// Kind of behavior that answered it and the status code; the last
// DefaultAttemptLog requests are kept (WithAttemptLog). Requests, Arrivals,
// Hits, InFlight, MaxInFlight, Bodies and LastBody count the requests
// answered by a Behavior. All are safe for concurrent use; ResetStats
// clears them.
//
// # In tests and elsewhere
//
// NewServer(t, …) starts a server and closes it when the test ends; New(…)
// starts one that the caller closes with Close, for demos and local runs.
// The command cmd/polygateway-fake runs one as a standalone process, its
// behaviors chosen by flags, for programs in other languages.
//
// # Performance
//
// Chat answers are rendered once per (model, content, usage, thinking)
// combination and cached on the Server, so answering a request costs little
// more than decoding its body and writing pre-built chunks; every SSE chunk
// is flushed on its own. Nothing is logged.
package polygatewaytest
