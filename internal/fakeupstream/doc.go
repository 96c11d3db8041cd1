// Package fakeupstream is a configurable, misbehaving-on-purpose fake of an
// OpenAI-compatible chat completions endpoint, built on net/http/httptest.
//
// The library's tests, its runnable demo and its benchmarks talk to it over
// real HTTP. A Server answers POST URL()+"/chat/completions" (URL() already
// ends in "/v1") with whatever Behavior the configuration picks for that
// request: a healthy answer (streamed as SSE when the request asks for
// "stream": true), an HTTP error with a realistic OpenAI error envelope, a
// connection reset, a request that hangs, or a stream that is cut, stalls,
// carries a malformed event or an in-stream error event.
//
// # Choosing a behavior
//
// For every chat request the server decides, in this order:
//
//  1. WithConcurrencyLimit: when more than n admitted requests would be in
//     flight, the request is answered with the "over" behavior.
//  2. WithFlap: while the server is in a down window, the request is answered
//     with the "down" behavior.
//  3. WithFunc or WithScript (the last one given wins): the function's result,
//     or the next scripted behavior. The script position advances only for
//     requests that reach this step, so requests turned away by steps 1 and 2
//     do not consume scripted entries.
//  4. Otherwise OK().
//
// The zero Behavior is OK() with defaults.
//
// Requests whose body is not valid JSON get a 400 OpenAI parse-error envelope
// and methods other than POST a 405, before any option is consulted; other
// paths under URL() get a 404 unless mounted with WithHandler.
//
// # Observability
//
// Requests, Arrivals, Hits, InFlight, MaxInFlight, Bodies and LastBody report
// what the server saw; they are safe for concurrent use and count chat
// completion requests only (handlers mounted with WithHandler are not counted).
// ResetStats clears them.
//
// # Performance
//
// Response bytes are rendered once per (model, tokens, thinking) combination
// and cached on the Server, so answering a request costs little more than
// decoding its body and writing pre-built chunks; every SSE chunk is flushed
// on its own. Nothing is logged.
package fakeupstream
