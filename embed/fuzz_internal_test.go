package embed

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/internal/transport"
)

// The reference: what encoding/json reads from an answer, judged by the
// rules decodeAnswer documents. It is written without the decoder's code:
// json.Valid for the syntax, json.Decoder.Decode of the whole body into
// the documented types (one per shape) for the values, and two more
// passes with json.RawMessage for what those types cannot show (an index
// that is null, a vector element that is null).

type refVerdict int

const (
	refAccepted refVerdict = iota
	refMalformed
	refInvalid
	refErrorBody
)

func (v refVerdict) String() string {
	return [...]string{"accepted", "malformed", "invalid", "error body"}[v]
}

type refAnswer[E any] struct {
	Data  []E             `json:"data"`
	Model any             `json:"model"`
	Usage any             `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type refFloat struct {
	Index     any       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

type refBase64 struct {
	Index     any    `json:"index"`
	Embedding string `json:"embedding"`
}

// refResult is the reference's reading of an answer.
type refResult struct {
	verdict refVerdict
	why     string
	got     decoded
	// stricter is set when the decoder may refuse what the reference
	// accepts: a body that repeats keys and holds a null (the reference
	// cannot tell which null survives the repetition).
	stricter bool
}

// refDecode reads body as an answer for n inputs asked for in format.
func refDecode(body []byte, n int, format string) refResult {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if !json.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{' {
		return refResult{verdict: refMalformed, why: "not a JSON object"}
	}
	decode := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		return dec.Decode(v)
	}
	var fa refAnswer[refFloat]
	var ba refAnswer[refBase64]
	ferr, berr := decode(&fa), decode(&ba)
	for _, err := range []error{ferr, berr} {
		var te *json.UnmarshalTypeError
		if err != nil && !errors.As(err, &te) {
			return refResult{verdict: refMalformed, why: err.Error()}
		}
	}
	var out refResult
	out.got.model, _ = fa.Model.(string)
	out.got.promptTokens, out.got.usageOK = refUsage(fa.Usage)
	switch string(bytes.TrimSpace(fa.Error)) {
	case "", "null", "false", `""`, "{}", "[]":
	default:
		out.verdict, out.got.errorBody = refErrorBody, append(append([]byte(`{"error":`), fa.Error...), '}')
		return out
	}
	if body, ok := refFlatError(decode); ok {
		out.verdict, out.got.errorBody = refErrorBody, body
		return out
	}
	useFloat := ferr == nil && (berr != nil || format != EncodingBase64)
	if ferr != nil && berr != nil {
		return refResult{verdict: refInvalid, why: "type error: " + ferr.Error() + " / " + berr.Error()}
	}
	var raw struct {
		Data []struct {
			Index     json.RawMessage   `json:"index"`
			Embedding []json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	_ = decode(&raw) // its type errors are those above
	out.stricter = repeatsKey(body) && bytes.Contains(body, []byte("null"))
	length := len(fa.Data)
	if !useFloat {
		length = len(ba.Data)
	}
	if length != n {
		out.verdict, out.why = refInvalid, strconv.Itoa(length)+" entries for "+strconv.Itoa(n)+" inputs"
		return out
	}
	vecs := make([][]float32, n)
	dim := -1
	for pos := range n {
		var (
			index any
			vec   []float32
			why   string
		)
		if useFloat {
			index, vec = fa.Data[pos].Index, fa.Data[pos].Embedding
			if !out.stricter && pos < len(raw.Data) {
				for _, el := range raw.Data[pos].Embedding {
					if string(el) == "null" {
						why = "null element"
					}
				}
			}
		} else {
			index = ba.Data[pos].Index
			vec, why = refBase64Vector(ba.Data[pos].Embedding)
		}
		idx := pos
		switch {
		case pos < len(raw.Data) && string(raw.Data[pos].Index) == "null":
			why = "null index"
		case pos < len(raw.Data) && raw.Data[pos].Index != nil:
			num, ok := index.(json.Number)
			i, err := strconv.Atoi(string(num))
			if !ok || err != nil || i < 0 || i >= n {
				why = "index " + string(raw.Data[pos].Index)
			}
			idx = i
		}
		if dim < 0 {
			dim = len(vec)
		}
		switch {
		case why != "":
		case len(vec) == 0:
			why = "no vector"
		case len(vec) != dim:
			why = "another dimension"
		case vecs[idx] != nil:
			why = "index twice"
		}
		if why != "" {
			out.verdict, out.why = refInvalid, "entry "+strconv.Itoa(pos)+": "+why
			return out
		}
		vecs[idx] = vec
	}
	out.got.vectors = vecs
	return out
}

// refMark is a "type" or "object" as the chat transport reads it: the
// last string decides whether it is "error".
type refMark bool

func (m *refMark) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*m = s == "error"
	}
	return nil
}

// refStatus is a base_resp.status_code as the chat transport reads it:
// the last number, clamped to 0..2^53 and truncated.
type refStatus int64

func (c *refStatus) UnmarshalJSON(b []byte) error {
	var f float64
	if b[0] != '"' && b[0] != 'n' && json.Unmarshal(b, &f) == nil { // null leaves it too
		*c = refStatus(min(max(f, 0), 1<<53))
	}
	return nil
}

// refFlatError reads a flat error envelope as the package documents it:
// its error body holds the last value of each envelope member.
func refFlatError(decode func(any) error) ([]byte, bool) {
	var marks struct {
		Object   refMark `json:"object"`
		Type     refMark `json:"type"`
		BaseResp struct {
			StatusCode refStatus `json:"status_code"`
		} `json:"base_resp"`
	}
	_ = decode(&marks) // a base_resp that is not an object leaves it as it was
	if !marks.Object && !marks.Type && marks.BaseResp.StatusCode == 0 {
		return nil, false
	}
	var members struct {
		BaseResp  json.RawMessage `json:"base_resp,omitempty"`
		Code      json.RawMessage `json:"code,omitempty"`
		Detail    json.RawMessage `json:"detail,omitempty"`
		ErrorCode json.RawMessage `json:"error_code,omitempty"`
		ErrorMsg  json.RawMessage `json:"error_msg,omitempty"`
		Message   json.RawMessage `json:"message,omitempty"`
		Msg       json.RawMessage `json:"msg,omitempty"`
		Object    json.RawMessage `json:"object,omitempty"`
		Status    json.RawMessage `json:"status,omitempty"`
		Type      json.RawMessage `json:"type,omitempty"`
	}
	_ = decode(&members)
	body, _ := json.Marshal(members)
	return body, true
}

// refUsage reads usage as the package documents it.
func refUsage(u any) (int, bool) {
	m, _ := u.(map[string]any)
	for _, k := range []string{"prompt_tokens", "total_tokens"} {
		if num, ok := m[k].(json.Number); ok {
			f, err := strconv.ParseFloat(string(num), 64)
			if err == nil && f > 0 && f < math.MaxInt32 {
				return int(f), true
			}
		}
	}
	return 0, false
}

// refBase64Vector decodes a base64 vector: only the base64 alphabet (and
// padding), a whole number of finite float32 values.
func refBase64Vector(s string) ([]float32, string) {
	for _, c := range []byte(s) {
		if !isBase64Byte(c) {
			return nil, "not base64"
		}
	}
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		return nil, "not a float32 vector"
	}
	out := make([]float32, len(b)/4)
	for k := range out {
		f := math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, "not finite"
		}
		out[k] = f
	}
	return out, ""
}

// repeatsKey reports whether some object of the valid JSON in repeats a
// key (as encoding/json matches keys: case-insensitively).
func repeatsKey(in []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(in))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next token of an object is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			top := &stack[len(stack)-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
				continue
			}
			if top.key {
				k := string(bytes.ToLower([]byte(tok.(string))))
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.key = false
				continue
			}
			top.key = true // this token is a value (or opens one)
		}
		switch tok {
		case json.Delim('{'):
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
			stack = append(stack, frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// nesting is the deepest nesting of brackets in in, strings aside.
func nesting(in []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// verdictOf is the class of decodeAnswer's result.
func verdictOf(d *decoded, err error) refVerdict {
	var (
		me *malformedError
		ie *invalidError
	)
	switch {
	case err == nil && d.errorBody != nil:
		return refErrorBody
	case err == nil:
		return refAccepted
	case errors.As(err, &me):
		return refMalformed
	case errors.As(err, &ie):
		return refInvalid
	}
	return -1
}

// checkAgainstRef holds decodeAnswer's reading of body (read in the given
// sizes) to the reference and to its own reading of the whole body.
func checkAgainstRef(t *testing.T, body []byte, n int, format string, sizes []byte) {
	t.Helper()
	whole, werr := decodeAnswer(bytes.NewReader(body), n, format)
	got, err := decodeAnswer(&testkit.SplitReader{Data: body, Sizes: sizes}, n, format)
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("%q in reads of %v: %v; read whole: %v", body, sizes, err, werr)
	}
	if err == nil && !sameDecoded(got, whole) {
		t.Fatalf("%q in reads of %v:\n got %+v\nwhole %+v", body, sizes, got, whole)
	}
	v := verdictOf(got, err)
	if v < 0 {
		t.Fatalf("%q: error %T %v is neither malformed nor invalid", body, err, err)
	}
	if nesting(body) > maxJSONDepth-10 {
		return // the limit counts from each value the decoder reads, not from the body
	}
	ref := refDecode(body, n, format)
	if v != ref.verdict {
		if ref.stricter && ref.verdict == refAccepted && v == refInvalid {
			return
		}
		t.Fatalf("%q as %s for %d inputs: decoder %s (%v), encoding/json %s (%s)", body, format, n, v, err, ref.verdict, ref.why)
	}
	if err == nil && !sameDecoded(got, &ref.got) {
		t.Fatalf("%q as %s:\n got %+v\nwant %+v", body, format, got, ref.got)
	}
}

// sameDecoded compares two readings, vectors bit for bit.
func sameDecoded(a, b *decoded) bool {
	return reflectVectors(a.vectors, b.vectors) && a.model == b.model && a.promptTokens == b.promptTokens &&
		a.usageOK == b.usageOK && sameErrorBody(a.errorBody, b.errorBody)
}

// FuzzDecodeEmbeddings holds the decoder to encoding/json (refDecode) on
// any body, for either requested format, read in any sizes: the same
// verdict (malformed, invalid, an error body or accepted), the same
// vectors, model and usage, and the same result as reading it whole.
func FuzzDecodeEmbeddings(f *testing.F) {
	f.Add(benchBody(2, 3, false), uint8(1), false, []byte{1})
	f.Add(benchBody(2, 3, true), uint8(1), true, []byte{7, 3})
	for _, s := range []string{
		`{"data":[{"index":0,"embedding":[0.5,-1.25e-3,0]}],"model":"m\u00e9","usage":{"prompt_tokens":3}}`,
		`{"data":[{"embedding":"AACAPwAAAEA="},{"embedding":"AABAQAAAgEA"}],"usage":{"total_tokens":2.0}}`,
		`{"error":{"message":"bad","code":429},"data":null}`,
		`{"data":[{"embedding":[1]}]}garbage`,
		`{"data":[{"embedding":[01]}]}`,
		`{"data":[{"embedding":[1]}],"model":"a\qb"}`,
		"{\"data\":[{\"embedding\":[1]}],\"model\":\"a\x01b\"}",
		`{"data":[{"embedding":"AAAAAAAAAAAAAAAA\n"}]}`,
		`{"data":[{"index":1e0,"embedding":[1,2]}]}`,
		`{"data":[{"embedding":[1,null]}]}`,
		`{"data":[{"index":null,"embedding":[1]}]}`,
		`{"DATA":[{"Embedding":[1],"INDEX":0}],"Model":"x"}`,
		`{"data":[{"embedding":[1,2]}],"data":[{"embedding":[3]}]}`,
		`{"data":[{"embedding":"AACAPw=="},{"embedding":[1]}]}`,
		`{"data":[{"embedding":[3.4028235e38,1e-46,-0,16777217]}],"model":"\ud83d\ude00\udc00"}`,
		`{"object":"error","message":"overloaded","Type":"x","code":503,"TYPE":5}`,
		`{"data":[{"embedding":[1]}],"base_resp":{"status_code":1004,"status_msg":"login fail"},"base_resp":"x"}`,
		`{"data":[{"embedding":[1]}],"base_resp":{"status_code":0.5},"type":"error","type":"list"}`,
	} {
		f.Add([]byte(s), uint8(0), false, []byte{2})
	}
	f.Fuzz(func(t *testing.T, in []byte, nn uint8, b64 bool, sizes []byte) {
		format := EncodingFloat
		if b64 {
			format = EncodingBase64
		}
		checkAgainstRef(t, in, int(nn%4)+1, format, sizes)
	})
}

// reflectVectors compares vectors bit for bit (-0 ≠ 0).
func reflectVectors(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for k := range a[i] {
			if math.Float32bits(a[i][k]) != math.Float32bits(b[i][k]) {
				return false
			}
		}
	}
	return true
}

// FuzzEmbeddingsErrorBody reads error answers as the upstream does, in
// any read sizes: a non-2xx body is read up to its bound and classified
// exactly as its first bytes are, whatever the reads; a 200 body's
// top-level "error" member is what encoding/json reads there, and it is
// classified, never accepted.
func FuzzEmbeddingsErrorBody(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`,
		`{"error":{"message":"bad","type":null,"code":400}}`,
		`{"object":"error","message":"flat","code":503}`,
		`<html>502 Bad Gateway</html>`,
		`{"error":{"code":"1113","message":"余额不足"}}`,
		`{"data":[],"error":{"message":"x"}}`,
	} {
		f.Add([]byte(s), uint16(429), []byte{3})
	}
	src := &core.SourceConfig{Name: "s_1", Provider: "openai"}
	prof := transport.ProfileFor(transport.DefaultProfiles(), src.Provider)
	f.Fuzz(func(t *testing.T, in []byte, status uint16, sizes []byte) {
		code := 400 + int(status)%200
		body := &bodyReader{r: &testkit.SplitReader{Data: in, Sizes: sizes}, limit: maxBodyBytes}
		got, err := readErrorBody(body)
		want := in[:min(len(in), transport.DefaultMaxErrorBodyBytes)]
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("readErrorBody in reads of %v = %q, %v; want %q", sizes, got, err, want)
		}
		a := transport.ClassifyResponse(src, prof, code, http.Header{}, got)
		b := transport.ClassifyResponse(src, prof, code, http.Header{}, want)
		if a == nil || a.Error() != b.Error() {
			t.Fatalf("classified %v, the whole body %v", a, b)
		}
		d, derr := decodeAnswer(&testkit.SplitReader{Data: in, Sizes: sizes}, 1, EncodingFloat)
		ref := refDecode(in, 1, EncodingFloat)
		if ref.verdict == refErrorBody && (derr != nil || !sameErrorBody(d.errorBody, ref.got.errorBody)) {
			t.Fatalf("%q: error body %q (%v), encoding/json reads %q", in, d.errorBody, derr, ref.got.errorBody)
		}
		if derr == nil && d.errorBody != nil && transport.ClassifyResponse(src, prof, 200, http.Header{}, d.errorBody) == nil {
			t.Fatalf("%q: the error member %q was not classified as an error", in, d.errorBody)
		}
	})
}

// isBase64Byte reports whether c is of the standard base64 alphabet or is
// its padding.
func isBase64Byte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

// sameErrorBody reports whether two error bodies say the same: equal, or
// objects whose members, the last of repeated keys winning, are the same
// JSON (the decoder keeps a flat envelope's members as the answer gave
// them, repeats included; the reference keeps the last of each).
func sameErrorBody(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil || len(ma) != len(mb) {
		return false
	}
	for k, va := range ma {
		vb, ok := mb[k]
		var ca, cb bytes.Buffer
		if !ok || json.Compact(&ca, va) != nil || json.Compact(&cb, vb) != nil || !bytes.Equal(ca.Bytes(), cb.Bytes()) {
			return false
		}
	}
	return true
}
