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
	"strings"
	"unsafe"

	"github.com/polygateway/polygateway/internal/readerr"
	"github.com/polygateway/polygateway/internal/transport"
)

// Reading an embeddings answer.
//
// The answer is read by encoding/json, streamed: a json.Decoder walks the
// top-level object with Token, and decodes data[] one entry at a time
// (More, Decode) into a struct whose "embedding" field has the Go type of
// the encoding_format the request asked for — []float32 for "float",
// *string for "base64" — so that no entry is scanned twice. Some providers
// ignore encoding_format: the shape is taken from the first entry that
// has an array or a string there (that one entry is read as a
// json.RawMessage first), and an answer that mixes the two shapes is a
// type error, as encoding/json reports it.
//
// What is read is what json.Unmarshal reads from the same bytes into
//
//	struct {
//		Data  []struct {
//			Index     any       `json:"index"`     // with UseNumber
//			Embedding []float32 `json:"embedding"` // or string for base64
//		} `json:"data"`
//		Model any             `json:"model"`
//		Usage any             `json:"usage"`
//		Error json.RawMessage `json:"error"`
//	}
//
// keys matched as encoding/json matches them (case-insensitively, the
// last of repeated keys winning, repeated arrays decoded into the same
// elements), plus the members of the error envelopes a 200 may carry
// instead of an answer, as the chat transport reads them (an "object" or
// "type" whose last string is "error", MiniMax's base_resp.status_code
// other than 0; see envelope), with two additions that encoding/json
// cannot see: a null where a vector element belongs (encoding/json leaves
// the element's zero value; JavaScript writes NaN as null) is refused,
// and an entry whose "index" is null is told from one without an index.
// The vectors are
// decoded straight into a few backing arrays allocated as entries arrive
// (each at most as large as all the entries before it), so the memory an
// answer holds follows the bytes read, never the count the request
// announced.

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
	// "error" member ({"error": …}) or is a flat error envelope (the
	// envelope's members), ready for classification.
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

// readError wraps a failure of the response body reader, so that it is
// classified as an I/O failure and not as malformed JSON.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// noIndex is the "index" of an entry that has none: a value encoding/json
// never produces, set before the entry is decoded.
type noIndex struct{}

// floatEntry and base64Entry are one data[] element in each shape. A nil
// Embedding of base64Entry after decoding means the member was absent or
// null: the entry keeps what it had, as a string field would.
type floatEntry struct {
	Index     any       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

type base64Entry struct {
	Index     any     `json:"index"`
	Embedding *string `json:"embedding"`
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// decodeEmbeddings decodes an answer for n inputs that was asked for as
// float arrays (decodeAnswer).
func decodeEmbeddings(r io.Reader, n int) (*decoded, error) {
	return decodeAnswer(r, n, EncodingFloat)
}

// decodeAnswer decodes an embeddings answer for n inputs from r; format
// is the encoding_format the request asked for.
//
// Errors: *malformedError for input that is not JSON or is cut short,
// *readError for r's own failures, *invalidError for answers that fail
// the checks (count, indices, dimensions, elements). An answer with a
// non-empty top-level "error" member returns its errorBody instead.
func decodeAnswer(r io.Reader, n int, format string) (*decoded, error) {
	rec := &readerr.Recorder{R: r}
	n = max(n, 0)
	d := &answerReader{dec: json.NewDecoder(rec), n: n, shape: format,
		index: make([]any, n), vecs: make([][]float32, n), slots: make([][]float32, n), bad: make([]error, n)}
	if format != EncodingBase64 {
		d.shape = EncodingFloat
	}
	for i := range d.index {
		d.index[i] = noIndex{}
	}
	d.dec.UseNumber()
	if err := d.read(); err != nil {
		if rec.Err != nil && errors.Is(err, rec.Err) {
			return nil, &readError{err: rec.Err}
		}
		var me *malformedError
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, &malformedError{msg: "response body is not valid JSON", err: err}
	}
	return d.result()
}

// answerReader is the state of one decodeAnswer.
type answerReader struct {
	dec   *json.Decoder
	n     int
	shape string // EncodingFloat or EncodingBase64: the type entries are decoded into
	// shapeKnown is set once an "embedding" array or string fixed shape.
	shapeKnown bool
	// dim is the length of the first non-empty vector (0: none yet, and
	// entries are read through decodeFirst).
	dim int

	// Per data[] position below n: the "index" decoded there, the vector
	// (float: the slice encoding/json decodes into; base64: the decoded
	// bytes), the backing space reserved for it, and for base64 what was
	// wrong with its string.
	index []any
	vecs  [][]float32
	slots [][]float32
	bad   []error
	// allocated counts the positions that have backing space.
	allocated int

	// length is the length of the last data array; sawData whether there
	// was one (or null).
	length  int
	sawData bool
	// typeErr is the first value of a type encoding/json refuses there:
	// the answer is invalid whatever follows.
	typeErr error

	model  any
	usage  any
	errRaw json.RawMessage
	// env is the flat error envelope read so far (see envelope).
	env envelope

	fe      floatEntry
	be      base64Entry
	scratch []byte
}

// read walks the answer's object to its end and checks that nothing
// follows it.
func (d *answerReader) read() error {
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return &malformedError{msg: "response body is not a JSON object"}
	}
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if err := d.member(key); err != nil {
			return err
		}
	}
	if _, err := d.dec.Token(); err != nil {
		return err
	}
	switch _, err := d.dec.Token(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	}
	return &malformedError{msg: "response body has data after its JSON object"}
}

// member reads the value of one top-level key; keys match as
// encoding/json matches a struct's fields.
func (d *answerReader) member(key string) error {
	switch {
	case strings.EqualFold(key, "data"):
		return d.data()
	case strings.EqualFold(key, "model"):
		d.model = nil
		return d.dec.Decode(&d.model)
	case strings.EqualFold(key, "usage"):
		d.usage = nil
		return d.dec.Decode(&d.usage)
	case strings.EqualFold(key, "error"):
		return d.dec.Decode(&d.errRaw)
	}
	if name := envelopeKey(key); name != "" {
		return d.env.member(d.dec, name)
	}
	return d.skip()
}

// skip reads a value nobody needs (checked as JSON all the same).
func (d *answerReader) skip() error {
	var none struct{}
	err := d.dec.Decode(&none)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return nil
	}
	return err
}

// data reads the data array entry by entry.
func (d *answerReader) data() error {
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil: // null: no entries
		d.sawData, d.length = true, 0
		return nil
	case json.Delim('['):
	case json.Delim('{'):
		d.typeError(invalidf("data is not an array"))
		return d.skipOpen()
	default:
		d.typeError(invalidf("data is not an array"))
		return nil
	}
	pos := 0
	for ; d.dec.More(); pos++ {
		if err := d.entry(pos); err != nil {
			return err
		}
	}
	if _, err := d.dec.Token(); err != nil {
		return err
	}
	d.sawData, d.length = true, pos
	return nil
}

// skipOpen reads the rest of an object whose '{' Token returned, within
// encoding/json's nesting limit (the object is a member of the answer).
func (d *answerReader) skipOpen() error {
	for depth := 1; depth > 0; {
		tok, err := d.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth+1 > maxJSONDepth {
				return &malformedError{msg: "response body nests deeper than " + strconv.Itoa(maxJSONDepth) + " levels"}
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func (d *answerReader) typeError(err error) {
	if d.typeErr == nil {
		d.typeErr = err
	}
}

// entry reads data[pos]. Entries beyond the inputs are decoded all the
// same (a type error there is the answer's), into scratch space.
func (d *answerReader) entry(pos int) error {
	if d.typeErr != nil {
		return d.skip()
	}
	if d.dim == 0 {
		return d.decodeFirst(pos)
	}
	if d.shape == EncodingBase64 {
		return d.base64Entry(pos)
	}
	return d.floatEntry(pos)
}

// floatEntry decodes data[pos] into its vector's backing space, or into
// the slice a repeated data array decoded there before.
func (d *answerReader) floatEntry(pos int) error {
	e := &d.fe
	e.Index, e.Embedding = noIndex{}, nil
	if pos < d.n {
		e.Index = d.index[pos]
		e.Embedding = d.vecs[pos]
		if e.Embedding == nil {
			e.Embedding = d.freshSlot(pos)
		}
	}
	if err := d.decodeEntry(d.dec, e, pos); err != nil {
		return err
	}
	if pos < d.n {
		d.index[pos], d.vecs[pos] = e.Index, e.Embedding
	}
	return nil
}

// base64Entry decodes data[pos] and its vector into backing space.
func (d *answerReader) base64Entry(pos int) error {
	e := &d.be
	e.Index, e.Embedding = noIndex{}, nil
	if pos < d.n {
		e.Index = d.index[pos]
	}
	if err := d.decodeEntry(d.dec, e, pos); err != nil {
		return err
	}
	if pos < d.n {
		d.index[pos] = e.Index
		if e.Embedding != nil {
			d.vecs[pos], d.bad[pos] = d.fromBase64(pos, *e.Embedding)
		}
	}
	return nil
}

// decodeEntry decodes one entry with dec; a type error is the answer's
// (invalid), any other error ends the reading.
func (d *answerReader) decodeEntry(dec *json.Decoder, e any, pos int) error {
	err := dec.Decode(e)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		d.typeError(describeTypeError(te, pos))
		return nil
	}
	return err
}

// decodeFirst reads data[pos] while no vector has shown the dimension:
// the entry as a json.RawMessage, then, once its "embedding" shows the
// shape, as the entry of that shape. A float vector is decoded into
// space pre-filled with NaN, as large as the value could need, so that a
// null element stays visible.
func (d *answerReader) decodeFirst(pos int) error {
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
		return err
	}
	var probe struct {
		Embedding json.RawMessage `json:"embedding"`
	}
	if err := json.Unmarshal(raw, &probe); err == nil && len(probe.Embedding) > 0 && !d.shapeKnown {
		switch probe.Embedding[0] {
		case '[':
			d.shape, d.shapeKnown = EncodingFloat, true
		case '"':
			d.shape, d.shapeKnown = EncodingBase64, true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if d.shape == EncodingBase64 {
		e := &d.be
		e.Index, e.Embedding = noIndex{}, nil
		if pos < d.n {
			e.Index = d.index[pos]
		}
		if err := d.decodeEntry(dec, e, pos); err != nil || pos >= d.n {
			return err
		}
		d.index[pos] = e.Index
		if e.Embedding != nil {
			d.vecs[pos], d.bad[pos] = d.fromBase64(pos, *e.Embedding)
		}
		return nil
	}
	e := &d.fe
	e.Index, e.Embedding = noIndex{}, nil
	if pos < d.n {
		e.Index, e.Embedding = d.index[pos], d.vecs[pos]
	}
	if e.Embedding == nil {
		e.Embedding = nans(len(probe.Embedding)/2 + 1)[:0]
	}
	if err := d.decodeEntry(dec, e, pos); err != nil || pos >= d.n {
		return err
	}
	d.index[pos], d.vecs[pos] = e.Index, e.Embedding
	if k := len(e.Embedding); k > 0 && d.typeErr == nil {
		d.dim = k
		slot := d.slotFor(pos)
		d.vecs[pos] = slot[:copy(slot, e.Embedding)]
	}
	return nil
}

// nans returns k NaN values.
func nans(k int) []float32 {
	v := make([]float32, k)
	fillNaN(v)
	return v
}

var nan32 = float32(math.NaN())

func fillNaN(v []float32) {
	for i := range v {
		v[i] = nan32
	}
}

// freshSlot returns data[pos]'s backing space, empty, its elements NaN.
func (d *answerReader) freshSlot(pos int) []float32 {
	s := d.slotFor(pos)
	fillNaN(s)
	return s[:0]
}

// slotFor returns the backing space of data[pos] (dim values, capacity
// dim). Space is allocated for runs of positions, each run at most as
// long as all runs before it: what the answer holds grows with the
// entries it has sent, at most twice their size.
func (d *answerReader) slotFor(pos int) []float32 {
	if s := d.slots[pos]; s != nil {
		return s
	}
	run := 1
	for run < max(d.allocated, 1) && pos+run < d.n && d.slots[pos+run] == nil {
		run++
	}
	backing := nans(run * d.dim)
	for k := range run {
		d.slots[pos+k] = backing[k*d.dim : (k+1)*d.dim : (k+1)*d.dim]
	}
	d.allocated += run
	return d.slots[pos]
}

// result applies the checks to what was read.
func (d *answerReader) result() (*decoded, error) {
	out := &decoded{}
	out.model, _ = d.model.(string)
	out.promptTokens, out.usageOK = usageOf(d.usage)
	if !emptyJSON(d.errRaw) {
		out.errorBody = append(append([]byte(`{"error":`), d.errRaw...), '}')
		return out, nil
	}
	if b := d.env.body(); d.env.isError(b) {
		out.errorBody = b
		return out, nil
	}
	switch {
	case d.typeErr != nil:
		return nil, d.typeErr
	case !d.sawData:
		return nil, invalidf("answer has no data for %d inputs", d.n)
	case d.length > d.n:
		return nil, invalidf("answer has more embeddings than the %d inputs", d.n)
	case d.length != d.n:
		return nil, invalidf("answer has %d embeddings for %d inputs", d.length, d.n)
	}
	vectors := make([][]float32, d.n)
	for pos := range d.n {
		idx, err := indexOf(d.index[pos], pos)
		if err != nil {
			return nil, err
		}
		vec := d.vecs[pos]
		if err := d.checkVector(pos, vec, len(d.vecs[0])); err != nil {
			return nil, err
		}
		if idx >= d.n {
			return nil, invalidf("data entry %d has index %d, outside 0..%d", pos, idx, d.n-1)
		}
		if vectors[idx] != nil {
			return nil, invalidf("index %d appears twice", idx)
		}
		vectors[idx] = vec[:len(vec):len(vec)]
	}
	out.vectors = vectors
	return out, nil
}

// checkVector checks data[pos]'s vector: present, of dim values, none of
// them a null.
func (d *answerReader) checkVector(pos int, vec []float32, dim int) error {
	if pos < len(d.bad) && d.bad[pos] != nil {
		return d.bad[pos]
	}
	switch {
	case vec == nil:
		return invalidf("data entry %d has no embedding", pos)
	case len(vec) == 0:
		return invalidf("embedding of data entry %d is empty", pos)
	case len(vec) != dim:
		return invalidf("embedding of data entry %d has %d dimensions, the first %d", pos, len(vec), dim)
	}
	for k, f := range vec {
		if f != f {
			return invalidf("embedding of data entry %d: element %d is null, not a number", pos, k)
		}
	}
	return nil
}

// indexOf reads an entry's "index": none takes the entry's position.
func indexOf(v any, pos int) (int, error) {
	switch v := v.(type) {
	case noIndex:
		return pos, nil
	case json.Number:
		i, err := strconv.Atoi(string(v))
		if err != nil || i < 0 {
			return 0, invalidf("data entry %d has index %s", pos, clip(string(v), 32))
		}
		return i, nil
	case nil:
		return 0, invalidf("data entry %d has a null index", pos)
	}
	return 0, invalidf("data entry %d has a non-numeric index", pos)
}

// usageOf reads usage.prompt_tokens, else usage.total_tokens, when
// positive and below 2^31.
func usageOf(u any) (int, bool) {
	m, _ := u.(map[string]any)
	for _, k := range []string{"prompt_tokens", "total_tokens"} {
		num, ok := m[k].(json.Number)
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(string(num), 64); err == nil && f > 0 && f < math.MaxInt32 {
			return int(f), true
		}
	}
	return 0, false
}

// describeTypeError turns encoding/json's type error in an answer into
// the check that failed.
func describeTypeError(te *json.UnmarshalTypeError, pos int) error {
	where := fmt.Sprintf("data entry %d", pos)
	if te.Field != "" {
		where += " (" + clip(te.Field, 40) + ")"
	}
	if num, ok := strings.CutPrefix(te.Value, "number "); ok {
		return invalidf("%s: %s is not a finite %s", where, clip(num, 40), te.Type)
	}
	return invalidf("%s holds a JSON %s where the answer needs %s", where, te.Value, te.Type)
}

// clip returns at most n bytes of s.
func clip(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// emptyJSON reports whether raw is absent, null, false, "", {} or []: an
// "error" member that reports nothing.
func emptyJSON(raw []byte) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "false", `""`, "{}", "[]":
		return true
	}
	return false
}

// fromBase64 decodes the base64 vector of data[pos] (little-endian
// float32 values; padded or not) into its backing space.
func (d *answerReader) fromBase64(pos int, s string) ([]float32, error) {
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	// The exact decoded length: a string the decoder would read with
	// skipped bytes (CR, LF) or of a length no encoding has is refused.
	size := enc.DecodedLen(len(s))
	if enc == base64.StdEncoding {
		for i := len(s) - 1; i >= len(s)-2 && i >= 0 && s[i] == '='; i-- {
			size--
		}
	}
	switch {
	case enc.EncodedLen(size) != len(s):
		return nil, invalidf("embedding of data entry %d is not valid base64", pos)
	case size%4 != 0:
		return nil, invalidf("embedding of data entry %d has %d bytes, not a whole number of float32 values", pos, size)
	case size == 0:
		return nil, invalidf("embedding of data entry %d is empty", pos)
	}
	if cap(d.scratch) < size {
		d.scratch = make([]byte, size)
	}
	b := d.scratch[:size]
	if nb, err := enc.Decode(b, unsafe.Slice(unsafe.StringData(s), len(s))); err != nil || nb != size {
		return nil, invalidf("embedding of data entry %d is not valid base64", pos)
	}
	k := size / 4
	if d.dim == 0 {
		d.dim = k
	}
	var dst []float32
	if k == d.dim {
		dst = d.slotFor(pos)
	} else {
		dst = make([]float32, k)
	}
	for i := range dst {
		bits := binary.LittleEndian.Uint32(b[4*i:])
		if bits&0x7f800000 == 0x7f800000 {
			return nil, invalidf("embedding of data entry %d has a non-finite value at %d", pos, i)
		}
		dst[i] = math.Float32frombits(bits)
	}
	return dst, nil
}

// envelopeKeys are the top-level members of a flat error envelope that
// the chat transport reads to classify it (besides "error").
var envelopeKeys = []string{"base_resp", "code", "detail", "error_code", "error_msg", "message", "msg", "object", "status", "type"}

// envelopeKey returns the envelope member key matches (as encoding/json
// matches a struct's fields), or "".
func envelopeKey(key string) string {
	for _, k := range envelopeKeys {
		if strings.EqualFold(key, k) {
			return k
		}
	}
	return ""
}

// envelope keeps the top-level members of a flat error envelope, in the
// order the answer gave them, repeats included, so that the answer is
// judged an error by the chat transport's rules (transport.IsErrorAnswer)
// and classified from the same fields.
type envelope struct {
	members []envelopeMember
}

// envelopeMember is one member: its key as matched and its value.
type envelopeMember struct {
	key string
	raw json.RawMessage
}

// member reads the value of the envelope member name.
func (e *envelope) member(dec *json.Decoder, name string) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	e.members = append(e.members, envelopeMember{key: name, raw: raw})
	return nil
}

// body is the envelope's members as one JSON object, or nil when the
// answer carried none. The keys are marshaled and the values are the
// answer's own JSON, as the decoder checked them.
func (e *envelope) body() []byte {
	if len(e.members) == 0 {
		return nil
	}
	b := []byte{'{'}
	for i, m := range e.members {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(m.key) // a string always marshals
		b = append(append(append(b, k...), ':'), m.raw...)
	}
	return append(b, '}')
}

// isError reports whether the answer is an error envelope; body is its
// members (body()).
func (e *envelope) isError(body []byte) bool {
	return body != nil && transport.IsErrorAnswer(body)
}
