package embed

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Decoding an embeddings answer.
//
// The answer is read with a small streaming JSON scanner (scanner.go)
// rather than encoding/json. Measured on answers of 64 × 256 values
// (BenchmarkDecode, values with all the digits of a float32), encoding/json
// — a Decoder into json.RawMessage entries, then []float32 — costs about
// 12× more time per vector for both forms, with 12 and 7 allocations per
// vector; here the scanner reads the body in chunks (only the token being
// read — at most one base64 vector — must fit in its buffer), numbers are
// parsed by a Clinger fast path (float.go) straight into one backing array
// per answer, base64 is decoded in place, and an answer costs a handful of
// allocations in all. Against encoding/json/jsontext (the standard
// library's, built with GOEXPERIMENT=jsonv2: BenchmarkDecodeJSONText)
// the float form is about 3.5× faster, the base64 form about 1.5×.
//
// The scanner is as strict as encoding/json: escapes, raw control
// characters, JSON's number grammar and anything after the object are
// checked, and FuzzDecodeEmbeddings holds it to encoding/json — the same
// vectors, model and usage, and invalid JSON rejected (as malformed)
// exactly when encoding/json rejects it.

// decoded is one embeddings answer.
type decoded struct {
	// vectors are in index order, one per input.
	vectors [][]float32
	// model is the upstream's "model", if it sent one.
	model string
	// promptTokens is the measured usage when usageOK.
	promptTokens int
	usageOK      bool
	// errorBody is set when the answer carried a non-empty top-level
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

// vectorSet collects the vectors of one answer into a single backing
// array, sized once the first vector shows the dimension.
type vectorSet struct {
	n, dim  int
	count   int
	backing []float32
	slots   [][]float32
	// problem is the first check that failed; later entries are only
	// consumed.
	problem error
}

func (vs *vectorSet) fail(err error) {
	if vs.problem == nil {
		vs.problem = err
	}
}

// decodeEmbeddings decodes an embeddings answer for n inputs from r.
//
// Errors: *malformedError for input that is not JSON or is cut short,
// *readError for r's own failures, *invalidError for answers that fail
// the checks (count, indices, dimensions, finite values). An answer with
// a non-empty top-level "error" member returns its errorBody instead.
func decodeEmbeddings(r io.Reader, n int) (*decoded, error) {
	s := scanners.Get().(*scanner)
	s.r, s.pos, s.end, s.off, s.mark, s.err = r, 0, 0, 0, -1, nil
	d, err := s.decode(n)
	s.r = nil
	if len(s.buf) <= maxPooledBytes && cap(s.b64) <= maxPooledBytes && cap(s.floats) <= maxPooledBytes/4 {
		scanners.Put(s)
	}
	return d, err
}

func (s *scanner) decode(n int) (*decoded, error) {
	c, err := s.peek()
	if err != nil {
		return nil, err
	}
	if c != '{' {
		return nil, &malformedError{msg: "response body is not a JSON object"}
	}
	out := &decoded{}
	vs := &vectorSet{n: n, slots: make([][]float32, n)}
	sawData := false
	err = s.object(func(k []byte) error {
		switch string(k) {
		case "data":
			sawData = true
			return s.data(vs)
		case "model":
			return s.model(out)
		case "usage":
			return s.usage(out)
		case "error":
			raw, err := s.capture()
			if err == nil && !emptyJSON(raw) {
				out.errorBody = append(append([]byte(`{"error":`), raw...), '}')
			}
			return err
		}
		return s.skip(0)
	})
	if err == nil {
		err = s.finish()
	}
	if err != nil {
		return nil, err
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

func (s *scanner) model(out *decoded) error {
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c != '"' {
		return s.skip(0)
	}
	v, esc, err := s.str(true)
	if err != nil {
		return err
	}
	out.model = unescape(v, esc)
	return nil
}

func (s *scanner) usage(out *decoded) error {
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c != '{' {
		return s.skip(0)
	}
	prompt, total := -1.0, -1.0
	err = s.object(func(k []byte) error {
		field := string(k)
		c, err := s.peek()
		if err != nil {
			return err
		}
		if (field != "prompt_tokens" && field != "total_tokens") || c != '-' && (c < '0' || c > '9') {
			return s.skip(1)
		}
		tok, err := s.number()
		if err != nil {
			return err
		}
		v, perr := strconv.ParseFloat(string(tok), 64)
		if perr != nil {
			v = -1
		}
		if field == "prompt_tokens" {
			prompt = v
		} else {
			total = v
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case prompt > 0 && prompt < math.MaxInt32:
		out.promptTokens, out.usageOK = int(prompt), true
	case total > 0 && total < math.MaxInt32:
		out.promptTokens, out.usageOK = int(total), true
	}
	return nil
}

// data reads the data array entry by entry.
func (s *scanner) data(vs *vectorSet) error {
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c != '[' {
		if c != 'n' {
			vs.fail(invalidf("data is not an array"))
		}
		return s.skip(0)
	}
	s.pos++
	for first := true; ; first = false {
		more, err := s.next(first, ']')
		if err != nil || !more {
			return err
		}
		if err := s.entry(vs); err != nil {
			return err
		}
	}
}

// entry reads one data[] object: its vector goes into the next free
// slot of the backing array, and is placed by index at the end.
func (s *scanner) entry(vs *vectorSet) error {
	pos := vs.count
	c, err := s.peek()
	if err != nil {
		return err
	}
	if c != '{' || vs.problem != nil {
		vs.fail(invalidf("data entry %d is not an object", pos))
		return s.skip(0)
	}
	index := -1
	var vec []float32
	sawVec := false
	err = s.object(func(k []byte) error {
		switch string(k) {
		case "index":
			c, err := s.peek()
			if err != nil {
				return err
			}
			if c != '-' && (c < '0' || c > '9') {
				vs.fail(invalidf("data entry %d has a non-numeric index", pos))
				return s.skip(1)
			}
			tok, err := s.number()
			if err != nil {
				return err
			}
			v, perr := strconv.Atoi(string(tok))
			if perr != nil || v < 0 {
				vs.fail(invalidf("data entry %d has index %s", pos, tok))
				return nil
			}
			index = v
			return nil
		case "embedding":
			sawVec = true
			var err error
			vec, err = s.vector(vs, pos)
			return err
		}
		return s.skip(1)
	})
	if err != nil {
		return err
	}
	if vs.problem != nil {
		return nil
	}
	switch {
	case pos >= vs.n:
		vs.fail(invalidf("answer has more embeddings than the %d inputs", vs.n))
		return nil
	case !sawVec || vec == nil:
		vs.fail(invalidf("data entry %d has no embedding", pos))
		return nil
	}
	if index == -1 {
		index = pos
	}
	if index >= vs.n {
		vs.fail(invalidf("data entry %d has index %d, outside 0..%d", pos, index, vs.n-1))
		return nil
	}
	if vs.slots[index] != nil {
		vs.fail(invalidf("index %d appears twice", index))
		return nil
	}
	vs.slots[index] = vec
	vs.count++
	return nil
}

// slot returns the backing space of the vector at arrival position pos,
// allocating the backing array for all n vectors on first use.
func (vs *vectorSet) slot(pos, dim int) []float32 {
	if vs.backing == nil {
		vs.dim = dim
		vs.backing = make([]float32, vs.n*dim)
	}
	lo := pos * vs.dim
	return vs.backing[lo : lo+vs.dim : lo+vs.dim]
}

// vector reads an embedding value: a number array or a base64 string. It
// returns nil (with vs.problem set) when the value fails the checks.
func (s *scanner) vector(vs *vectorSet, pos int) ([]float32, error) {
	c, err := s.peek()
	if err != nil {
		return nil, err
	}
	if vs.problem != nil || pos >= vs.n {
		return nil, s.skip(1)
	}
	switch c {
	case '[':
		return s.floatArray(vs, pos)
	case '"':
		return s.base64Vector(vs, pos)
	}
	vs.fail(invalidf("embedding of data entry %d is neither a number array nor a base64 string", pos))
	return nil, s.skip(1)
}

func (s *scanner) floatArray(vs *vectorSet, pos int) ([]float32, error) {
	s.pos++
	var dst []float32
	if vs.dim > 0 {
		dst = vs.slot(pos, vs.dim)
	} else {
		dst = s.floats[:0]
	}
	k := 0
	bad := false
	for first := true; ; first = false {
		if !bad {
			// Fast path: separator and number wholly in the buffer.
			buf, p := s.buf[:s.end], s.pos
			for p < len(buf) && isSpace(buf[p]) {
				p++
			}
			if p < len(buf) && (first && buf[p] != ']' || !first && buf[p] == ',') {
				if !first {
					p++
					for p < len(buf) && isSpace(buf[p]) {
						p++
					}
				}
				if f, q, ok := fastFloat(buf, p); ok && q < len(buf) && q > p {
					switch {
					case vs.dim == 0:
						dst = append(dst, f)
					case k < len(dst):
						dst[k] = f
					}
					k++
					s.pos = q
					continue
				}
			}
		}
		more, err := s.next(first, ']')
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		c, _ := s.peek()
		if bad || c != '-' && (c < '0' || c > '9') {
			if !bad {
				vs.fail(invalidf("embedding of data entry %d: element %d is not a number", pos, k))
				bad = true
			}
			if err := s.skip(1); err != nil {
				return nil, err
			}
			continue
		}
		tok, err := s.number()
		if err != nil {
			return nil, err
		}
		f, ok := parseFloat32(tok)
		if !ok {
			vs.fail(invalidf("embedding of data entry %d: element %d (%s) is not a finite float32", pos, k, tok))
			bad = true
			continue
		}
		switch {
		case vs.dim == 0:
			dst = append(dst, f)
		case k < len(dst):
			dst[k] = f
		}
		k++
	}
	if bad {
		return nil, nil
	}
	if k == 0 {
		vs.fail(invalidf("embedding of data entry %d is empty", pos))
		return nil, nil
	}
	if vs.dim == 0 {
		s.floats = dst
		out := vs.slot(pos, k)
		copy(out, dst)
		return out, nil
	}
	if k != vs.dim {
		vs.fail(invalidf("embedding of data entry %d has %d dimensions, the first %d", pos, k, vs.dim))
		return nil, nil
	}
	return dst, nil
}

func (s *scanner) base64Vector(vs *vectorSet, pos int) ([]float32, error) {
	// Control characters are not looked for here but ruled out below: a
	// string that decodes to exactly the length its size implies holds
	// none (the base64 decoder rejects them, except CR and LF, which it
	// skips, and which the length check catches); one that does not is
	// looked at only then, to tell malformed JSON from a bad vector.
	raw, esc, err := s.str(false)
	if err != nil {
		return nil, err
	}
	if esc {
		// JSON escapes inside base64 (e.g. "\/"): unescape first.
		if hasControl(raw) {
			return nil, s.syntax("control character in a string")
		}
		raw = []byte(unescape(raw, true))
	}
	badVector := func(format string, args ...any) ([]float32, error) {
		if !esc && hasControl(raw) {
			return nil, s.syntax("control character in a string")
		}
		vs.fail(invalidf(format, args...))
		return nil, nil
	}
	enc := base64.StdEncoding
	if len(raw)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	// The exact decoded length, so that the vector can be decoded in place.
	size := enc.DecodedLen(len(raw))
	if enc == base64.StdEncoding {
		for i := len(raw) - 1; i >= len(raw)-2 && i >= 0 && raw[i] == '='; i-- {
			size--
		}
	}
	if enc.EncodedLen(size) != len(raw) {
		// Bytes the decoder would skip (CR, LF) or a length no encoding has.
		return badVector("embedding of data entry %d is not valid base64", pos)
	}
	if size%4 != 0 {
		return badVector("embedding of data entry %d has %d bytes, not a whole number of float32 values", pos, size)
	}
	dim := size / 4
	switch {
	case dim == 0:
		return badVector("embedding of data entry %d is empty", pos)
	case vs.dim != 0 && dim != vs.dim:
		return badVector("embedding of data entry %d has %d dimensions, the first %d", pos, dim, vs.dim)
	}
	dst := vs.slot(pos, dim)
	if littleEndian {
		// The wire format is little-endian float32, as is the machine's:
		// decode straight into the vector's memory.
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*dim)
		if nb, err := enc.Decode(b, raw); err != nil || nb != len(b) {
			clear(dst)
			return badVector("embedding of data entry %d is not valid base64: %v", pos, err)
		}
		for k, f := range dst {
			if math.Float32bits(f)&0x7f800000 == 0x7f800000 {
				vs.fail(invalidf("embedding of data entry %d has a non-finite value at %d", pos, k))
				return nil, nil
			}
		}
		return dst, nil
	}
	if cap(s.b64) < size {
		s.b64 = make([]byte, size)
	}
	b := s.b64[:size]
	if nb, err := enc.Decode(b, raw); err != nil || nb != size {
		return badVector("embedding of data entry %d is not valid base64: %v", pos, err)
	}
	for k := range dst {
		bits := binary.LittleEndian.Uint32(b[4*k:])
		if bits&0x7f800000 == 0x7f800000 {
			vs.fail(invalidf("embedding of data entry %d has a non-finite value at %d", pos, k))
			return nil, nil
		}
		dst[k] = math.Float32frombits(bits)
	}
	return dst, nil
}

// littleEndian reports whether the machine stores a uint32 as the base64
// form of embeddings does.
var littleEndian = binary.NativeEndian.Uint32([]byte{1, 0, 0, 0}) == 1

// unescape returns the string of raw JSON string contents (checked by
// str), with invalid UTF-8 replaced by U+FFFD as encoding/json does.
func unescape(raw []byte, esc bool) string {
	if !esc && utf8.Valid(raw) {
		return string(raw)
	}
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if json.Unmarshal(q, &s) != nil {
		return string(raw)
	}
	return s
}

// emptyJSON reports whether raw is null, false, "", {} or []: an "error"
// member that reports nothing.
func emptyJSON(raw []byte) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "false", `""`, "{}", "[]":
		return true
	}
	return false
}
