package embed_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
)

// The embeddings invariant (docs/explanation-faults.md, row "embeddings
// vectors"): an answer is accepted only when every input has exactly one
// vector, every index is present once, every vector has the first one's
// dimension and only finite values; anything else is invalid, never a
// partial set.
//
// TestPropertyEmbeddingsAreWholeOrAnError holds Client.Embed to it through
// the public API. Every case draws, from its own PCG seed, a handful of
// inputs, vectors (any finite float32, written in one of several number
// forms, or base64), a batch size, a concurrency and the encoding format,
// and then damages what a local upstream answers for some batches: a vector
// missing, an index duplicated / out of range / not an integer, a vector of
// another dimension or empty, a non-finite or non-number value, an entry or
// data[] of the wrong type, an "error" member, the body cut short or the
// connection dropped, a byte replaced, inserted or deleted, trailing bytes,
// or data[] merely reordered (which must be accepted and returned in input
// order). Each damaged body is judged independently with encoding/json
// (embedOracle); the call must return exactly the vectors that oracle reads
// — in input order, across batches — or fail with the class the package
// documents (a body that is not JSON or is cut short: transient; one that
// fails the checks: ResultInvalidError). A damage with a known effect
// (intact, reordered, a vector missing, …) also checks the oracle itself.
//
// The second group puts a healthy fallback in a second PRIORITY tier: a
// primary answer that is cut or not JSON (transient) must yield exactly the
// fallback's vectors; one that the checks refuse ends the call with a
// ResultInvalidError, which "is not retried" (embed/doc.go), so it is never
// completed from the fallback either; a valid one is the primary's.
func TestPropertyEmbeddingsAreWholeOrAnError(t *testing.T) {
	t.Parallel()
	const (
		seed          = 0x7067_775f_656d_62 // "pgw_emb"
		singleTier    = 40
		withFallbacks = 20
	)
	master := rand.New(rand.NewPCG(seed, 1))
	for i := range singleTier + withFallbacks {
		caseSeed := master.Uint64()
		c := newEmbCase(caseSeed, i, i >= singleTier)
		t.Run(c.title(), func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

// Expectations a damage has before any oracle looks at the body.
type embExpect int

const (
	expOracle    embExpect = iota // no a-priori verdict: the oracle decides
	expMeant                      // accepted, exactly the meant vectors
	expInvalid                    // well-formed, fails a check
	expMalformed                  // not JSON or cut short
	expErrorBody                  // a top-level "error" member
)

// embVerdict is the oracle's judgement of one answer.
type embVerdict int

const (
	verdictAccepted  embVerdict = iota
	verdictMalformed            // transient: another attempt may do better
	verdictInvalid              // ResultInvalidError: not retried
	verdictErrorBody            // classified like an error answer
)

func (v embVerdict) String() string {
	return [...]string{"accepted", "malformed (transient)", "invalid (ResultInvalidError)", "error body"}[v]
}

// embCase is one randomised Embed call.
type embCase struct {
	id          int
	seed        uint64
	fallback    bool
	format      string
	batchSize   int
	concurrency int
	texts       []string
	meant       [][]float32 // what the primary means for each input
	backup      [][]float32 // what the fallback answers for each input
	batches     []embBatch
}

// embBatch is one upstream request of the call and the (damaged) answer
// the primary sends to it, every time it is asked.
type embBatch struct {
	lo, hi  int
	damage  []string
	expect  embExpect
	body    []byte // what is written
	fullLen int    // > len(body): Content-Length announced, then the connection drops
}

func (c *embCase) title() string {
	mode := "single_tier"
	if c.fallback {
		mode = "with_fallback"
	}
	return fmt.Sprintf("%s/case_%02d", mode, c.id)
}

// describe names the seed and every damage, for failure messages.
func (c *embCase) describe() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "case %d (seed %#x): %d inputs, format %s, BATCH_SIZE %d, CONCURRENCY %d, fallback %v; damage:",
		c.id, c.seed, len(c.texts), c.format, c.batchSize, c.concurrency, c.fallback)
	for b, bt := range c.batches {
		d := "intact"
		if len(bt.damage) > 0 {
			d = strings.Join(bt.damage, " + ")
		}
		fmt.Fprintf(&sb, " [batch %d inputs %d..%d: %s]", b, bt.lo, bt.hi-1, d)
	}
	return sb.String()
}

var propWords = []string{"alpha", "βeta", "gamma", "дельта", "epsilon", "zeta", "η", "theta", "iota", "kappa", "λ", "mu", "日本", "ok"}

func newEmbCase(seed uint64, id int, fallback bool) *embCase {
	r := rand.New(rand.NewPCG(seed, uint64(id)))
	n := 1 + r.IntN(9)
	dim := 1 + r.IntN(10)
	c := &embCase{id: id, seed: seed, fallback: fallback, format: "float", concurrency: 1 + r.IntN(3)}
	// Both formats for every damage kind: the format alternates with each
	// round of kinds in the single-tier group.
	if fallback && r.IntN(3) == 0 || !fallback && (id/(semanticKinds+1))%2 == 1 {
		c.format = "base64"
	}
	c.batchSize = 1 + r.IntN(n)
	if fallback {
		c.batchSize = n + r.IntN(3) // one batch: the whole call goes to one tier or the other
	}
	backupDim := dim
	if r.IntN(2) == 0 {
		backupDim = 1 + r.IntN(10) // another model may well have another dimension
	}
	for i := range n {
		var words []string
		for range 1 + r.IntN(4) {
			words = append(words, propWords[r.IntN(len(propWords))])
		}
		c.texts = append(c.texts, fmt.Sprintf("%s #%d", strings.Join(words, " "), i))
		c.meant = append(c.meant, randVector(r, dim))
		c.backup = append(c.backup, randVector(r, backupDim))
	}
	// The damage kinds are dealt out by case number, so that every kind
	// is in the run whatever the seed; the rest is drawn.
	nb := (n + c.batchSize - 1) / c.batchSize
	plan := map[int]damagePlan{}
	if fallback {
		k := id / 2
		if id%2 == 0 {
			// A sound answer with a byte damage: mostly a transient primary.
			plan[r.IntN(nb)] = damagePlan{semantic: semanticIntact, byteKind: k % byteKinds}
		} else {
			plan[r.IntN(nb)] = damagePlan{semantic: k % semanticKinds, byteKind: -1}
		}
	} else if k := id % (semanticKinds + 1); k < semanticKinds {
		plan[r.IntN(nb)] = damagePlan{semantic: k, byteKind: (id / 3) % byteKinds}
		second := r.IntN(nb)
		if _, taken := plan[second]; !taken && r.IntN(3) == 0 {
			// A second victim, whose damages may pile up.
			plan[second] = damagePlan{semantic: r.IntN(semanticKinds), byteKind: -1, extraByte: true}
		}
	}
	for b := range nb {
		lo := b * c.batchSize
		hi := min(lo+c.batchSize, n)
		p, victim := plan[b]
		if !victim {
			p = damagePlan{semantic: -1}
		}
		c.batches = append(c.batches, makeBatch(r, lo, hi, c.format, c.meant[lo:hi], p))
	}
	return c
}

// randVector returns dim finite float32 values of every kind: small, zero,
// negative zero, subnormal, huge.
func randVector(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for k := range v {
		switch r.IntN(10) {
		case 0:
			v[k] = 0
		case 1:
			v[k] = float32(math.Copysign(0, -1))
		case 2, 3:
			bits := r.Uint32()
			if bits&0x7f800000 == 0x7f800000 {
				bits &^= 0x00800000 // never Inf or NaN
			}
			v[k] = math.Float32frombits(bits)
		default:
			v[k] = r.Float32()*2 - 1
		}
	}
	return v
}

// formatNumber writes f as a JSON number in one of several equivalent
// forms, each of which reads back (nearest float32) as f.
func formatNumber(r *rand.Rand, f float32) string {
	switch r.IntN(5) {
	case 0:
		return strconv.FormatFloat(float64(f), 'e', -1, 32)
	case 1:
		return strconv.FormatFloat(float64(f), 'E', -1, 32)
	case 2:
		return strconv.FormatFloat(float64(f), 'f', -1, 32)
	case 3:
		return strconv.FormatFloat(float64(f), 'g', -1, 64) // the float64's digits
	}
	return strconv.FormatFloat(float64(f), 'g', -1, 32)
}

func floatsJSON(r *rand.Rand, v []float32) string {
	parts := make([]string, len(v))
	for k, f := range v {
		parts[k] = formatNumber(r, f)
	}
	sep := ","
	if r.IntN(4) == 0 {
		sep = ", "
	}
	return "[" + strings.Join(parts, sep) + "]"
}

func base64JSON(v []float32) string {
	b := make([]byte, 4*len(v))
	for k, f := range v {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(f))
	}
	return `"` + base64.StdEncoding.EncodeToString(b) + `"`
}

// wireEntry is one data[] entry as written: raw JSON of its members ("" =
// left out), or the whole entry verbatim.
type wireEntry struct {
	index, embedding string
	verbatim         string
}

// wireAnswer is an embeddings answer before it is written.
type wireAnswer struct {
	entries []wireEntry
	data    string // when set, the raw value of "data" ("-": no data member)
	extra   string // more top-level members
}

func (a *wireAnswer) render(r *rand.Rand, tokens int) []byte {
	var data string
	switch a.data {
	case "":
		parts := make([]string, len(a.entries))
		for i, e := range a.entries {
			if e.verbatim != "" {
				parts[i] = e.verbatim
				continue
			}
			members := []string{`"object":"embedding"`}
			if e.index != "" {
				members = append(members, `"index":`+e.index)
			}
			if e.embedding != "" {
				members = append(members, `"embedding":`+e.embedding)
			}
			r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
			parts[i] = "{" + strings.Join(members, ",") + "}"
		}
		data = "[" + strings.Join(parts, ",") + "]"
	case "-":
	default:
		data = a.data
	}
	members := []string{`"object":"list"`, `"model":"text-embedding-prop-served"`,
		fmt.Sprintf(`"usage":{"prompt_tokens":%d,"total_tokens":%d}`, tokens, tokens)}
	if data != "" {
		members = append(members, `"data":`+data)
	}
	if a.extra != "" {
		members = append(members, a.extra)
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return []byte("{" + strings.Join(members, ",") + "}")
}

// damagePlan says how one batch's answer is damaged: a semantic damage
// (an entry-level kind, -1 for a healthy batch, which is intact or
// reordered), then a byte damage (byteKind, -1: drawn) when the answer is
// otherwise sound, and perhaps on top of another damage (extraByte).
type damagePlan struct {
	semantic  int
	byteKind  int
	extraByte bool
}

const (
	semanticKinds  = 18
	semanticIntact = 17 // intact, then byte-damaged
	byteKinds      = 9
)

// makeBatch renders the primary's answer to inputs lo..hi-1 and damages
// it by plan.
func makeBatch(r *rand.Rand, lo, hi int, format string, meant [][]float32, plan damagePlan) embBatch {
	n := hi - lo
	b := embBatch{lo: lo, hi: hi, expect: expMeant}
	vec := func(v []float32) string {
		if format == "base64" {
			return base64JSON(v)
		}
		return floatsJSON(r, v)
	}
	a := &wireAnswer{}
	for i := range n {
		a.entries = append(a.entries, wireEntry{index: strconv.Itoa(i), embedding: vec(meant[i])})
	}
	pick := func() int { return r.IntN(len(a.entries)) }
	note := func(format string, args ...any) { b.damage = append(b.damage, fmt.Sprintf(format, args...)) }

	victim := plan.semantic >= 0
	semantic := plan.semantic
	if !victim {
		semantic = r.IntN(2) // intact or reordered
	}
	switch semantic {
	case 0: // intact
	case 1:
		r.Shuffle(n, func(i, j int) { a.entries[i], a.entries[j] = a.entries[j], a.entries[i] })
		note("data reordered (indices kept)")
	case 2:
		k := pick()
		a.entries = append(a.entries[:k], a.entries[k+1:]...)
		note("vector of index %d missing", k)
		b.expect = expInvalid
	case 3:
		if n < 2 {
			a.entries[0].index = strconv.Itoa(n)
			note("index %d out of range", n)
		} else {
			j, k := pick(), pick()
			for j == k {
				k = pick()
			}
			a.entries[j].index = a.entries[k].index
			note("index %s duplicated (entry %d)", a.entries[k].index, j)
		}
		b.expect = expInvalid
	case 4:
		k, bad := pick(), n+r.IntN(3)
		if r.IntN(3) == 0 {
			bad = -1 - r.IntN(2)
		}
		a.entries[k].index = strconv.Itoa(bad)
		note("index %d out of range (entry %d)", bad, k)
		b.expect = expInvalid
	case 5:
		k := pick()
		a.entries[k].index = []string{"1.5", `"0"`, "null", "true", "1e0", "0.0", "99999999999999999999", "[0]"}[r.IntN(8)]
		note("index %s not an integer (entry %d)", a.entries[k].index, k)
		b.expect = expInvalid
	case 6:
		k := pick()
		extra := a.entries[k]
		if r.IntN(2) == 0 {
			extra.index = strconv.Itoa(n)
		}
		a.entries = append(a.entries, extra)
		note("one vector too many (index %s)", extra.index)
		b.expect = expInvalid
	case 7:
		k := pick()
		d := len(meant[k]) + 1
		if d > 2 && r.IntN(2) == 0 {
			d -= 2
		}
		a.entries[k].embedding = vec(randVector(r, d))
		note("vector of index %d has %d dimensions, not %d", k, d, len(meant[k]))
		b.expect = expInvalid
		if n == 1 {
			b.expect = expOracle // the only vector: its dimension is the answer's
		}
	case 8:
		k := pick()
		a.entries[k].embedding = []string{"[]", `""`}[r.IntN(2)]
		note("vector of index %d empty", k)
		b.expect = expInvalid
	case 9:
		k := pick()
		v := append([]float32(nil), meant[k]...)
		at := r.IntN(len(v))
		if format == "base64" {
			v[at] = math.Float32frombits([]uint32{0x7fc00000, 0x7f800000, 0xff800000, 0x7f800001}[r.IntN(4)])
			a.entries[k].embedding = base64JSON(v)
			note("vector of index %d holds %v at %d", k, v[at], at)
		} else {
			parts := strings.Split(strings.Trim(floatsJSON(r, v), "[]"), ",")
			lit := []string{"1e39", "-1e39", "3.5e38", "1e309", "-2e400", "340282356779733661637539395458142568448"}[r.IntN(6)]
			parts[at] = lit
			a.entries[k].embedding = "[" + strings.Join(parts, ",") + "]"
			note("vector of index %d holds %s (beyond float32) at %d", k, lit, at)
		}
		b.expect = expInvalid
	case 10:
		k := pick()
		lits := []string{`"0.5"`, "null", "true", "{}", "[1]", "NaN", "Infinity", "-Infinity", "+1", ".5", "01", "1.", "0x10", "-"}
		li := r.IntN(len(lits))
		if format == "base64" {
			a.entries[k].embedding = `"` + strings.Repeat("A", 4*li) + `*AAA"`
			note("vector of index %d is not base64", k)
			b.expect = expInvalid
			break
		}
		v := strings.Split(strings.Trim(floatsJSON(r, meant[k]), "[]"), ",")
		at := r.IntN(len(v))
		v[at] = lits[li]
		a.entries[k].embedding = "[" + strings.Join(v, ",") + "]"
		note("vector of index %d holds %s at %d", k, lits[li], at)
		b.expect = expInvalid
		if li >= 5 {
			b.expect = expMalformed // not JSON at all
		}
	case 11:
		k := pick()
		a.entries[k].embedding = ""
		note("entry %d has no embedding", k)
		b.expect = expInvalid
	case 12:
		k := pick()
		a.entries[k].embedding = []string{"{}", "null", "42", "true", `{"0":1}`}[r.IntN(5)]
		note("embedding of entry %d is %s", k, a.entries[k].embedding)
		b.expect = expInvalid
	case 13:
		k := pick()
		a.entries[k].verbatim = []string{"null", "[]", `"x"`, "3", "[0.5]"}[r.IntN(5)]
		note("entry %d is %s", k, a.entries[k].verbatim)
		b.expect = expInvalid
	case 14:
		a.data = []string{"{}", "null", `"x"`, "0", "-", "[]"}[r.IntN(6)]
		note("data is %s", a.data)
		b.expect = expInvalid
	case 15:
		a.extra = `"error":{"message":"upstream hiccup","type":"server_error","code":"hiccup"}`
		note("a top-level error member")
		b.expect = expErrorBody
	case 16:
		// Reordered and then damaged below: the order must not hide it.
		r.Shuffle(n, func(i, j int) { a.entries[i], a.entries[j] = a.entries[j], a.entries[i] })
		note("data reordered (indices kept)")
	case 17:
		// Intact, then damaged below.
	}
	tokens := 3 * n
	b.body = a.render(r, tokens)

	benign := b.expect == expMeant
	if !victim || !benign && (!plan.extraByte || r.IntN(2) != 0) {
		return b
	}
	body := b.body
	kind := plan.byteKind
	if kind < 0 {
		kind = r.IntN(byteKinds)
	}
	switch kind {
	case 0:
		k := r.IntN(len(body))
		b.body = body[:k]
		note("body cut at byte %d of %d", k, len(body))
		b.expect = expMalformed
	case 1:
		k := r.IntN(len(body))
		b.body, b.fullLen = body[:k], len(body)
		note("connection dropped after byte %d of %d", k, len(body))
		b.expect = expMalformed
	case 2, 3:
		k := r.IntN(len(body))
		var c byte
		if r.IntN(2) == 0 {
			c = jsonBytes[r.IntN(len(jsonBytes))]
		} else {
			c = byte(r.IntN(256))
		}
		if c == body[k] {
			c ^= 0x20
		}
		note("byte %d %q replaced by %q", k, body[k], c)
		b.body = bytes.Clone(body)
		b.body[k] = c
		b.expect = expOracle
	case 4, 5:
		var digits []int
		for i, c := range body {
			if c >= '0' && c <= '9' {
				digits = append(digits, i)
			}
		}
		if len(digits) == 0 {
			b.body = append(bytes.Clone(body), 'x')
			note("trailing byte x")
			b.expect = expMalformed
			break
		}
		k := digits[r.IntN(len(digits))]
		c := byte('0' + r.IntN(10))
		for c == body[k] {
			c = byte('0' + r.IntN(10))
		}
		note("digit %d %q replaced by %q", k, body[k], c)
		b.body = bytes.Clone(body)
		b.body[k] = c
		b.expect = expOracle
	case 6:
		k := r.IntN(len(body) + 1)
		c := jsonBytes[r.IntN(len(jsonBytes))]
		note("byte %q inserted at %d", c, k)
		b.body = append(append(append([]byte(nil), body[:k]...), c), body[k:]...)
		b.expect = expOracle
	case 7:
		k := r.IntN(len(body))
		note("byte %d %q deleted", k, body[k])
		b.body = append(append([]byte(nil), body[:k]...), body[k+1:]...)
		b.expect = expOracle
	case 8:
		tail := []string{"x", "}", ",", "{}", "\x00", " \n\t"}[r.IntN(6)]
		note("trailing %q", tail)
		b.body = append(bytes.Clone(body), tail...)
		if strings.TrimSpace(tail) != "" {
			b.expect = expMalformed
		} // white space after the object changes nothing
	}
	return b
}

// jsonBytes are the bytes a byte damage favours: those that mean
// something in JSON.
const jsonBytes = `{}[]",:0123456789eE.+- nx\`

// embedOracle judges an answer for n inputs with encoding/json, by the
// rules the package documents: a JSON object whose data[] has exactly one
// entry per input, each index (a non-negative integer) once and below n,
// each embedding a non-empty array of numbers that are finite as float32
// (nearest float32) or a base64 string of little-endian finite float32
// values, all of the first vector's length. An entry without an index takes
// its place in data[] (an OpenAI answer always sends one; the package reads
// it so). A non-empty top-level "error" member is an error answer.
func embedOracle(body []byte, n int) ([][]float32, embVerdict, string) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if !json.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, verdictMalformed, "not a JSON object"
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, verdictMalformed, err.Error()
	}
	if raw, ok := top["error"]; ok {
		switch string(raw) {
		case "null", "false", `""`, "{}", "[]":
		default:
			return nil, verdictErrorBody, "error member " + string(raw)
		}
	}
	raw, ok := top["data"]
	if !ok {
		return nil, verdictInvalid, "no data"
	}
	if raw[0] != '[' {
		return nil, verdictInvalid, "data is not an array"
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, verdictMalformed, err.Error()
	}
	slots := make([][]float32, n)
	dim := 0
	for pos, e := range entries {
		if pos >= n {
			return nil, verdictInvalid, "more entries than inputs"
		}
		if e[0] != '{' {
			return nil, verdictInvalid, fmt.Sprintf("entry %d is not an object", pos)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(e, &fields); err != nil {
			return nil, verdictMalformed, err.Error()
		}
		index := pos
		if v, ok := fields["index"]; ok {
			i, err := strconv.Atoi(string(v))
			if err != nil || i < 0 || !startsNumber(v) {
				return nil, verdictInvalid, fmt.Sprintf("entry %d has index %s", pos, v)
			}
			index = i
		}
		v, ok := fields["embedding"]
		if !ok {
			return nil, verdictInvalid, fmt.Sprintf("entry %d has no embedding", pos)
		}
		vec, why := oracleVector(v)
		if vec == nil {
			return nil, verdictInvalid, fmt.Sprintf("entry %d: %s", pos, why)
		}
		if dim == 0 {
			dim = len(vec)
		} else if len(vec) != dim {
			return nil, verdictInvalid, fmt.Sprintf("entry %d has %d dimensions, the first %d", pos, len(vec), dim)
		}
		if index >= n {
			return nil, verdictInvalid, fmt.Sprintf("entry %d has index %d of %d inputs", pos, index, n)
		}
		if slots[index] != nil {
			return nil, verdictInvalid, fmt.Sprintf("index %d twice", index)
		}
		slots[index] = vec
	}
	if len(entries) != n {
		return nil, verdictInvalid, fmt.Sprintf("%d entries for %d inputs", len(entries), n)
	}
	return slots, verdictAccepted, ""
}

// oracleVector reads one embedding value; nil and a reason when it is not
// a vector.
func oracleVector(v json.RawMessage) ([]float32, string) {
	switch v[0] {
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			return nil, err.Error()
		}
		if len(elems) == 0 {
			return nil, "empty vector"
		}
		out := make([]float32, len(elems))
		for k, e := range elems {
			if !startsNumber(e) {
				return nil, fmt.Sprintf("element %d is %s", k, e)
			}
			f, err := strconv.ParseFloat(string(e), 32)
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Sprintf("element %d (%s) is not a finite float32", k, e)
			}
			var ne *strconv.NumError
			if err != nil && (!errors.As(err, &ne) || !errors.Is(ne.Err, strconv.ErrRange)) {
				return nil, err.Error()
			}
			out[k] = float32(f) // an underflow reads as its nearest float32
		}
		return out, ""
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err.Error()
		}
		for _, c := range []byte(s) {
			if !isBase64Byte(c) {
				return nil, fmt.Sprintf("byte %q is not base64", c)
			}
		}
		enc := base64.StdEncoding
		if len(s)%4 != 0 {
			enc = base64.RawStdEncoding
		}
		b, err := enc.DecodeString(s)
		if err != nil {
			return nil, err.Error()
		}
		if len(b) == 0 || len(b)%4 != 0 {
			return nil, fmt.Sprintf("%d bytes are no float32 vector", len(b))
		}
		out := make([]float32, len(b)/4)
		for k := range out {
			bits := binary.LittleEndian.Uint32(b[4*k:])
			if bits&0x7f800000 == 0x7f800000 {
				return nil, fmt.Sprintf("element %d is not finite", k)
			}
			out[k] = math.Float32frombits(bits)
		}
		return out, ""
	}
	return nil, "neither an array nor a string"
}

// embUpstream is a local embeddings endpoint answering each batch (keyed
// by its inputs) with a fixed reply.
type embUpstream struct {
	srv     *httptest.Server
	replies map[string]embBatch
	answer  func(inputs []string) ([]byte, bool) // when replies has none

	mu      sync.Mutex
	asked   map[string]int
	strange []string
}

func batchKey(inputs []string) string { return strings.Join(inputs, "\x00") }

func startEmbUpstream(t *testing.T, replies map[string]embBatch, answer func([]string) ([]byte, bool)) *embUpstream {
	u := &embUpstream{replies: replies, answer: answer, asked: map[string]int{}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		u.srv.CloseClientConnections()
		u.srv.Close()
	})
	return u
}

func (u *embUpstream) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var req struct {
		Model  string   `json:"model"`
		Input  []string `json:"input"`
		Format string   `json:"encoding_format"`
	}
	err := json.Unmarshal(raw, &req)
	key := batchKey(req.Input)
	u.mu.Lock()
	u.asked[key]++
	if err != nil || r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
		u.strange = append(u.strange, fmt.Sprintf("%s %s %q", r.Method, r.URL.Path, raw))
	}
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if rep, ok := u.replies[key]; ok {
		if rep.fullLen > len(rep.body) {
			// Announce the whole answer, send a part: net/http then closes
			// the connection, as a dropped upstream does.
			w.Header().Set("Content-Length", strconv.Itoa(rep.fullLen))
		}
		_, _ = w.Write(rep.body)
		return
	}
	if u.answer != nil {
		if body, ok := u.answer(req.Input); ok {
			_, _ = w.Write(body)
			return
		}
	}
	u.mu.Lock()
	u.strange = append(u.strange, fmt.Sprintf("unknown batch %q", req.Input))
	u.mu.Unlock()
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, `{"error":{"message":"unknown batch","type":"invalid_request_error"}}`)
}

// requests counts the requests the upstream received.
func (u *embUpstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, k := range u.asked {
		n += k
	}
	return n
}

func (u *embUpstream) check(t *testing.T, what string) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range u.strange {
		t.Errorf("%s upstream got an unexpected request: %s", what, s)
	}
}

// embExpected is what one batch must come to.
type embExpected struct {
	verdict embVerdict
	vectors [][]float32
	why     string
}

func (c *embCase) run(t *testing.T) {
	desc := c.describe()
	// Judge every batch first, and hold the oracle to the damages whose
	// effect is known.
	judged := make([]embExpected, len(c.batches))
	replies := map[string]embBatch{}
	for b, bt := range c.batches {
		vecs, v, why := embedOracle(bt.body, bt.hi-bt.lo)
		judged[b] = embExpected{verdict: v, vectors: vecs, why: why}
		if bad := oracleDisagrees(bt.expect, v, vecs, c.meant[bt.lo:bt.hi]); bad != "" {
			t.Fatalf("test bug: the oracle disagrees with the damage of batch %d (%s): %s; body %q\n%s", b, bt.damage, bad, bt.body, desc)
		}
		replies[batchKey(c.texts[bt.lo:bt.hi])] = bt
	}

	primary := startEmbUpstream(t, replies, nil)
	e := map[string]string{
		"PGW_LIMITER_BACKEND":        "memory",
		"PGW_BREAKER_BACKEND":        "memory",
		"PGW_CACHE_BACKEND":          "none",
		"PGW_TELEMETRY_BACKEND":      "none",
		"EMB__OPENAI__1__BASE_URL":   primary.srv.URL + "/v1",
		"EMB__OPENAI__1__API_KEY":    "sk-prop-primary",
		"EMB__OPENAI__1__MODEL":      "text-embedding-prop",
		"EMB__OPENAI__1__TIMEOUT_S":  "10",
		"EMB__BATCH_SIZE":            strconv.Itoa(c.batchSize),
		"EMB__CONCURRENCY":           strconv.Itoa(c.concurrency),
		"EMB__ENCODING_FORMAT":       c.format,
		"EMB__RETRY__BACKOFF_BASE_S": "0.005",
		"EMB__RETRY__BACKOFF_MAX_S":  "0.02",
	}
	var backup *embUpstream
	if c.fallback {
		byText := map[string][]float32{}
		for i, text := range c.texts {
			byText[text] = c.backup[i]
		}
		br := rand.New(rand.NewPCG(c.seed, 0xfa11))
		var mu sync.Mutex
		backup = startEmbUpstream(t, nil, func(inputs []string) ([]byte, bool) {
			mu.Lock()
			defer mu.Unlock()
			a := &wireAnswer{}
			for i, text := range inputs {
				v, ok := byText[text]
				if !ok {
					return nil, false
				}
				a.entries = append(a.entries, wireEntry{index: strconv.Itoa(i), embedding: floatsJSON(br, v)})
			}
			return a.render(br, len(inputs)), true
		})
		e["EMB__BACKUP__2__BASE_URL"] = backup.srv.URL + "/v1"
		e["EMB__BACKUP__2__API_KEY"] = "sk-prop-fallback"
		e["EMB__BACKUP__2__MODEL"] = "text-embedding-prop-fallback"
		e["EMB__BACKUP__2__TIMEOUT_S"] = "10"
		e["EMB__BACKUP__2__PRIORITY"] = "1"
	}
	client, err := embed.FromEnv("EMB", polygateway.WithEnv(e))
	if err != nil {
		t.Fatalf("FromEnv: %v\n%s", err, desc)
	}
	t.Cleanup(func() { _ = client.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := client.Embed(ctx, c.texts)
	primary.check(t, "primary")
	if backup != nil {
		backup.check(t, "fallback")
	}

	// What the call must come to: every batch's own verdict, the fallback
	// standing in for a transient primary.
	want := make([][]float32, 0, len(c.texts))
	var failing []int // batches that must fail the call
	anyError := false
	for b, j := range judged {
		bt := c.batches[b]
		switch {
		case j.verdict == verdictAccepted:
			want = append(want, j.vectors...)
		case c.fallback && j.verdict == verdictMalformed:
			want = append(want, c.backup[bt.lo:bt.hi]...)
		case c.fallback && j.verdict == verdictErrorBody:
			// Classified like an error answer: the fallback may or may not
			// stand in, by the class.
			want = append(want, c.backup[bt.lo:bt.hi]...)
			anyError = true
		default:
			failing = append(failing, b)
		}
	}

	// Batches may be answered in different dimensions (an answer of one
	// input may have any; a fallback's model may have another). Each answer
	// is whole, but the call's vectors must share one dimension: such a mix
	// is a ResultInvalidError, never returned.
	mixed := false
	for _, v := range want {
		mixed = mixed || len(v) != len(want[0])
	}
	if len(failing) == 0 && !anyError {
		if mixed {
			var inv *polygateway.ResultInvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("batches of different dimensions: err = %v (vectors %v), want a ResultInvalidError\n%s", err, resp, desc)
			}
			return
		}
		if err != nil {
			t.Fatalf("Embed failed, but every answer is whole and valid (oracle): %v\n%s", err, desc)
		}
		checkVectors(t, resp, want, true, desc)
		if c.fallback {
			src := "openai_1"
			if judged[0].verdict != verdictAccepted {
				src = "backup_2"
			}
			if resp.SourceName != src {
				t.Errorf("SourceName %q, want %q\n%s", resp.SourceName, src, desc)
			}
		}
		return
	}
	if anyError && len(failing) == 0 && err == nil {
		if mixed {
			t.Fatalf("Embed returned vectors of different dimensions %v\n%s", resp.Vectors, desc)
		}
		checkVectors(t, resp, want, true, desc)
		if resp.SourceName != "backup_2" {
			t.Errorf("SourceName %q, want backup_2\n%s", resp.SourceName, desc)
		}
		return
	}
	if err == nil {
		var why []string
		for _, b := range failing {
			why = append(why, fmt.Sprintf("batch %d: %s, %s", b, judged[b].verdict, judged[b].why))
		}
		t.Fatalf("Embed accepted %d vectors (%v), but the call must fail: %s\n%s", len(resp.Vectors), resp.Vectors, strings.Join(why, "; "), desc)
	}
	if !errors.Is(err, polygateway.ErrGateway) {
		t.Errorf("err = %v, not a polygateway error\n%s", err, desc)
	}
	var be *embed.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, not a *embed.BatchError\n%s", err, desc)
	}
	// The class is that of the failing batch, when it is known which one
	// ended the call: the only one, or the first when batches run one
	// after another.
	switch {
	case len(failing) == 0:
		// Only an error answer, whose class the package leaves to the
		// classification of error bodies.
	case len(failing) == 1 || c.concurrency == 1:
		b := failing[0]
		if be.Batch != b || be.Offset != c.batches[b].lo || be.Count != c.batches[b].hi-c.batches[b].lo {
			t.Errorf("BatchError names batch %d (offset %d, count %d), want batch %d (offset %d, count %d): %v\n%s",
				be.Batch, be.Offset, be.Count, b, c.batches[b].lo, c.batches[b].hi-c.batches[b].lo, err, desc)
		}
		var invalid *polygateway.ResultInvalidError
		var transient *polygateway.TransientError
		switch judged[b].verdict {
		case verdictInvalid:
			if !errors.As(err, &invalid) {
				t.Errorf("err = %v, want a ResultInvalidError (%s)\n%s", err, judged[b].why, desc)
			}
			if backup != nil && backup.requests() != 0 {
				t.Errorf("the fallback was asked %d times after an invalid answer, which is not retried\n%s", backup.requests(), desc)
			}
		case verdictMalformed:
			if errors.As(err, &invalid) || !errors.As(err, &transient) {
				t.Errorf("err = %v, want a transient failure (%s)\n%s", err, judged[b].why, desc)
			}
		}
	case !containsInt(failing, be.Batch):
		t.Errorf("BatchError names batch %d, none of the failing batches %v: %v\n%s", be.Batch, failing, err, desc)
	}
}

func containsInt(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// oracleDisagrees checks the oracle's verdict against what a damage is
// known to do; "" when they agree.
func oracleDisagrees(exp embExpect, v embVerdict, vecs, meant [][]float32) string {
	switch exp {
	case expMeant:
		if v != verdictAccepted {
			return "want the meant vectors, oracle says " + v.String()
		}
		if d := diffVectors(vecs, meant); d != "" {
			return "oracle reads other vectors than meant: " + d
		}
	case expInvalid:
		if v != verdictInvalid {
			return "want invalid, oracle says " + v.String()
		}
	case expMalformed:
		if v != verdictMalformed {
			return "want malformed, oracle says " + v.String()
		}
	case expErrorBody:
		if v != verdictErrorBody {
			return "want an error body, oracle says " + v.String()
		}
	}
	return ""
}

// diffVectors compares values (so -0 equals 0); "" when equal.
func diffVectors(got, want [][]float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d vectors, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return fmt.Sprintf("vector %d has %d dimensions, want %d", i, len(got[i]), len(want[i]))
		}
		for k := range want[i] {
			if got[i][k] != want[i][k] {
				return fmt.Sprintf("vector %d differs at %d: %v, want %v", i, k, got[i][k], want[i][k])
			}
		}
	}
	return ""
}

// checkVectors holds resp to want, and Dim to the length of the first
// vector, and of every vector when the batches agree on one.
func checkVectors(t *testing.T, resp *embed.Response, want [][]float32, uniform bool, desc string) {
	t.Helper()
	if d := diffVectors(resp.Vectors, want); d != "" {
		t.Fatalf("Embed returned a wrong set: %s\n got %v\nwant %v\n%s", d, resp.Vectors, want, desc)
	}
	if resp.Dim != len(want[0]) {
		t.Errorf("Response.Dim is %d, the first vector has %d dimensions\n%s", resp.Dim, len(want[0]), desc)
	}
	for i, v := range resp.Vectors {
		if uniform && len(v) != resp.Dim {
			t.Errorf("vector %d has %d dimensions, Response.Dim is %d (Dim is documented as the length of every vector)\n%s", i, len(v), resp.Dim, desc)
		}
	}
}

// isBase64Byte reports whether c is of the standard base64 alphabet or is
// its padding.
func isBase64Byte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

// startsNumber reports whether a JSON value begins like a number.
func startsNumber(v json.RawMessage) bool {
	return v[0] == '-' || v[0] >= '0' && v[0] <= '9'
}
