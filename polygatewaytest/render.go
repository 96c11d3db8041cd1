package polygatewaytest

import (
	"encoding/json"
	"strconv"
	"sync"
)

// maxRendered bounds the per-server cache of rendered answers; beyond it
// answers are rendered per request and not kept.
const maxRendered = 256

// renderKey identifies one rendered answer.
type renderKey struct {
	model         string
	tokens        int    // used when content is empty
	content       string // Behavior.Content
	prompt        int    // prompt_tokens reported
	thinking      string
	thinkingField string
	usage         string // Behavior.Usage
}

// rendered holds every byte sequence needed to answer one renderKey, built
// once. The slices are shared between requests and never mutated.
type rendered struct {
	full          []byte   // non-streaming body with usage
	fullNoUsage   []byte   // non-streaming body without usage
	fullLen       string   // len(full) in decimal
	fullNoUseLen  string   // len(fullNoUsage) in decimal
	thinkingChunk []byte   // stream: reasoning delta, nil without thinking
	chunks        [][]byte // stream: one event per content token
	finish        []byte   // stream: empty delta with finish_reason "stop"
	usage         []byte   // stream: separate usage chunk with "choices": []
}

// Fixed stream events.
var (
	eventDone      = []byte("data: [DONE]\n\n")
	eventKeepAlive = []byte(": keep-alive\n\n")
	eventMalformed = []byte(`data: {"choices":[{"delta":{"content":"x"` + "\n\n")
	eventError     = []byte(`data: {"error":{"object":"error","message":"The model server encountered an internal error while generating. Please retry.","type":"InternalServerError","param":null,"code":500}}` + "\n\n")
	bodyErrorEvent = []byte(`{"error":{"object":"error","message":"The model server encountered an internal error while generating. Please retry.","type":"InternalServerError","param":null,"code":500}}`)
	bodyMalformed  = []byte(`{"id":"chatcmpl-polygatewaytest","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x`)
	lenErrorEvent  = strconv.Itoa(len(bodyErrorEvent))
	lenMalformed   = strconv.Itoa(len(bodyMalformed))
	hdrJSON        = []string{"application/json"}
	hdrEventStream = []string{"text/event-stream; charset=utf-8"}
	hdrNoCache     = []string{"no-cache"}
	hdrPlainText   = []string{"text/plain; charset=utf-8"}
	hdrNoSniff     = []string{"nosniff"}
)

// renderCache is a bounded, concurrency-safe map of rendered answers.
type renderCache struct {
	mu      sync.RWMutex
	m       map[renderKey]*rendered
	created int64
}

func (c *renderCache) get(k renderKey) *rendered {
	c.mu.RLock()
	r := c.m[k]
	c.mu.RUnlock()
	if r != nil {
		return r
	}
	r = render(k, c.created)
	c.mu.Lock()
	if old := c.m[k]; old != nil {
		r = old
	} else if len(c.m) < maxRendered {
		c.m[k] = r
	}
	c.mu.Unlock()
	return r
}

// quote returns s as a JSON string literal.
func quote(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// splitContent splits s into tokens, each one starting at a run of
// whitespace that follows non-whitespace; whitespace at the very start stays
// with the first token and trailing whitespace with the last.
func splitContent(s string) []string {
	var out []string
	start, seen := 0, false // seen: the current token has non-whitespace
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			if seen && i > start && hasNonSpaceAfter(s, i) {
				out = append(out, s[start:i])
				start, seen = i, false
			}
		default:
			seen = true
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// hasNonSpaceAfter reports whether s[i:] holds a non-whitespace byte.
func hasNonSpaceAfter(s string, i int) bool {
	for ; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return true
		}
	}
	return false
}

// contentTokens returns the JSON-escaped text (without quotes) of every
// content token of k.
func contentTokens(k renderKey) [][]byte {
	if k.content != "" {
		parts := splitContent(k.content)
		toks := make([][]byte, len(parts))
		for i, p := range parts {
			q := quote(p)
			toks[i] = q[1 : len(q)-1]
		}
		return toks
	}
	toks := make([][]byte, k.tokens)
	for i := range k.tokens {
		var tok []byte
		if i > 0 {
			tok = append(tok, ' ')
		}
		tok = append(tok, "tok"...)
		toks[i] = strconv.AppendInt(tok, int64(i), 10) // tokens need no escaping
	}
	return toks
}

// render builds every byte sequence of one answer.
func render(k renderKey, created int64) *rendered {
	toks := contentTokens(k)
	model := quote(k.model)
	field := k.thinkingField
	if field == "" {
		field = "reasoning_content"
	}
	createdS := strconv.FormatInt(created, 10)
	chunkHead := renderChunkHead(model, createdS)
	usage := renderUsage(k, len(toks))
	r := &rendered{chunks: make([][]byte, len(toks))}
	content := r.renderStream(k, toks, chunkHead, usage, field)
	r.renderFull(k, content, usage, model, createdS, field)
	return r
}

// renderChunkHead is the prefix every stream chunk shares, up to its
// choices.
func renderChunkHead(model []byte, createdS string) []byte {
	chunkHead := make([]byte, 0, 128)
	chunkHead = append(chunkHead, `data: {"id":"chatcmpl-polygatewaytest","object":"chat.completion.chunk","created":`...)
	chunkHead = append(chunkHead, createdS...)
	chunkHead = append(chunkHead, `,"model":`...)
	chunkHead = append(chunkHead, model...)
	chunkHead = append(chunkHead, `,"choices":[`...)
	return chunkHead
}

// renderUsage is the "usage" member of an answer of n content tokens: the
// key's own usage object when it has one.
func renderUsage(k renderKey, n int) []byte {
	usage := make([]byte, 0, 96)
	usage = append(usage, `"usage":`...)
	if k.usage != "" {
		return append(usage, k.usage...)
	}
	usage = append(usage, `{"prompt_tokens":`...)
	usage = strconv.AppendInt(usage, int64(k.prompt), 10)
	usage = append(usage, `,"completion_tokens":`...)
	usage = strconv.AppendInt(usage, int64(n), 10)
	usage = append(usage, `,"total_tokens":`...)
	usage = strconv.AppendInt(usage, int64(n+k.prompt), 10)
	return append(usage, '}')
}

// renderStream fills the stream chunks of r (content, thinking, finish,
// usage) in one backing array and returns the content as one string.
func (r *rendered) renderStream(k renderKey, toks [][]byte, chunkHead, usage []byte, field string) []byte {
	var content []byte
	perChunk := len(chunkHead) + 96
	buf := make([]byte, 0, len(toks)*perChunk+2*len(k.content)+len(k.thinking)+2*len(chunkHead)+256)
	for i, tok := range toks {
		content = append(content, tok...)

		start := len(buf)
		buf = append(buf, chunkHead...)
		buf = append(buf, `{"index":0,"delta":{`...)
		if i == 0 && k.thinking == "" {
			buf = append(buf, `"role":"assistant",`...)
		}
		buf = append(buf, `"content":"`...)
		buf = append(buf, tok...) // already escaped
		buf = append(buf, `"},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		r.chunks[i] = buf[start:len(buf):len(buf)]
	}
	if k.thinking != "" {
		start := len(buf)
		buf = append(buf, chunkHead...)
		buf = append(buf, `{"index":0,"delta":{"role":"assistant","content":null,`...)
		buf = append(buf, quote(field)...)
		buf = append(buf, ':')
		buf = append(buf, quote(k.thinking)...)
		buf = append(buf, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		r.thinkingChunk = buf[start:len(buf):len(buf)]
	}
	start := len(buf)
	buf = append(buf, chunkHead...)
	buf = append(buf, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`+"\n\n"...)
	r.finish = buf[start:len(buf):len(buf)]

	start = len(buf)
	buf = append(buf, chunkHead...)
	buf = append(buf, "],"...)
	buf = append(buf, usage...)
	buf = append(buf, "}\n\n"...)
	r.usage = buf[start:len(buf):len(buf)]
	return content
}

// renderFull fills the non-streaming bodies of r, with and without usage,
// and their lengths.
func (r *rendered) renderFull(k renderKey, content, usage, model []byte, createdS, field string) {
	body := make([]byte, 0, len(content)+len(k.thinking)+len(usage)+256)
	body = append(body, `{"id":"chatcmpl-polygatewaytest","object":"chat.completion","created":`...)
	body = append(body, createdS...)
	body = append(body, `,"model":`...)
	body = append(body, model...)
	body = append(body, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	body = append(body, content...)
	body = append(body, '"')
	if k.thinking != "" {
		body = append(body, ',')
		body = append(body, quote(field)...)
		body = append(body, ':')
		body = append(body, quote(k.thinking)...)
	}
	body = append(body, `},"logprobs":null,"finish_reason":"stop"}]`...)
	noUsage := len(body)
	body = append(body, ',')
	body = append(body, usage...)
	body = append(body, '}')
	r.full = body

	r.fullNoUsage = make([]byte, 0, noUsage+1)
	r.fullNoUsage = append(r.fullNoUsage, body[:noUsage]...)
	r.fullNoUsage = append(r.fullNoUsage, '}')
	r.fullLen = strconv.Itoa(len(r.full))
	r.fullNoUseLen = strconv.Itoa(len(r.fullNoUsage))
}
