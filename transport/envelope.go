package transport

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// envelope is a provider's error body reduced to what classification needs.
type envelope struct {
	// code and typ are error.code and error.type as text ("" when null or
	// absent; integer codes become their decimal text).
	code, typ string
	// inner is Azure's innererror.code.
	inner string
	// param is error.param, the request field the provider blames ("" when
	// null or absent).
	param string
	// message is the provider's message (not yet trimmed or redacted).
	message string
	// status is an HTTP-like status the body states itself (integer code,
	// "status" field, base_resp mapping), 0 if none.
	status int
	// minimax is true for a base_resp envelope.
	minimax bool
	// json is true when the body was a JSON object.
	json bool
}

// parseEnvelope reads an error body of any known shape:
//
//	{"error":{"message","type","param","code"}}       OpenAI, DeepSeek, Qwen, Ollama, vLLM (integer code)
//	{"error":{"code":"1301","message":"…"}}            Zhipu (numeric string code, no type)
//	{"error":{…,"status":400,"innererror":{"code"}}}   Azure
//	{"object":"error","message","type","code"}         older vLLM, flat
//	{"type":"error","error":{"type","message"}}        Anthropic-style (MiniMax)
//	{"base_resp":{"status_code","status_msg"}}         MiniMax
//	{"error":"text"} / {"message":"…"} / {"detail":"…"} / {"code","message"}
//
// and non-JSON bodies (HTML from a proxy, plain text), whose text becomes
// the message.
func parseEnvelope(body []byte) envelope {
	var e envelope
	var l lexer
	l.reset(body)
	if l.peek() != '{' {
		e.message = plainText(body)
		return e
	}
	var (
		flatCode, flatType, flatMsg span
		errObj                      bool
		baseCode                    int64
		baseSet                     bool
		baseMsg                     span
	)
	l.open('{')
	first := true
	for l.more('}', &first) {
		switch string(l.key()) {
		case "error":
			switch l.peek() {
			case '{':
				errObj = true
				e.readErrorObject(&l)
			case '"':
				if s := l.str(); e.message == "" {
					e.message = l.string(s)
				}
			default:
				l.skip()
			}
		case "code", "error_code":
			flatCode = l.text()
		case "type":
			flatType = l.strOrNull()
		case "message", "msg", "error_msg", "detail":
			if s := l.strOrNull(); flatMsg.empty() {
				flatMsg = s
			}
		case "status":
			if n, ok := l.int(); ok && n >= 100 && n < 600 && e.status == 0 {
				e.status = int(n)
			}
		case "base_resp":
			if l.open('{') {
				f := true
				for l.more('}', &f) {
					switch string(l.key()) {
					case "status_code":
						baseCode, baseSet = l.int()
					case "status_msg":
						baseMsg = l.strOrNull()
					default:
						l.skip()
					}
				}
			}
		default:
			l.skip()
		}
	}
	l.finish()
	if l.err {
		// Not valid JSON after all: keep the text.
		return envelope{message: plainText(body)}
	}
	e.json = true
	if !errObj {
		if e.code == "" {
			e.code = l.string(flatCode)
		}
		if e.typ == "" {
			if t := l.string(flatType); t != "error" {
				e.typ = t
			}
		}
	}
	if e.message == "" {
		e.message = l.string(flatMsg)
	}
	if baseSet && baseCode != 0 {
		e.minimax = true
		if e.code == "" {
			e.code = strconv.FormatInt(baseCode, 10)
		}
		if e.message == "" {
			e.message = l.string(baseMsg)
		}
	}
	if e.status == 0 {
		if n, err := strconv.Atoi(e.code); err == nil && n >= 400 && n < 600 {
			e.status = n
		}
	}
	return e
}

// readErrorObject reads the object under "error".
func (e *envelope) readErrorObject(l *lexer) {
	l.open('{')
	first := true
	for l.more('}', &first) {
		switch string(l.key()) {
		case "code":
			if s := l.text(); s.set {
				e.code = l.string(s)
			}
		case "type":
			if s := l.strOrNull(); s.set {
				e.typ = l.string(s)
			}
		case "message":
			if s := l.strOrNull(); s.set {
				e.message = l.string(s)
			}
		case "param":
			if s := l.strOrNull(); s.set {
				e.param = l.string(s)
			}
		case "status":
			if n, ok := l.int(); ok && n >= 100 && n < 600 {
				e.status = int(n)
			}
		case "innererror":
			if l.open('{') {
				f := true
				for l.more('}', &f) {
					if string(l.key()) == "code" {
						if s := l.text(); s.set {
							e.inner = l.string(s)
						}
						continue
					}
					l.skip()
				}
			}
		default:
			l.skip()
		}
	}
}

// plainText turns a non-JSON body into a one-line message: an HTML page
// becomes its <title> (or its text without tags), whitespace collapses.
func plainText(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	if len(body) > 64<<10 {
		body = body[:64<<10]
	}
	if body[0] == '<' {
		lower := bytes.ToLower(body)
		if i := bytes.Index(lower, []byte("<title>")); i >= 0 {
			if j := bytes.Index(lower[i:], []byte("</title>")); j > 0 {
				body = body[i+len("<title>") : i+j]
			}
		} else {
			body = stripTags(body)
		}
	}
	return collapseSpace(string(body))
}

func stripTags(b []byte) []byte {
	out := make([]byte, 0, len(b))
	in := false
	for _, c := range b {
		switch {
		case c == '<':
			in = true
		case c == '>':
			in = false
			out = append(out, ' ')
		case !in:
			out = append(out, c)
		}
	}
	return out
}

func collapseSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// maxMessageBytes bounds the provider message kept in an error.
const maxMessageBytes = 1024

// boundMessage trims s and cuts it to maxMessageBytes at a rune boundary.
func boundMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessageBytes {
		return s
	}
	return cutUTF8(s, maxMessageBytes) + "…"
}

// cutUTF8 returns at most n bytes of s, not splitting a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
