// Package embed is the EmbeddingClient: OpenAI-compatible embeddings
// (POST {BASE_URL}/embeddings) on the same governance stack as the chat
// client — multi-source selection, retry and failover by error class,
// circuit breakers, the six rate-limit gates, telemetry and pricing.
//
// # Assembly
//
// FromEnv and FromSettings take the same configuration and the same
// polygateway.Option values as polygateway.FromEnv: sources, limiter,
// breaker, telemetry, pricing, logger and middleware apply unchanged. The
// response cache is always off for embeddings. The scope's own keys are
//
//	{SCOPE}__BATCH_SIZE       required, integer ≥ 1: inputs per upstream request
//	{SCOPE}__NORMALIZE        true/false/1/0, default false: L2-normalise every vector
//	{SCOPE}__EXPECTED_DIM     optional integer ≥ 1: every vector must have this length
//	{SCOPE}__CONCURRENCY      optional integer 1..64, default 1: batches in flight at once
//	{SCOPE}__ENCODING_FORMAT  float (default) or base64: the encoding_format requested
//	{SCOPE}__MAX_INPUTS       optional integer ≥ 1, default 2048: texts one Embed call accepts
//	{SCOPE}__MAX_INPUT_BYTES  optional integer ≥ 1, default 2097152 (2 MiB): summed bytes of
//	                          one Embed call's texts
//
// Any other single-part key of the scope is an error naming it and the key
// meant (EMBED__NORMALISE: did you mean EMBED__NORMALIZE?); keys for the
// user's own code are spelt {SCOPE}__X_…. A bad key closes the
// half-built client and returns a *polygateway.ConfigError whose Key is the
// full key, e.g. "EMBED__BATCH_SIZE".
//
// # Calls
//
// One Embed call is bounded before any work is done: more than MAX_INPUTS
// texts (2048 by default, OpenAI's own limit per request) is a
// *polygateway.RequestRejectedError with Code "too_many_inputs", texts
// whose lengths sum to more than MAX_INPUT_BYTES one with Code
// "input_too_large", and an empty text one with Code "empty_input"; no
// batch is sent, no telemetry row written. Raise the keys to embed more in
// one call, or split the input yourself.
//
// Embed splits its input into batches of BATCH_SIZE texts. Every batch is
// one governed call of the scope's engine, with a typed attempt: it
// has its own retry budget and failover, passes the breaker and the limiter
// on every attempt, and writes its own telemetry row. A transient failure
// therefore retries only the batch it hit. Batches run one after another
// (CONCURRENCY 1) or with that many in flight; either way the vectors come
// back in input order, one per input. The first failing batch ends the call
// (batches still running are cancelled) and its error is returned wrapped
// in a *BatchError, so errors.As still finds the error class.
//
// Telemetry: the Embed call has no row of its own. Every batch row has a
// fresh call_id (listed in Response.BatchCallIDs) and parent_call_id set
// to Response.CallID — or, when the caller passes
// polygateway.WithParentCallID, to the caller's parent id, so that the
// batch rows hang directly under the caller's own task. WithSessionID is
// written on every batch row. WithParams fields go into every request body
// (e.g. "dimensions"); they never replace model or input, and a source's
// EXTRA_BODY wins over them as it does for chat. The other call options
// (cache, stream, structured output) do not apply to embeddings and are
// ignored.
//
// # Upstream protocol and checks
//
// The request is {"model", "input": [...], "encoding_format"} plus the
// Params and EXTRA_BODY fields. The answer's data[] entries are put in
// order by their "index"; each "embedding" may be a JSON array of numbers
// or a base64 string of little-endian float32 values, whatever was asked
// for. The answer must have exactly one entry per input, every index once,
// all vectors of the same non-zero length and only finite values;
// otherwise the attempt fails with a *polygateway.ResultInvalidError, which
// is not retried and never counts against the breaker. EXPECTED_DIM is
// checked the same way (the billed usage of such an answer is still
// recorded in its telemetry row). The batches of one call share one
// dimension too: when a failover had a batch answered by a source whose
// model has another, the call ends with a *BatchError wrapping a
// *polygateway.ResultInvalidError that names both sources, never with a mix.
// (Sources of different models with one dimension are not told apart: give
// an embedding scope sources of one model where vectors are compared.)
// A well-formed error body, a non-2xx
// status or a network failure is classified exactly like a chat attempt; a
// body that is not JSON or is cut short is a transient failure.
//
// The answer is read by encoding/json as it arrives, entry by entry,
// straight into the vectors: what is read is what json.Unmarshal reads from
// the same bytes, however they are split into reads, except that a null
// vector element or index is refused (encoding/json would read zero). A
// float answer costs about 0.35× its bytes of memory, a base64 one about
// 1.8× (docs/howto-embeddings.md). When the context carries the server's
// memory budget for buffered bytes, an answer's bytes are reserved on it
// before they are read and held until Embed returns; a refused reservation
// ends the call with a *polygateway.RequestRejectedError of code
// "memory_budget" (no other source is asked).
//
// Usage: usage.prompt_tokens (else usage.total_tokens) when positive is
// "measured"; otherwise the prompt tokens are estimated from the inputs and
// the batch is marked "estimated". Cost comes from the pricing table
// (input price × prompt tokens).
package embed
