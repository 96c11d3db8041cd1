package embed

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// decoded is one embeddings answer.
type decoded struct {
	// vectors are in index order, one per input.
	vectors [][]float32
	// model is the upstream's "model", if it sent one.
	model string
	// promptTokens is the measured usage when usageOK.
	promptTokens int
	usageOK      bool
	// errorBody is set when the answer carried a non-null top-level
	// "error" member: {"error": …}, ready for classification.
	errorBody []byte
}

// malformedError is an answer that is not JSON or is cut short: a
// transient failure (a proxy's page, a dropped connection).
type malformedError struct {
	msg string
	err error
}

func (e *malformedError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *malformedError) Unwrap() error { return e.err }

// invalidError is a well-formed answer that fails the checks: a
// ResultInvalidError.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// wireItem is one data[] entry. It is reused across entries: the
// decoder appends into Embedding's existing capacity.
type wireItem struct {
	Index     int             `json:"index"`
	Embedding json.RawMessage `json:"embedding"`
}

// wireUsage is the usage object; numbers are read leniently.
type wireUsage struct {
	PromptTokens *float64 `json:"prompt_tokens"`
	TotalTokens  *float64 `json:"total_tokens"`
}

// vectorSet collects the vectors of one answer into a single backing
// array sized once the first vector shows the dimension.
type vectorSet struct {
	n, dim  int
	count   int
	backing []float32
	slots   [][]float32
	b64     []byte
	// problem is the first check that failed; later entries are skipped.
	problem error
}

// decodeEmbeddings decodes an embeddings answer for n inputs from r with a
// streaming decoder: only one data[] entry is buffered at a time, and the
// numbers are parsed straight into the answer's backing array.
//
// Errors: *malformedError for syntax errors and truncation, *invalidError
// for answers that fail the checks (count, indices, dimensions, finite
// values), or r's own read error.
func decodeEmbeddings(r io.Reader, n int) (*decoded, error) {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxOrRead(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, &malformedError{msg: "response body is not a JSON object"}
	}
	out := &decoded{}
	vs := &vectorSet{n: n, slots: make([][]float32, n)}
	var raw json.RawMessage
	sawData := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxOrRead(err)
		}
		key, _ := tok.(string)
		switch key {
		case "data":
			sawData = true
			if err := decodeData(dec, vs); err != nil {
				return nil, err
			}
			continue
		}
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return nil, syntaxOrRead(err)
		}
		switch key {
		case "model":
			var s string
			if json.Unmarshal(raw, &s) == nil {
				out.model = s
			}
		case "usage":
			var u wireUsage
			if json.Unmarshal(raw, &u) == nil {
				switch {
				case u.PromptTokens != nil && *u.PromptTokens > 0:
					out.promptTokens, out.usageOK = int(*u.PromptTokens), true
				case u.TotalTokens != nil && *u.TotalTokens > 0:
					out.promptTokens, out.usageOK = int(*u.TotalTokens), true
				}
			}
		case "error":
			if !emptyJSON(raw) {
				out.errorBody = append(append([]byte(`{"error":`), raw...), '}')
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxOrRead(err)
	}
	if out.errorBody != nil {
		return out, nil
	}
	switch {
	case vs.problem != nil:
		return nil, vs.problem
	case !sawData:
		return nil, invalidf("answer has no data for %d inputs", n)
	case vs.count != n:
		return nil, invalidf("answer has %d embeddings for %d inputs", vs.count, n)
	}
	out.vectors = vs.slots
	return out, nil
}

// decodeData reads the data array entry by entry.
func decodeData(dec *json.Decoder, vs *vectorSet) error {
	tok, err := dec.Token()
	if err != nil {
		return syntaxOrRead(err)
	}
	if tok == nil {
		return nil // "data": null
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		vs.fail(invalidf("data is not an array"))
		if _, ok := tok.(json.Delim); ok {
			// An object: consume it to keep the decoder in step.
			return skipRest(dec)
		}
		return nil
	}
	var item wireItem
	for dec.More() {
		item.Index = -1
		item.Embedding = item.Embedding[:0]
		if err := dec.Decode(&item); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				vs.fail(invalidf("data entry %d is malformed: %v", vs.count, err))
				continue
			}
			return syntaxOrRead(err)
		}
		if vs.problem == nil {
			vs.add(item.Index, item.Embedding)
		}
	}
	_, err = dec.Token() // ']'
	return syntaxOrRead(err)
}

// skipRest consumes the rest of the object or array whose opening
// delimiter was just read.
func skipRest(dec *json.Decoder) error {
	var raw json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxOrRead(err)
		}
		if _, isKey := tok.(string); !isKey {
			continue
		}
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return syntaxOrRead(err)
		}
	}
	_, err := dec.Token()
	return syntaxOrRead(err)
}

func (vs *vectorSet) fail(err error) {
	if vs.problem == nil {
		vs.problem = err
	}
}

// add places one entry. index -1 means the entry had no index: it takes
// its position in the array.
func (vs *vectorSet) add(index int, raw []byte) {
	pos := vs.count
	if pos >= vs.n {
		vs.fail(invalidf("answer has more embeddings than the %d inputs", vs.n))
		return
	}
	if index == -1 {
		index = pos
	}
	if index < 0 || index >= vs.n {
		vs.fail(invalidf("data entry %d has index %d, outside 0..%d", pos, index, vs.n-1))
		return
	}
	if vs.slots[index] != nil {
		vs.fail(invalidf("index %d appears twice", index))
		return
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		vs.fail(invalidf("data entry %d has no embedding", pos))
		return
	}
	var err error
	switch raw[0] {
	case '[':
		err = vs.addFloats(index, raw)
	case '"':
		err = vs.addBase64(index, raw)
	default:
		err = invalidf("embedding %d is neither a number array nor a base64 string", index)
	}
	if err != nil {
		vs.fail(err)
		return
	}
	vs.count++
}

// slot returns the backing space of the next vector, allocating the
// backing array for all n vectors on the first call.
func (vs *vectorSet) slot(dim int) []float32 {
	if vs.backing == nil {
		vs.dim = dim
		vs.backing = make([]float32, vs.n*dim)
	}
	lo := vs.count * vs.dim
	return vs.backing[lo : lo+vs.dim : lo+vs.dim]
}

func (vs *vectorSet) addFloats(index int, raw []byte) error {
	if vs.dim == 0 {
		dim := countElements(raw)
		if dim == 0 {
			return invalidf("embedding %d is empty", index)
		}
		vs.slot(dim)
	}
	dst := vs.slot(vs.dim)
	got, err := parseFloats(raw, dst)
	if err != nil {
		return invalidf("embedding %d: %v", index, err)
	}
	if got != vs.dim {
		return invalidf("embedding %d has %d dimensions, the others %d", index, got, vs.dim)
	}
	vs.slots[index] = dst
	return nil
}

func (vs *vectorSet) addBase64(index int, raw []byte) error {
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		// JSON escapes inside base64 (e.g. "\/"): unescape first.
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return invalidf("embedding %d: %v", index, err)
		}
		s = []byte(str)
	}
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	if need := enc.DecodedLen(len(s)); cap(vs.b64) < need {
		vs.b64 = make([]byte, need)
	}
	nb, err := enc.Decode(vs.b64[:cap(vs.b64)], s)
	if err != nil {
		return invalidf("embedding %d is not valid base64: %v", index, err)
	}
	b := vs.b64[:nb]
	if len(b)%4 != 0 {
		return invalidf("embedding %d has %d bytes, not a whole number of float32 values", index, len(b))
	}
	dim := len(b) / 4
	if dim == 0 {
		return invalidf("embedding %d is empty", index)
	}
	if vs.dim != 0 && dim != vs.dim {
		return invalidf("embedding %d has %d dimensions, the others %d", index, dim, vs.dim)
	}
	dst := vs.slot(dim)
	for k := range dst {
		bits := binary.LittleEndian.Uint32(b[4*k:])
		if bits&0x7f800000 == 0x7f800000 {
			return invalidf("embedding %d has a non-finite value at %d", index, k)
		}
		dst[k] = math.Float32frombits(bits)
	}
	vs.slots[index] = dst
	return nil
}

// countElements counts the elements of a flat JSON array (non-numbers are
// caught later by parseFloats).
func countElements(raw []byte) int {
	inner := bytes.TrimSpace(raw[1 : len(raw)-1])
	if len(inner) == 0 {
		return 0
	}
	return bytes.Count(inner, []byte{','}) + 1
}

// parseFloats parses the JSON number array raw (already known to be valid
// JSON) into dst and returns how many numbers it holds. More numbers than
// dst holds are counted, not stored. Non-numbers and non-finite values are
// errors.
func parseFloats(raw []byte, dst []float32) (int, error) {
	k := 0
	i := 1 // after '['
	for {
		for i < len(raw) && isSpace(raw[i]) {
			i++
		}
		if i >= len(raw) || raw[i] == ']' {
			return k, nil
		}
		j := i
		for j < len(raw) && isNumByte(raw[j]) {
			j++
		}
		if j == i {
			return k, fmt.Errorf("element %d is not a number", k)
		}
		if k < len(dst) {
			f, err := strconv.ParseFloat(string(raw[i:j]), 32)
			if err != nil {
				var ne *strconv.NumError
				if !errors.As(err, &ne) || ne.Err != strconv.ErrRange || math.IsInf(f, 0) {
					return k, fmt.Errorf("element %d (%s) is not a finite float32", k, raw[i:j])
				}
				// Underflow rounds to zero or a denormal: keep it.
			}
			dst[k] = float32(f)
		}
		k++
		i = j
		for i < len(raw) && isSpace(raw[i]) {
			i++
		}
		if i < len(raw) && raw[i] == ',' {
			i++
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func isNumByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// emptyJSON reports whether raw is null, false, "" or {}: an "error"
// member that reports nothing.
func emptyJSON(raw []byte) bool {
	s := bytes.TrimSpace(raw)
	switch string(s) {
	case "", "null", "false", `""`, "{}", "[]":
		return true
	}
	return false
}

// syntaxOrRead turns a decoder error into a *malformedError, unless it is
// the reader's own failure (returned as is so the caller can classify it).
func syntaxOrRead(err error) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &malformedError{msg: "malformed response body", err: err}
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return &malformedError{msg: "response body cut short", err: err}
	}
	var rerr *readError
	if errors.As(err, &rerr) {
		return rerr
	}
	return &malformedError{msg: "malformed response body", err: err}
}

// readError wraps a failure of the response body reader.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// errTooLarge is returned by bodyReader past its limit.
var errTooLarge = errors.New("response body too large")

// bodyReader bounds the response body and marks its failures so that they
// are not mistaken for malformed JSON.
type bodyReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.n >= b.limit {
		return 0, &readError{err: errTooLarge}
	}
	if rem := b.limit - b.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil && err != io.EOF {
		err = &readError{err: err}
	}
	return n, err
}
