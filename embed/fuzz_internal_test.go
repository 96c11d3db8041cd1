package embed

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// refAnswer is what encoding/json makes of an embeddings answer under the
// decoder's rules (decodeRef), for the differential fuzz test.
type refAnswer struct {
	vectors      [][]float32
	model        string
	promptTokens int
	usageOK      bool
	errorBody    []byte
}

// errRefInvalid is decodeRef's verdict for a well-formed answer that fails
// the checks.
var errRefInvalid = errors.New("invalid answer")

// decodeRef decodes a valid JSON object with encoding/json and applies the
// checks decodeEmbeddings documents: the reference the hand-written decoder
// is held to. It assumes no object of in repeats a key (encoding/json keeps
// the last, the scanner reads each).
func decodeRef(in []byte, n int) (*refAnswer, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(in, &top); err != nil {
		return nil, err
	}
	out := &refAnswer{}
	if raw, ok := top["model"]; ok && raw[0] == '"' {
		if err := json.Unmarshal(raw, &out.model); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["usage"]; ok && raw[0] == '{' {
		var u map[string]json.RawMessage
		if err := json.Unmarshal(raw, &u); err != nil {
			return nil, err
		}
		tokens := func(k string) float64 {
			v, ok := u[k]
			if !ok || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
				return -1
			}
			var num json.Number
			if err := json.Unmarshal(v, &num); err != nil {
				return -1
			}
			f, err := strconv.ParseFloat(string(num), 64)
			if err != nil {
				return -1
			}
			return f
		}
		prompt, total := tokens("prompt_tokens"), tokens("total_tokens")
		switch {
		case prompt > 0 && prompt < math.MaxInt32:
			out.promptTokens, out.usageOK = int(prompt), true
		case total > 0 && total < math.MaxInt32:
			out.promptTokens, out.usageOK = int(total), true
		}
	}
	if raw, ok := top["error"]; ok && !emptyJSON(raw) {
		out.errorBody = append(append([]byte(`{"error":`), raw...), '}')
		return out, nil
	}
	raw, ok := top["data"]
	if !ok {
		return nil, errRefInvalid
	}
	if raw[0] != '[' {
		return nil, errRefInvalid // null: no entries; anything else: not an array
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, err
	}
	if len(entries) != n {
		return nil, errRefInvalid
	}
	out.vectors = make([][]float32, n)
	dim := 0
	for pos, e := range entries {
		if e[0] != '{' {
			return nil, errRefInvalid
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(e, &fields); err != nil {
			return nil, err
		}
		index := pos
		if v, ok := fields["index"]; ok {
			if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
				return nil, errRefInvalid
			}
			var num json.Number
			if err := json.Unmarshal(v, &num); err != nil {
				return nil, err
			}
			i, err := strconv.Atoi(string(num))
			if err != nil || i < 0 || i >= n {
				return nil, errRefInvalid
			}
			index = i
		}
		v, ok := fields["embedding"]
		if !ok {
			return nil, errRefInvalid
		}
		var vec []float32
		switch v[0] {
		case '[':
			var elems []json.RawMessage
			if err := json.Unmarshal(v, &elems); err != nil {
				return nil, err
			}
			for _, el := range elems {
				if el[0] != '-' && (el[0] < '0' || el[0] > '9') {
					return nil, errRefInvalid
				}
				var f float32
				if err := json.Unmarshal(el, &f); err != nil {
					return nil, errRefInvalid // out of float32's range
				}
				vec = append(vec, f)
			}
		case '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			enc := base64.StdEncoding
			if len(s)%4 != 0 {
				enc = base64.RawStdEncoding
			}
			// The decoder skips CR and LF; a vector never holds them.
			b, err := enc.DecodeString(s)
			if err != nil || strings.ContainsAny(s, "\r\n") || len(b)%4 != 0 {
				return nil, errRefInvalid
			}
			for k := 0; k < len(b); k += 4 {
				f := math.Float32frombits(binary.LittleEndian.Uint32(b[k:]))
				if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
					return nil, errRefInvalid
				}
				vec = append(vec, f)
			}
		default:
			return nil, errRefInvalid
		}
		if len(vec) == 0 || dim != 0 && len(vec) != dim || out.vectors[index] != nil {
			return nil, errRefInvalid
		}
		dim = len(vec)
		out.vectors[index] = vec
	}
	return out, nil
}

// repeatsKey reports whether some object of the valid JSON in repeats a key.
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
				k := tok.(string)
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

// FuzzDecodeEmbeddings holds the hand-written decoder to encoding/json: it
// rejects as malformed exactly the bodies encoding/json finds invalid (for
// bodies within its nesting bound), and for valid JSON objects it accepts
// and rejects what decodeRef does, with the same vectors, model and usage.
// Reading one byte at a time changes nothing.
func FuzzDecodeEmbeddings(f *testing.F) {
	f.Add(benchBody(2, 3, false), uint8(1))
	f.Add(benchBody(2, 3, true), uint8(1))
	for _, s := range []string{
		`{"data":[{"index":0,"embedding":[0.5,-1.25e-3,0]}],"model":"m\u00e9","usage":{"prompt_tokens":3}}`,
		`{"data":[{"embedding":"AACAPwAAAEA="},{"embedding":"AABAQAAAgEA"}],"usage":{"total_tokens":2.0}}`,
		`{"error":{"message":"bad","code":429},"data":null}`,
		`{"data":[{"embedding":[1]}]}garbage`,
		`{"data":[{"embedding":[01]}]}`,
		`{"data":[{"embedding":[.5]}]}`,
		`{"data":[{"embedding":[1]}],"model":"a\qb"}`,
		"{\"data\":[{\"embedding\":[1]}],\"model\":\"a\x01b\"}",
		"{\"data\":[{\"embedding\":\"AAAAAAAAAAAAAAAA\n\"}]}",
		`{"data":[{"embedding":"AAAAAAAAAAAAAAAA\n"}]}`,
		`{"data":[{"index":1e0,"embedding":[1,2]}]}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, nn uint8) {
		n := int(nn%4) + 1
		got, err := decodeEmbeddings(bytes.NewReader(in), n)
		slow, serr := decodeEmbeddings(iotest.OneByteReader(bytes.NewReader(in)), n)
		if (err == nil) != (serr == nil) || err != nil && err.Error() != serr.Error() {
			t.Fatalf("one byte at a time: %v; whole: %v", serr, err)
		}
		var me *malformedError
		var ie *invalidError
		if err != nil && !errors.As(err, &me) && !errors.As(err, &ie) {
			t.Fatalf("error %T %v is neither malformed nor invalid", err, err)
		}
		if bytes.Count(in, []byte("["))+bytes.Count(in, []byte("{")) > 200 {
			return // the scanner's nesting bound is lower than encoding/json's
		}
		valid := json.Valid(in)
		trimmed := bytes.TrimLeft(in, " \t\r\n")
		object := valid && len(trimmed) > 0 && trimmed[0] == '{'
		switch {
		case !valid:
			if me == nil {
				t.Fatalf("invalid JSON %q: err = %v, want malformed", in, err)
			}
			return
		case !object:
			if err == nil {
				t.Fatalf("%q is not an object but decoded", in)
			}
			return
		case me != nil:
			t.Fatalf("valid JSON %q rejected as malformed: %v", in, err)
		}
		if repeatsKey(in) {
			return
		}
		want, rerr := decodeRef(in, n)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("%q: decoder err = %v, encoding/json reference err = %v", in, err, rerr)
		}
		if err != nil {
			return
		}
		if !reflectVectors(got.vectors, want.vectors) || got.model != want.model ||
			got.promptTokens != want.promptTokens || got.usageOK != want.usageOK || !bytes.Equal(got.errorBody, want.errorBody) {
			t.Fatalf("%q:\n got %+v\nwant %+v", in, got, want)
		}
		if !reflectVectors(slow.vectors, got.vectors) || slow.model != got.model {
			t.Fatalf("one byte at a time: %+v, whole %+v", slow, got)
		}
	})
}

// reflectVectors compares vectors bit for bit (NaN never occurs; -0 ≠ 0).
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
