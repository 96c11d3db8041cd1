package embed

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// answerGen writes random embeddings answers: mostly well-formed, with
// what encoding/json must be matched on — repeated keys (top-level, in an
// entry, whole data arrays), keys in other cases, escapes, surrogate pairs
// (lone ones too), invalid UTF-8, numbers with exponents, beyond float32's
// range and below it, halfway between two float32 values, nulls — and now
// and then a byte of damage.
type answerGen struct {
	r *rand.Rand
	b bytes.Buffer
}

func (g *answerGen) one(k int) bool { return g.r.IntN(k) == 0 }

func (g *answerGen) ws() {
	if g.one(3) {
		g.b.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[g.r.IntN(4)])
	}
}

// key writes a key, now and then in another case.
func (g *answerGen) key(k string) {
	if g.one(25) {
		k = strings.ToUpper(k[:1]) + k[1:]
	}
	g.ws()
	g.b.WriteString(strconv.Quote(k))
	g.ws()
	g.b.WriteByte(':')
	g.ws()
}

// str writes a JSON string with escapes and odd characters.
func (g *answerGen) str() {
	parts := []string{"m", "odel-1", `\"`, `\\`, `\/`, `\n`, `\u00e9`, "é", `\ud83d\ude00`, "😀", `\ud800`, `\udc00x`, "\xff", "\xc3", `\t`, `\u0000`}
	g.b.WriteByte('"')
	for range g.r.IntN(6) {
		g.b.WriteString(parts[g.r.IntN(len(parts))])
	}
	g.b.WriteByte('"')
}

// number writes a vector element.
func (g *answerGen) number(f float32) {
	switch g.r.IntN(14) {
	case 0:
		g.b.WriteString(strconv.FormatFloat(float64(f), 'e', g.r.IntN(20), 64))
	case 1:
		g.b.WriteString(strconv.FormatFloat(float64(f), 'E', -1, 32))
	case 2:
		g.b.WriteString(strconv.FormatFloat(float64(f), 'f', g.r.IntN(30), 64))
	case 3: // halfway between f and its neighbour: float32 rounding
		next := math.Nextafter32(f, float32(math.Inf(1)))
		g.b.WriteString(strconv.FormatFloat((float64(f)+float64(next))/2, 'g', -1, 64))
	case 4:
		g.b.WriteString([]string{"1e39", "-1e39", "3.4028235e38", "3.4028236e38", "340282356779733661637539395458142568448",
			"1e-46", "1.4e-45", "-0", "0e0", "1E+2", "1e-400", "123456789012345678901234567890"}[g.r.IntN(12)])
	case 5:
		if g.one(8) {
			g.b.WriteString([]string{"null", "true", `"1"`, "[1]", "{}"}[g.r.IntN(5)])
			return
		}
		fallthrough
	default:
		g.b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
	}
}

// vector writes an embedding of dim values in the form asked.
func (g *answerGen) vector(dim int, b64 bool) {
	v := make([]float32, dim)
	for k := range v {
		v[k] = float32(g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(12)-8)))
	}
	if !b64 {
		g.b.WriteByte('[')
		for k, f := range v {
			if k > 0 {
				g.b.WriteByte(',')
				g.ws()
			}
			g.number(f)
		}
		g.b.WriteByte(']')
		return
	}
	raw := make([]byte, 4*dim)
	for k, f := range v {
		binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(f))
	}
	s := base64.StdEncoding.EncodeToString(raw)
	switch g.r.IntN(6) {
	case 0:
		s = base64.RawStdEncoding.EncodeToString(raw)
	case 1:
		s = strings.ReplaceAll(s, "/", `\/`)
	case 2:
		s = strings.ReplaceAll(s, "+", `\u002b`)
	case 3:
		if g.one(4) {
			s = s[:len(s)-1] + `\n`
		}
	}
	g.b.WriteString(`"` + s + `"`)
}

// entry writes data[i].
func (g *answerGen) entry(i, n, dim int, b64 bool) {
	g.b.WriteByte('{')
	g.key("object")
	g.b.WriteString(`"embedding"`)
	if !g.one(20) {
		g.b.WriteByte(',')
		g.key("index")
		g.b.WriteString([]string{strconv.Itoa(i), strconv.Itoa(i), strconv.Itoa(i), "null", "1e0", strconv.Itoa(n), "-1", "0"}[min(g.r.IntN(40), 7)])
	}
	for range 1 + min(g.r.IntN(30), 1) { // sometimes the embedding twice
		g.b.WriteByte(',')
		g.key("embedding")
		d := dim
		if g.one(30) {
			d = dim + 1
		}
		if g.one(40) {
			g.b.WriteString([]string{"null", "[]", `""`, "{}", "7"}[g.r.IntN(5)])
			continue
		}
		g.vector(d, b64 != g.one(40))
	}
	g.ws()
	g.b.WriteByte('}')
}

// answer writes an answer for n inputs of dim values.
func (g *answerGen) answer(n, dim int, b64 bool) []byte {
	g.b.Reset()
	g.ws()
	g.b.WriteByte('{')
	g.key("object")
	g.b.WriteString(`"list"`)
	members := []func(){
		func() {
			g.key("data")
			g.b.WriteByte('[')
			order := g.r.Perm(n)
			if g.one(10) {
				order = order[:g.r.IntN(n+1)]
			}
			for k, i := range order {
				if k > 0 {
					g.b.WriteByte(',')
					g.ws()
				}
				g.entry(i, n, dim, b64)
			}
			g.b.WriteByte(']')
		},
		func() { g.key("model"); g.str() },
		func() {
			g.key("usage")
			g.b.WriteString(`{"prompt_tokens":` + []string{"5", "0", "2.5e1", "1e10", "null", `"7"`}[g.r.IntN(6)] + `,"total_tokens":9}`)
		},
		func() {
			g.key("error")
			g.b.WriteString([]string{"null", "{}", `{"message":"busy","code":"overloaded"}`, "false"}[min(g.r.IntN(12), 3)])
		},
		func() { g.key("extra"); g.b.WriteString(`{"a":[1,{"b":null}],"c":"\u00e9"}`) },
		func() { // now and then the marks of a flat error envelope
			g.key([]string{"type", "object", "base_resp", "message"}[g.r.IntN(4)])
			g.b.WriteString([]string{`"list"`, "null", "7", `{"status_code":0}`, `"error"`, `{"status_code":1004}`, `{"status_code":null}`}[g.r.IntN(7)])
		},
	}
	if g.one(6) { // a repeated member: the last one wins, a repeated data array fills the same entries
		members = append(members, members[g.r.IntN(len(members))])
	}
	for _, k := range g.r.Perm(len(members)) {
		if (k == 3 || k == 5) && !g.one(8) {
			continue // most answers carry no error member
		}
		g.b.WriteByte(',')
		members[k]()
	}
	g.ws()
	g.b.WriteByte('}')
	g.ws()
	out := bytes.Clone(g.b.Bytes())
	if g.one(15) { // a byte of damage
		out[g.r.IntN(len(out))] = `{}[]",:0123456789eE.+- nx\`[g.r.IntN(26)]
	}
	return out
}

// TestDecodeAnswerMatchesEncodingJSON holds the decoder to encoding/json
// (refDecode) on random answers, float and base64 each, read in random
// sizes.
func TestDecodeAnswerMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, format := range []string{EncodingFloat, EncodingBase64} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			g := &answerGen{r: rand.New(rand.NewPCG(11, uint64(len(format))))}
			verdicts := map[refVerdict]int{}
			for range 3000 {
				n, dim := 1+g.r.IntN(4), 1+g.r.IntN(6)
				body := g.answer(n, dim, format == EncodingBase64)
				sizes := make([]byte, 1+g.r.IntN(4))
				for k := range sizes {
					sizes[k] = byte(1 + g.r.IntN(40))
				}
				checkAgainstRef(t, body, n, format, sizes)
				verdicts[refDecode(body, n, format).verdict]++
			}
			// The generator must exercise every outcome.
			for v := refAccepted; v <= refErrorBody; v++ {
				if verdicts[v] < 30 {
					t.Errorf("only %d answers %s of 3000: %v", verdicts[v], v, verdicts)
				}
			}
		})
	}
}

// readBodies are answers (for n inputs) every reader test uses: both
// forms, escapes, and keys that a read may cut anywhere.
var readBodies = []struct {
	n    int
	body string
}{
	{5, string(benchBody(5, 7, false))},
	{5, string(benchBody(5, 7, true))},
	{3, strings.ReplaceAll(string(benchBody(3, 4, true)), "/", `\/`)},
	{2, `{"model":"a\"b\u00e9\ud83d\ude00","error":null,"usage":{"prompt_tokens":3},"data":[{"index":1,"embedding":[1e-7, -0,3.4028235e38]},` +
		"\n" + `{"embedding":[0.1,0.2,0.3],"index":0}]}`},
	{1, `{"data":[{"embedding":[1]}],"error":{"message":"x"}}`},
	{1, `{"data":[{"embedding":[1,2]}],"data":[{"embedding":[3]}]}`},
}

// TestDecodeAnswerSplitAtEveryOffset reads each body in two reads split at
// every offset, and through testing/iotest's readers: the result is the
// one of reading it whole, and the one of encoding/json.
func TestDecodeAnswerSplitAtEveryOffset(t *testing.T) {
	t.Parallel()
	for _, rb := range readBodies {
		body, n := rb.body, rb.n
		for _, format := range []string{EncodingFloat, EncodingBase64} {
			want, werr := decodeAnswer(strings.NewReader(body), n, format)
			if werr != nil && !strings.Contains(body, `"error":{`) {
				t.Fatalf("%s: %v\n%s", format, werr, body)
			}
			check := func(how string, r io.Reader) {
				t.Helper()
				got, err := decodeAnswer(r, n, format)
				if fmt.Sprint(err) != fmt.Sprint(werr) || err == nil && !sameDecoded(got, want) {
					t.Fatalf("%s, %s: %+v, %v; whole: %+v, %v\n%s", how, format, got, err, want, werr, body)
				}
			}
			for k := range len(body) + 1 {
				check("split at "+strconv.Itoa(k), io.MultiReader(strings.NewReader(body[:k]), strings.NewReader(body[k:])))
			}
			check("one byte", iotest.OneByteReader(strings.NewReader(body)))
			check("halves", iotest.HalfReader(strings.NewReader(body)))
			check("data with EOF", iotest.DataErrReader(strings.NewReader(body)))
			check("one byte, data with EOF", iotest.DataErrReader(iotest.OneByteReader(strings.NewReader(body))))
			checkAgainstRef(t, []byte(body), n, format, []byte{1})
		}
	}
}

// TestDecodeAnswerReaderErrorsMidBody: a reader that fails after any
// number of bytes makes the decoder report that failure (a *readError
// wrapping it), never malformed JSON or a shorter answer.
func TestDecodeAnswerReaderErrorsMidBody(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset by peer")
	for _, rb := range readBodies {
		body := rb.body
		for k := range len(body) {
			for _, r := range []io.Reader{
				io.MultiReader(strings.NewReader(body[:k]), iotest.ErrReader(boom)),
				iotest.OneByteReader(io.MultiReader(strings.NewReader(body[:k]), iotest.ErrReader(boom))),
			} {
				_, err := decodeAnswer(r, 5, EncodingFloat)
				var re *readError
				if !errors.As(err, &re) || !errors.Is(err, boom) {
					t.Fatalf("failing after %d bytes: err = %v, want the read error\n%s", k, err, body)
				}
			}
		}
		_, err := decodeAnswer(iotest.TimeoutReader(strings.NewReader(body)), 5, EncodingFloat)
		if !errors.Is(err, iotest.ErrTimeout) {
			t.Errorf("timeout reader: err = %v", err)
		}
	}
}

// TestDecodeAnswerKeyAtAReadBoundary: the key that ends one read and the
// colon that starts the next. A reader that did not keep the key across
// the refill lost "embedding" here ("data entry N has no embedding").
func TestDecodeAnswerKeyAtAReadBoundary(t *testing.T) {
	t.Parallel()
	for _, form := range []bool{false, true} {
		body := string(benchBody(64, 16, form))
		for at := 0; ; {
			i := strings.Index(body[at:], `"embedding":`)
			if i < 0 {
				break
			}
			cut := at + i + len(`"embedding"`)
			d, err := decodeAnswer(io.MultiReader(strings.NewReader(body[:cut]), strings.NewReader(body[cut:])), 64, EncodingFloat)
			if err != nil || len(d.vectors) != 64 {
				t.Fatalf("read cut after the key at %d: %v", cut, err)
			}
			at = cut
		}
	}
}

// TestDecodeAnswerMemoryFollowsTheBody measures the heap one large answer
// costs: what the decoder allocates in all, as a multiple of the answer's
// bytes — 4 bytes per number held in the vectors, and for base64 each
// vector's string once besides — and what a cut answer that announced
// many inputs costs: what it sent, never what it announced.
func TestDecodeAnswerMemoryFollowsTheBody(t *testing.T) {
	const n, dim = 2048, 1536
	for _, tc := range []struct {
		format string
		most   float64 // allocated / body bytes
	}{{EncodingFloat, 0.6}, {EncodingBase64, 2.1}} {
		body := benchBody(n, dim, tc.format == EncodingBase64)
		alloc, d, err := allocated(func() (*decoded, error) {
			return decodeAnswer(bytes.NewReader(body), n, tc.format)
		})
		if err != nil || len(d.vectors) != n {
			t.Fatalf("%s: %v", tc.format, err)
		}
		ratio := float64(alloc) / float64(len(body))
		t.Logf("%s: an answer of %.1f MiB allocated %.1f MiB (%.2f× its bytes; the vectors hold %.1f MiB)",
			tc.format, mib(len(body)), mib(int(alloc)), ratio, mib(4*n*dim))
		if ratio > tc.most {
			t.Errorf("%s: allocated %.2f× the answer's bytes, want at most %.2f×", tc.format, ratio, tc.most)
		}
		// The same answer cut after a tenth of its bytes, for all n inputs.
		cut := body[:len(body)/10]
		alloc, _, err = allocated(func() (*decoded, error) {
			return decodeAnswer(bytes.NewReader(cut), n, tc.format)
		})
		var me *malformedError
		if !errors.As(err, &me) {
			t.Fatalf("%s: cut answer: %v, want malformed", tc.format, err)
		}
		if ratio := float64(alloc) / float64(len(cut)); ratio > 2*tc.most+0.1 {
			t.Errorf("%s: a cut answer of %.1f MiB allocated %.2f× its bytes, want at most %.2f×", tc.format, mib(len(cut)), ratio, 2*tc.most+0.1)
		}
	}
}

func mib(n int) float64 { return float64(n) / (1 << 20) }

// allocated returns the bytes f allocated.
func allocated(f func() (*decoded, error)) (uint64, *decoded, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, d, err
}

// TestReadErrorBodyAnyReads reads error answers through testing/iotest's
// readers, split at every offset and failing mid-body: the bytes read are
// the answer's first transport.DefaultMaxErrorBodyBytes, whatever the
// reads, and a failure is reported, never a shorter body.
func TestReadErrorBodyAnyReads(t *testing.T) {
	t.Parallel()
	long := `{"error":{"message":"` + strings.Repeat("x", 70<<10) + `"}}`
	for _, body := range []string{`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, `<html>502</html>`, "", long} {
		want := body[:min(len(body), 64<<10)]
		read := func(how string, r io.Reader) {
			t.Helper()
			got, err := readErrorBody(&bodyReader{r: r, limit: maxBodyBytes})
			if err != nil || string(got) != want {
				t.Fatalf("%s: %d bytes, %v; want %d", how, len(got), err, len(want))
			}
		}
		read("whole", strings.NewReader(body))
		read("one byte", iotest.OneByteReader(strings.NewReader(body)))
		read("halves", iotest.HalfReader(strings.NewReader(body)))
		read("data with EOF", iotest.DataErrReader(strings.NewReader(body)))
		for k := 0; k <= len(body); k += 1 + k/64 {
			read("split at "+strconv.Itoa(k), io.MultiReader(strings.NewReader(body[:k]), strings.NewReader(body[k:])))
		}
		boom := errors.New("connection reset")
		for k := 0; k < len(want); k += 1 + k/64 {
			_, err := readErrorBody(&bodyReader{r: io.MultiReader(strings.NewReader(body[:k]), iotest.ErrReader(boom)), limit: maxBodyBytes})
			if !errors.Is(err, boom) {
				t.Fatalf("failing after %d bytes: %v", k, err)
			}
		}
	}
}
