// Package proxy is the OpenAI-compatible HTTP gateway of PolyGateway: an
// http.Handler over one or more governed clients, so that programs that
// cannot import the Go library (Python, Node, curl, any OpenAI SDK) get the
// same governance — source selection, rate limits, breakers, retries and
// failover, the stream watchdog, cache and telemetry — by changing only
// their base URL. cmd/polygateway serves it from the environment.
//
// Every request becomes one governed call, so everything the library does
// applies unchanged.
//
// # Endpoints
//
//   - POST /v1/chat/completions — non-streaming and streaming (SSE). The
//     request's "model" selects a scope through Backends.Routes (or
//     DefaultScope); each source replaces it with its own MODEL upstream.
//     "messages" (string or text/image_url content arrays, name,
//     tool_call_id) become the call's messages; every other field
//     (temperature, top_p, max_tokens, stop, tools, tool_choice,
//     response_format, seed, …) passes upstream unchanged. The answer's
//     "model" is the answering source's model, "usage" that answer's usage,
//     and a "gateway" object plus X-PolyGateway-Source, -Attempts, -Cache
//     and -Degraded headers tell what happened. "fallbacks" (at most 8
//     routed models, also read from "extra_body") names the routes that
//     take the call, in order and within the client's one deadline, when
//     the requested model's scope cannot answer; it is never sent upstream.
//     The "gateway" object's "route" and X-PolyGateway-Route name the route
//     that answered.
//   - POST /v1/embeddings — through the embeddings client of the scope that
//     Backends.EmbedRoutes (or DefaultEmbedScope) names. The input array is
//     counted in the raw body against the scope's MAX_INPUTS before any
//     input is decoded (400 too_many_inputs); the client refuses more than
//     MAX_INPUT_BYTES (400 input_too_large) before any upstream call.
//   - GET /v1/models — the routed model names.
//   - GET /v1/providers — every source's name, model, tier, weight,
//     breaker, limits, load and its scope's queue depth by class; never a
//     key. Its base URL only with the
//     AdminToken (which the route takes in place of a client key).
//   - GET /healthz — liveness, open to anyone and naming no source; GET
//     /readyz — 200 when every scope has a source whose breaker is not
//     open, 503 otherwise; the details (draining, unready scopes, every
//     source's availability) only with the MetricsToken or AdminToken.
//   - POST /admin/breakers/{source}/reset — with "Authorization: Bearer
//     <AdminToken>"; 404 when no admin token is configured.
//   - GET /metrics — Config.Metrics, when set; with Config.MetricsToken set
//     it needs that bearer token (or the AdminToken).
//
// # Admission and bounds
//
// A chat or embeddings request is admitted from its headers before its
// body is read: client key (401), per-client rate (429; per key when
// ClientKeys are set, with X-Client-Id only sub-dividing a key), MaxInFlight
// (503) and room in MaxBufferedBodyBytes for the body (503). A refused
// request's body is never read. The admitted body is read into memory
// reserved from that budget and given back when the answer is complete.
//
// Every admitted request has a deadline, Config.RequestTimeout (default
// 600 s), which the client may shorten with X-PolyGateway-Timeout
// (seconds; longer values are clamped, invalid ones are 400); the answer's
// X-PolyGateway-Timeout header says the deadline that applied, and a call
// still running when it passes ends with 504 timeout. With ClientKeys each
// key's cached answers are its own unless Config.SharedCache is set.
//
// Every chat, responses and embeddings call is placed in the library's fair
// queue (polygateway.WithPriority, polygateway.WithTenant): its priority is
// the X-PolyGateway-Priority header (interactive, normal or batch), else
// its client key's Config.ClientPriorities entry, else normal; its tenant
// is its client key's digest id, else its X-Client-Id. An unknown priority
// or an X-Client-Id that is not an id of at most 128 bytes is a 400 naming
// the header, before the body is read.
//
// # Streams
//
// A streamed answer follows Config.StreamCommit. Under CommitFirstToken
// (the default) each delta is written and flushed as it arrives; until the
// first byte is sent any failure fails over invisibly, after it a failure
// ends the stream with an error event ("data: {"error": …}") and no
// "[DONE]". Under CommitBuffer the answer is held until the governed call
// has succeeded — a late cut still fails over — and is then sent whole as
// SSE. A successful stream always ends with the finish chunk, a usage chunk
// when the client set stream_options.include_usage, and "data: [DONE]"; a
// stream that did not complete never does. A failure before anything was
// sent is an ordinary JSON error response with an honest status.
//
// # Errors
//
// Errors have OpenAI's shape {"error": {"message", "type", "param",
// "code"}}: a RequestRejectedError is 400 with the provider's code and
// message, a GatewayUnavailableError 503 with Retry-After, a
// ResultInvalidError 422, a GovernanceBackendError 503; bad JSON 400, an
// unknown model 404 model_not_found, an oversized body 413, a missing or
// wrong client key 401, a client over its rate 429 with Retry-After, the
// server over MaxInFlight or MaxBufferedBodyBytes 503 server_overloaded
// with Retry-After: 1. A
// client that goes away cancels its governed call; nothing is sent and
// the request is logged with status 499.
//
// # Operations
//
// Every response carries X-Request-ID (the client's, when it is a sane
// token, or a fresh one), which is also the call's telemetry session id
// and part of the request's log line. Server.Swap replaces routes and
// clients atomically (a reload): running calls finish on the clients they
// started with, which are closed once drained. Server.Shutdown drains
// in-flight calls, streams included, within its context's deadline, while
// /readyz and new requests answer 503: keep the listener open until it
// returns. Config.Observer is told of every request and refusal (the
// metrics package's Gateway counts them).
// Logs go through slog only and never contain keys or tokens.
package proxy
