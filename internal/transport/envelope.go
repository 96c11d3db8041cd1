package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/polygateway/polygateway/internal/redact"
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
// the message. A JSON body is read with encoding/json into wireEnvelope
// (see wire.go for the rules); of the flat message members the first
// non-empty one in the order message, msg, error_msg, detail is taken.
func parseEnvelope(body []byte) envelope {
	var w wireEnvelope
	if !isObject(body) {
		return envelope{message: plainText(body)}
	}
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(body, &w); err != nil && !errors.As(err, &te) {
		// Not valid JSON after all: keep the text.
		return envelope{message: plainText(body)}
	}
	eo := &w.Error
	e := envelope{json: true, code: string(eo.Code), typ: eo.Type.s, param: eo.Param.s, inner: string(eo.InnerError.Code), message: eo.Message.s}
	if n := eo.Status.n; eo.Status.ok && n >= 100 && n < 600 {
		e.status = int(n)
	} else if n := w.Status.n; w.Status.ok && n >= 100 && n < 600 {
		e.status = int(n)
	}
	if !eo.object {
		e.code = cmpOr(string(w.Code), string(w.ErrorCode))
		if w.Type.s != "error" {
			e.typ = w.Type.s
		}
	}
	for _, m := range [...]string{eo.Message.s, eo.text, w.Message.s, w.Msg.s, w.ErrorMsg.s, w.Detail.s} {
		if m != "" {
			e.message = m
			break
		}
	}
	if b := &w.BaseResp; b.StatusCode.ok && b.StatusCode.n != 0 {
		e.minimax = true
		if e.code == "" {
			e.code = strconv.FormatInt(b.StatusCode.n, 10)
		}
		if e.message == "" {
			e.message = b.StatusMsg.s
		}
	}
	if e.status == 0 {
		if n, err := strconv.Atoi(e.code); err == nil && n >= 400 && n < 600 {
			e.status = n
		}
	}
	return e
}

// wireEnvelope is an error body as read (see parseEnvelope).
type wireEnvelope struct {
	Error     errorMember `json:"error"`
	Code      codeText    `json:"code"`
	ErrorCode codeText    `json:"error_code"`
	Type      optString   `json:"type"`
	Message   optString   `json:"message"`
	Msg       optString   `json:"msg"`
	ErrorMsg  optString   `json:"error_msg"`
	Detail    optString   `json:"detail"`
	Status    count       `json:"status"`
	BaseResp  struct {
		StatusCode count     `json:"status_code"`
		StatusMsg  optString `json:"status_msg"`
	} `json:"base_resp"`
}

// errorFields are the members of an "error" object.
type errorFields struct {
	Code       codeText  `json:"code"`
	Type       optString `json:"type"`
	Message    optString `json:"message"`
	Param      optString `json:"param"`
	Status     count     `json:"status"`
	InnerError struct {
		Code codeText `json:"code"`
	} `json:"innererror"`
}

// errorMember is the "error" member of an error body: an object of
// errorFields, or a string (its text).
type errorMember struct {
	errorFields
	object bool
	text   string
}

// UnmarshalJSON implements json.Unmarshaler.
func (m *errorMember) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '{':
		m.object = true
		var te *json.UnmarshalTypeError
		if err := json.Unmarshal(b, &m.errorFields); err != nil && !errors.As(err, &te) {
			return err
		}
	case '"':
		return json.Unmarshal(b, &m.text)
	}
	return nil
}

// codeText is an error code given as a string (its text) or a number (its
// JSON text as written); other kinds leave it as it was.
type codeText string

// UnmarshalJSON implements json.Unmarshaler.
func (c *codeText) UnmarshalJSON(b []byte) error {
	switch {
	case b[0] == '"':
		return json.Unmarshal(b, (*string)(c))
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		*c = codeText(b)
	}
	return nil
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
	return redact.CutRunes(s, maxMessageBytes) + "…"
}

// IsErrorAnswer reports whether body, a JSON object a 2xx answer carried,
// is an error envelope by the rules a chat answer is read with: a
// non-empty "error" member, an "object" or "type" whose last string is
// "error", or MiniMax's base_resp.status_code other than 0 (see
// wireChunk.isError). The embeddings client asks it of the envelope
// members it kept, so that both read an error in a 200 alike.
func IsErrorAnswer(body []byte) bool {
	var c wireChunk
	return decodeChunk(body, &c) && c.isError()
}
