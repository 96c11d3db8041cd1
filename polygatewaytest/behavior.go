package polygatewaytest

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTokens is the number of tokens OK() answers with when Behavior.Tokens
// is zero.
const DefaultTokens = 8

// PromptTokens is the prompt_tokens value every usage block reports.
const PromptTokens = 11

// DefaultModel is the model reported when neither the Behavior nor the
// request names one.
const DefaultModel = "fake-model"

// Kind names what a Behavior does; Behavior.Kind reports it and the attempt
// log records it (see Attempt).
type Kind uint8

// Kind values.
const (
	// KindNone marks a request that no Behavior answered: the models list,
	// an unknown path, a wrong method, a body that is not JSON, or a
	// WithHandler handler.
	KindNone Kind = iota
	// KindOK is a normal answer (OK).
	KindOK
	// KindStatus is an HTTP error or a verbatim body (Status, RateLimited,
	// ServerError, BadKey, ContextLength, ContentFilter, InsufficientQuota).
	KindStatus
	// KindReset is a connection reset before any response byte (Reset).
	KindReset
	// KindHang is a request held without any answer (Hang).
	KindHang
	// KindCut is an answer cut short (CutAfter).
	KindCut
	// KindStall is an answer that pauses (StallAfter).
	KindStall
	// KindMalformed is an answer with broken JSON (MalformedAt).
	KindMalformed
	// KindErrorEvent is an error inside a 200 answer (ErrorEvent).
	KindErrorEvent
)

var kindNames = [...]string{"none", "ok", "status", "reset", "hang", "cut", "stall", "malformed", "error_event"}

// String returns the lower-case name of k ("ok", "status", "cut", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

type kind uint8

const (
	kindOK kind = iota
	kindStatus
	kindReset
	kindHang
)

type fault uint8

const (
	faultNone fault = iota
	faultCut
	faultStall
	faultMalformed
	faultTruncated
	faultErrorEvent
)

// Behavior describes how the server answers one request: a chat completion
// (streamed or not) or an embeddings request.
//
// Build one with a constructor (OK, Status, RateLimited, Reset, Hang,
// CutAfter, StallAfter, MalformedAt, ErrorEvent, …) and adjust it with the
// exported fields or the chainable With… methods, which return a modified
// copy. The zero value behaves like OK(). A Behavior is a value: it is safe
// to share between servers and goroutines once built.
//
// An embeddings request is answered like a non-streaming chat request:
// Latency and FirstTokenDelay are waited before the headers, Status, Reset
// and Hang act the same, CutAfter sends half the body and closes the
// connection, StallAfter answers later, MalformedAt sends truncated JSON,
// ErrorEvent a 200 with an error envelope, NoUsage drops usage, and Model
// names the model reported. Tokens, Content, Thinking, InterTokenDelay and
// the stream settings do not apply.
type Behavior struct {
	// Latency is waited before anything is sent (before the response
	// headers). It applies to every kind except Hang.
	Latency time.Duration

	// FirstTokenDelay is waited after the headers of a stream and before the
	// first event. For a non-streaming answer it is added to the time waited
	// before the headers.
	FirstTokenDelay time.Duration

	// InterTokenDelay is waited between two content tokens of a stream. For a
	// non-streaming answer (Tokens-1)*InterTokenDelay is added to the time
	// waited before the headers.
	InterTokenDelay time.Duration

	// Tokens is the number N of content tokens: the answer is
	// "tok0 tok1 … tokN-1". Zero means DefaultTokens; a negative value means
	// an empty answer with no content tokens. When streaming, each token is
	// its own SSE chunk (" tok5" with a leading space after the first), so
	// the concatenated deltas equal the non-streaming content.
	Tokens int

	// Content, when non-empty, replaces the "tok0 tok1 …" answer (and
	// Tokens): it is split into tokens before every run of whitespace that
	// follows non-whitespace ("The capital" streams as "The", " capital"), so
	// completion_tokens is the number of its words.
	Content string

	// PromptTokens is the prompt_tokens value usage reports. Zero means the
	// package constant PromptTokens; a negative value reports 0.
	PromptTokens int

	// Model is the model the response reports. Empty means the request's
	// model, or DefaultModel when the request names none.
	Model string

	// Thinking, when non-empty, is sent as reasoning text: in the message
	// (non-streaming) or as one delta before the first content token.
	Thinking string

	// ThinkingField is the JSON field that carries Thinking. Empty means
	// "reasoning_content" (DeepSeek, Qwen, Kimi, GLM); vLLM and Ollama use
	// "reasoning".
	ThinkingField string

	// NoDone makes a stream end after its finish_reason (and usage) chunk
	// without the final "data: [DONE]".
	NoDone bool

	// NoUsage omits usage: no usage object in a non-streaming answer, and no
	// usage chunk in a stream even when stream_options.include_usage is set.
	NoUsage bool

	// Usage, when set, is the JSON of the usage object reported in place
	// of the one computed from the answer (in a non-streaming body, in a
	// stream's usage chunk and in an embeddings answer), verbatim: a test of an upstream that claims
	// more tokens than it could have used, or reports them oddly.
	Usage string

	// KeepAlive, when positive, is the interval of ": keep-alive" SSE
	// comments sent during every wait of a stream after its headers
	// (FirstTokenDelay, InterTokenDelay, stalls). Comments are not tokens.
	KeepAlive time.Duration

	// Headers are extra response headers, set on every answer that has
	// headers (they override the defaults, e.g. Content-Type).
	Headers map[string]string

	kind            kind
	status          int
	body            string
	fault           fault
	faultAt         int
	stall           time.Duration
	closeAfterFault bool
}

// OK answers normally: "tok0 tok1 … tokN-1" with N = DefaultTokens, as one
// content string with finish_reason "stop" and usage (prompt_tokens =
// PromptTokens, completion_tokens = N) when not streaming. When the request
// has "stream": true it answers with one SSE chunk per token (the first one
// carries role "assistant"), then a chunk with an empty delta and
// finish_reason "stop", then, if the request set
// stream_options.include_usage, a separate usage chunk with "choices": [],
// then "data: [DONE]".
func OK() Behavior { return Behavior{} }

// Status answers with the given HTTP status code, body and extra headers,
// after Latency. Content-Type defaults to application/json when the body
// starts with '{' and to text/plain otherwise; headers may override it.
// Status(200, body, nil) answers a non-streaming body verbatim.
func Status(code int, body string, headers map[string]string) Behavior {
	return Behavior{kind: kindStatus, status: code, body: body, Headers: maps.Clone(headers)}
}

// RateLimited answers 429 with an OpenAI rate_limit_exceeded envelope and,
// when retryAfter is non-empty, a Retry-After header with that value
// (seconds such as "2", or an HTTP date).
func RateLimited(retryAfter string) Behavior {
	h := map[string]string{
		"x-ratelimit-limit-requests":     "60",
		"x-ratelimit-remaining-requests": "0",
	}
	if retryAfter != "" {
		h["Retry-After"] = retryAfter
	}
	return Status(http.StatusTooManyRequests, bodyRateLimited, h)
}

// ServerError answers with a 5xx status code. 502 and 504 get an HTML body
// (text/html), as a reverse proxy in front of the model server would send;
// other codes get an OpenAI server_error envelope (503 with the "overloaded"
// wording).
func ServerError(code int) Behavior {
	switch code {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		text := strconv.Itoa(code) + " " + http.StatusText(code)
		body := "<html>\r\n<head><title>" + text + "</title></head>\r\n<body>\r\n<center><h1>" +
			text + "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
		return Status(code, body, map[string]string{"Content-Type": "text/html"})
	case http.StatusServiceUnavailable:
		return Status(code, bodyOverloaded, nil)
	default:
		return Status(code, bodyServerError, nil)
	}
}

// BadKey answers 401 with an OpenAI invalid_api_key envelope.
func BadKey() Behavior { return Status(http.StatusUnauthorized, bodyBadKey, nil) }

// ContextLength answers 400 with an OpenAI context_length_exceeded envelope.
func ContextLength() Behavior { return Status(http.StatusBadRequest, bodyContextLength, nil) }

// ContentFilter answers 400 with an Azure OpenAI content_filter envelope
// ("type": null, plus "status" and "innererror").
func ContentFilter() Behavior { return Status(http.StatusBadRequest, bodyContentFilter, nil) }

// InsufficientQuota answers 429 with an OpenAI insufficient_quota envelope
// (a 429 that must not be retried) and no Retry-After.
func InsufficientQuota() Behavior {
	return Status(http.StatusTooManyRequests, bodyInsufficientQuota, nil)
}

// Reset reads the request, waits Latency, then hijacks the connection and
// closes it abruptly (TCP RST where possible) before any response byte: the
// client gets a transport error and no response.
func Reset() Behavior { return Behavior{kind: kindReset} }

// Hang accepts the request and holds it without ever answering (not even
// headers) until the client goes away or the server closes; the connection
// is then dropped.
func Hang() Behavior { return Behavior{kind: kindHang} }

// CutAfter streams n content tokens and then closes the connection: no
// finish_reason, no usage, no [DONE] and no clean end of the chunked body.
// A non-streaming request gets a Content-Length for the full answer but only
// the first half of the body before the connection is closed.
func CutAfter(n int) Behavior { return Behavior{fault: faultCut, faultAt: n} }

// StallAfter streams n content tokens, then sends nothing for d (only
// ": keep-alive" comments when KeepAlive is set), then continues normally.
// A non-streaming request is answered d later than usual.
func StallAfter(n int, d time.Duration) Behavior {
	return Behavior{fault: faultStall, faultAt: n, stall: d}
}

// MalformedAt streams n content tokens, then one event whose JSON is broken
// (`data: {"choices":[{"delta":{"content":"x"`), then continues normally up
// to [DONE] (see AndClose to cut instead). A non-streaming request gets a
// 200 with a truncated JSON body.
func MalformedAt(n int) Behavior { return Behavior{fault: faultMalformed, faultAt: n} }

// TruncatedChunkAt streams n content tokens, then token n's own chunk with
// its JSON cut at two thirds of its length (the event still ends with its
// blank line), then the tokens after it up to [DONE]: the word of token n
// is missing from what parses, as when a proxy or a provider drops the end
// of one event. When the answer has n tokens or fewer, the chunk cut is
// the one with the finish_reason that follows them. A non-streaming request gets a 200 with a truncated JSON
// body, as for MalformedAt.
func TruncatedChunkAt(n int) Behavior { return Behavior{fault: faultTruncated, faultAt: n} }

// ErrorEvent streams n content tokens, then an in-stream error event
// {"error":{"object":"error","message":…,"type":"InternalServerError",
// "code":500}} followed by "data: [DONE]" without any finish_reason, as vLLM
// does. A non-streaming request gets HTTP 200 with that error envelope as its
// body.
func ErrorEvent(n int) Behavior { return Behavior{fault: faultErrorEvent, faultAt: n} }

// WithLatency returns a copy of b with Latency set to d.
func (b Behavior) WithLatency(d time.Duration) Behavior { b.Latency = d; return b }

// WithFirstTokenDelay returns a copy of b with FirstTokenDelay set to d.
func (b Behavior) WithFirstTokenDelay(d time.Duration) Behavior { b.FirstTokenDelay = d; return b }

// WithInterTokenDelay returns a copy of b with InterTokenDelay set to d.
func (b Behavior) WithInterTokenDelay(d time.Duration) Behavior { b.InterTokenDelay = d; return b }

// WithTokens returns a copy of b answering with n content tokens; n <= 0
// gives an empty answer (unlike the zero Tokens field, which means
// DefaultTokens).
func (b Behavior) WithTokens(n int) Behavior { b.Tokens = noneBelowOne(n); return b }

// noneBelowOne returns n, or -1 (none, unlike the zero of a field, which
// means its default) when n <= 0.
func noneBelowOne(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// WithModel returns a copy of b reporting model m. (The server option
// WithModel, a function of the package, chooses a behavior by the request's
// model instead.)
func (b Behavior) WithModel(m string) Behavior { b.Model = m; return b }

// WithContent returns a copy of b answering with the text s instead of
// "tok0 tok1 …" (see Behavior.Content).
func (b Behavior) WithContent(s string) Behavior { b.Content = s; return b }

// WithPromptTokens returns a copy of b whose usage reports n prompt tokens;
// n <= 0 reports 0.
func (b Behavior) WithPromptTokens(n int) Behavior { b.PromptTokens = noneBelowOne(n); return b }

// WithThinking returns a copy of b that sends reasoning text s.
func (b Behavior) WithThinking(s string) Behavior { b.Thinking = s; return b }

// WithThinkingField returns a copy of b whose reasoning text travels in the
// JSON field f (e.g. "reasoning").
func (b Behavior) WithThinkingField(f string) Behavior { b.ThinkingField = f; return b }

// WithoutDone returns a copy of b whose streams end without "data: [DONE]".
func (b Behavior) WithoutDone() Behavior { b.NoDone = true; return b }

// WithUsage returns a copy of b reporting usage (the JSON of a usage
// object, e.g. `{"prompt_tokens":5,"completion_tokens":1e300}`) verbatim.
func (b Behavior) WithUsage(usage string) Behavior { b.Usage = usage; return b }

// WithoutUsage returns a copy of b that never reports usage.
func (b Behavior) WithoutUsage() Behavior { b.NoUsage = true; return b }

// WithKeepAlive returns a copy of b sending ": keep-alive" comments every d
// while a stream waits.
func (b Behavior) WithKeepAlive(d time.Duration) Behavior { b.KeepAlive = d; return b }

// WithHeader returns a copy of b that also sets response header k to v.
func (b Behavior) WithHeader(k, v string) Behavior {
	h := make(map[string]string, len(b.Headers)+1)
	maps.Copy(h, b.Headers)
	h[k] = v
	b.Headers = h
	return b
}

// AndClose returns a copy of b that closes the connection right after its
// fault event (a MalformedAt event) instead of continuing the stream. It has
// no effect on other behaviors.
func (b Behavior) AndClose() Behavior { b.closeAfterFault = true; return b }

// Kind reports what b does.
func (b Behavior) Kind() Kind {
	switch b.kind {
	case kindStatus:
		return KindStatus
	case kindReset:
		return KindReset
	case kindHang:
		return KindHang
	}
	switch b.fault {
	case faultCut:
		return KindCut
	case faultStall:
		return KindStall
	case faultMalformed, faultTruncated:
		return KindMalformed
	case faultErrorEvent:
		return KindErrorEvent
	}
	return KindOK
}

// StatusCode returns the HTTP status code b answers with: the code of a
// Status behavior, 200 for the answers that start normally, 0 for Reset
// and Hang, which send no status.
func (b Behavior) StatusCode() int {
	switch b.kind {
	case kindStatus:
		return b.status
	case kindReset, kindHang:
		return 0
	}
	return http.StatusOK
}

// promptTokens returns the effective prompt_tokens value.
func (b *Behavior) promptTokens() int {
	switch {
	case b.PromptTokens == 0:
		return PromptTokens
	case b.PromptTokens < 0:
		return 0
	}
	return b.PromptTokens
}

// tokens returns the effective number of content tokens.
func (b *Behavior) tokens() int {
	switch {
	case b.Tokens == 0:
		return DefaultTokens
	case b.Tokens < 0:
		return 0
	}
	return b.Tokens
}

const (
	bodyRateLimited = `{"error":{"message":"Rate limit reached for requests per min (RPM): Limit 60, Used 60, Requested 1. Please try again in 1s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`

	bodyInsufficientQuota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`

	bodyServerError = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`

	bodyOverloaded = `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}`

	bodyBadKey = `{"error":{"message":"Incorrect API key provided: sk-fake***********************1234. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`

	bodyContextLength = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9216 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`

	bodyContentFilter = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"high"}}}}}`

	bodyNotFound = `{"error":{"message":"Invalid URL","type":"invalid_request_error","param":null,"code":null}}`

	bodyBadJSON = `{"error":{"message":"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)","type":"invalid_request_error","param":null,"code":null}}`
)

// Tokens returns the content of a default answer of n tokens, as
// OK().WithTokens(n) streams it: "tok0 tok1 … tok<n-1>". Tests compare what
// their code received with it.
func Tokens(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("tok")
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}
