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
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestDecodeFloatAndBase64Forms(t *testing.T) {
	t.Parallel()
	want := [][]float32{{0.5, -1.25, 3e-3}, {1, 2, 3}, {-0, 1e-7, 65504}}
	b64 := func(v []float32) string {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	floats := `{"object":"list","data":[
		{"object":"embedding","index":2,"embedding":[ -0 , 1e-7,65504 ]},
		{"object":"embedding","embedding":[0.5,-1.25,0.003],"index":0},
		{"index":1,"embedding":[1.0,2,3E0]}],
		"model":"m-1","usage":{"prompt_tokens":7,"total_tokens":7},"extra":{"nested":[1,{"a":null}]}}`
	b64Body := fmt.Sprintf(`{"data":[{"index":1,"embedding":%q},{"index":0,"embedding":%q},{"index":2,"embedding":%q}],"usage":{"total_tokens":5}}`,
		b64(want[1]), b64(want[0]), b64(want[2]))
	escaped := strings.ReplaceAll(b64Body, `/`, `\/`)
	for name, body := range map[string]string{"float": floats, "base64": b64Body, "escaped base64": escaped} {
		d, err := decodeEmbeddings(strings.NewReader(body), 3)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(d.vectors, want) {
			t.Errorf("%s: vectors = %v, want %v", name, d.vectors, want)
		}
		if !d.usageOK {
			t.Errorf("%s: no usage", name)
		}
	}
	d, _ := decodeEmbeddings(strings.NewReader(floats), 3)
	if d.model != "m-1" || d.promptTokens != 7 {
		t.Errorf("model %q tokens %d", d.model, d.promptTokens)
	}
}

func TestDecodeWithoutIndexUsesPosition(t *testing.T) {
	t.Parallel()
	d, err := decodeEmbeddings(strings.NewReader(`{"data":[{"embedding":[1]},{"embedding":[2]}]}`), 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.vectors[0][0] != 1 || d.vectors[1][0] != 2 || d.usageOK {
		t.Errorf("vectors %v usage %v", d.vectors, d.usageOK)
	}
}

func TestDecodeUsageZeroIsEstimated(t *testing.T) {
	t.Parallel()
	d, err := decodeEmbeddings(strings.NewReader(`{"data":[{"index":0,"embedding":[1]}],"usage":{"prompt_tokens":0,"total_tokens":0}}`), 1)
	if err != nil || d.usageOK {
		t.Fatalf("err %v usageOK %v, want no usage", err, d.usageOK)
	}
}

func TestDecodeVectorsDoNotOverlap(t *testing.T) {
	t.Parallel()
	d, err := decodeEmbeddings(strings.NewReader(`{"data":[{"index":1,"embedding":[1,2]},{"index":0,"embedding":[3,4]}]}`), 2)
	if err != nil {
		t.Fatal(err)
	}
	d.vectors[0] = append(d.vectors[0], 99) // must not overwrite vector 1
	if d.vectors[1][0] != 1 || d.vectors[1][1] != 2 {
		t.Errorf("vector 1 = %v after appending to vector 0", d.vectors[1])
	}
}

func TestDecodeBadElements(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"data":[{"index":0,"embedding":[1,true]}]}`,
		`{"data":[{"index":0,"embedding":[null]}]}`,
		`{"data":[{"index":0,"embedding":[[1]]}]}`,
		`{"data":[{"index":0,"embedding":[3.5e38]}]}`,
		`{"data":[{"index":0,"embedding":[-1e39,1]}]}`,
		`{"data":[{"index":-1,"embedding":[1]}]}`,
		`{"data":[{"index":1.5,"embedding":[1]}]}`,
		`{"data":[{"index":0}]}`,
		`{"data":[{"index":0,"embedding":{}}]}`,
		`{"data":[1]}`,
	} {
		var ie *invalidError
		if _, err := decodeEmbeddings(strings.NewReader(body), 1); !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want invalid", body, err)
		}
	}
}

func TestDecodeSmallReads(t *testing.T) {
	t.Parallel()
	// One byte per Read: every token crosses a refill.
	body := benchBody(5, 7, false)
	b64 := benchBody(5, 7, true)
	for _, in := range [][]byte{body, b64, []byte(strings.ReplaceAll(string(b64), "/", `\/`)),
		[]byte(`{"model":"a\"b","error":null,"usage":{"prompt_tokens":3},"data":` + string(body[strings.Index(string(body), "["):strings.LastIndex(string(body), "]")+1]) + `}`)} {
		want, err := decodeEmbeddings(bytes.NewReader(in), 5)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got, err := decodeEmbeddings(iotest.OneByteReader(bytes.NewReader(in)), 5)
		if err != nil {
			t.Fatalf("one byte at a time: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("one byte at a time: %+v, want %+v", got, want)
		}
	}
	d, err := decodeEmbeddings(iotest.OneByteReader(strings.NewReader(`{"model":"a\"b","data":[{"embedding":[1]}],"error":{"message":"x"}}`)), 1)
	if err != nil || d.model != `a"b` || string(d.errorBody) != `{"error":{"message":"x"}}` {
		t.Errorf("d = %+v, err %v", d, err)
	}
}

func TestDecodeMalformedAndReadErrors(t *testing.T) {
	t.Parallel()
	var me *malformedError
	for _, body := range []string{``, `{`, `{"data":[`, `nope`, `{"data":[{"index":0,"embedding":[1,]}]}`,
		`{"data":[{"index":0,"embedding":[1]}],}`, `{"data" [1]}`, `{"a":tru}`, `{"a":[1 2]}`, `{"a":"unterminated`,
		strings.Repeat("[", 300) + strings.Repeat("]", 300), `{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		// What encoding/json rejects: bad escapes, raw control characters,
		// numbers outside JSON's grammar, anything after the object.
		`{"model":"a\qb","data":[{"embedding":[1]}]}`, `{"model":"\u12g4","data":[{"embedding":[1]}]}`,
		"{\"model\":\"a\x01b\",\"data\":[{\"embedding\":[1]}]}", "{\"data\":[{\"embedding\":\"AAAAAAAAAAAAAAAA\n\"}]}",
		"{\"data\":[{\"embedding\":\"AAAA\tAAA\"}]}", "{\"da\x1fta\":[{\"embedding\":[1]}]}",
		`{"data":[{"embedding":[01]}]}`, `{"data":[{"embedding":[.5]}]}`, `{"data":[{"embedding":[1.]}]}`, `{"data":[{"embedding":[-]}]}`,
		`{"data":[{"embedding":[1e]}]}`, `{"data":[{"embedding":[1+2]}]}`, `{"data":[{"index":00,"embedding":[1]}]}`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":1.5.3}}`,
		`{"data":[{"embedding":[1]}]}x`, `{"data":[{"embedding":[1]}]} {}`, `{"data":[{"embedding":[1]}]}]`} {
		if _, err := decodeEmbeddings(strings.NewReader(body), 1); !errors.As(err, &me) {
			t.Errorf("%q: err = %v, want malformed", body, err)
		}
	}
	boom := errors.New("connection reset")
	_, err := decodeEmbeddings(&bodyReader{r: &failingReader{data: []byte(`{"data":[{"index":0,`), err: boom}, limit: 1 << 20}, 1)
	var re *readError
	if !errors.As(err, &re) || !errors.Is(err, boom) {
		t.Errorf("err = %v, want the read error", err)
	}
	_, err = decodeEmbeddings(&bodyReader{r: strings.NewReader(`{"data":[{"index":0,"embedding":[1,2,3,4,5,6,7,8]}]}`), limit: 16}, 1)
	if !errors.As(err, &re) || !errors.Is(err, errTooLarge) {
		t.Errorf("err = %v, want too large", err)
	}
}

type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestNormalizeL2(t *testing.T) {
	t.Parallel()
	v := []float32{3, 4}
	normalizeL2(v)
	if math.Abs(float64(v[0])-0.6) > 1e-7 || math.Abs(float64(v[1])-0.8) > 1e-7 {
		t.Errorf("v = %v", v)
	}
	z := []float32{0, 0}
	normalizeL2(z)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("zero vector became %v", z)
	}
}

func TestEmbeddingsURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://api.example.com/v1":                  "https://api.example.com/v1/embeddings",
		"https://api.example.com/v1/":                 "https://api.example.com/v1/embeddings",
		"https://x.azure.com/openai/v1?api-version=1": "https://x.azure.com/openai/v1/embeddings?api-version=1",
	} {
		if got, err := embeddingsURL(in); err != nil || got != want {
			t.Errorf("embeddingsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"api.example.com/v1", "ftp://h/v1", "http:///v1"} {
		if _, err := embeddingsURL(bad); err == nil {
			t.Errorf("embeddingsURL(%q) succeeded", bad)
		}
	}
}

// benchBody renders an answer of n vectors of dim values, as floats or
// base64, in reverse index order.
func benchBody(n, dim int, base64Form bool) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"object":"list","data":[`)
	v := make([]float32, dim)
	raw := make([]byte, 4*dim)
	for i := n - 1; i >= 0; i-- {
		for k := range v {
			// Like a real embedding: values of about ±1/√dim with all the
			// digits of a float32 (json.Marshal writes 8 or 9 of them).
			v[k] = float32(math.Sin(float64(i*7919+k*104729)) * 0.08)
		}
		if i != n-1 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"object":"embedding","index":%d,"embedding":`, i)
		if base64Form {
			for k, x := range v {
				binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(x))
			}
			buf.WriteByte('"')
			buf.WriteString(base64.StdEncoding.EncodeToString(raw))
			buf.WriteByte('"')
		} else {
			b, _ := json.Marshal(v)
			buf.Write(b)
		}
		buf.WriteByte('}')
	}
	buf.WriteString(`],"model":"m","usage":{"prompt_tokens":640,"total_tokens":640}}`)
	return buf.Bytes()
}

// BenchmarkDecode measures decoding alone: one answer of 64 vectors of 256
// values per op, reported per vector.
func BenchmarkDecode(b *testing.B) {
	const n, dim = 64, 256
	for _, form := range []string{"float", "base64"} {
		body := benchBody(n, dim, form == "base64")
		b.Run(form, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			r := bytes.NewReader(body)
			for b.Loop() {
				r.Reset(body)
				if _, err := decodeEmbeddings(r, n); err != nil {
					b.Fatal(err)
				}
			}
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perOp/n, "ns/vector")
			allocs := testing.AllocsPerRun(20, func() {
				r.Reset(body)
				_, _ = decodeEmbeddings(r, n)
			})
			b.ReportMetric(allocs/n, "allocs/vector")
		})
		// The baseline: encoding/json straight into []float32 (which it
		// parses with strconv), as a plain client would do it.
		b.Run(form+"/encoding_json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			r := bytes.NewReader(body)
			decode := func() {
				r.Reset(body)
				var out struct {
					Data []struct {
						Index     int             `json:"index"`
						Embedding json.RawMessage `json:"embedding"`
					} `json:"data"`
				}
				if err := json.NewDecoder(r).Decode(&out); err != nil {
					b.Fatal(err)
				}
				for _, d := range out.Data {
					var v []float32
					if form == "base64" {
						var s string
						_ = json.Unmarshal(d.Embedding, &s)
						raw, _ := base64.StdEncoding.DecodeString(s)
						v = make([]float32, len(raw)/4)
						for k := range v {
							v[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
						}
					} else if err := json.Unmarshal(d.Embedding, &v); err != nil {
						b.Fatal(err)
					}
					if len(v) != dim {
						b.Fatal("bad dim")
					}
				}
			}
			for b.Loop() {
				decode()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/vector")
			b.ReportMetric(testing.AllocsPerRun(5, decode)/n, "allocs/vector")
		})
	}
	// The floor of any base64 decoder: the standard library's base64
	// decoding of the vectors' strings alone, without JSON, checks or
	// conversion to float32.
	b.Run("base64/stdlib_floor", func(b *testing.B) {
		var strs [][]byte
		for _, part := range bytes.Split(benchBody(n, dim, true), []byte(`"embedding":"`))[1:] {
			strs = append(strs, part[:bytes.IndexByte(part, '"')])
		}
		dst := make([]byte, 4*dim)
		for b.Loop() {
			for _, s := range strs {
				if _, err := base64.StdEncoding.Decode(dst, s); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(strs)), "ns/vector")
	})
}

// TestDecodeFloatsMatchStrconv decodes arrays of numbers in many spellings,
// in one piece and one byte at a time, and compares every value with
// strconv.ParseFloat.
func TestDecodeFloatsMatchStrconv(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	const n, dim = 8, 97
	var body strings.Builder
	want := make([][]float32, n)
	body.WriteString(`{"data":[`)
	seps := []string{",", " , ", ",\n\t", ",  "}
	for i := range n {
		if i > 0 {
			body.WriteString(",")
		}
		body.WriteString(`{"index":` + strconv.Itoa(n-1-i) + `,"embedding":[ `)
		want[n-1-i] = make([]float32, dim)
		for k := range dim {
			f := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(30)-15))
			var s string
			switch rng.IntN(4) {
			case 0:
				s = strconv.FormatFloat(f, 'g', -1, 32)
			case 1:
				s = strconv.FormatFloat(f, 'e', rng.IntN(20), 64)
			case 2:
				s = strconv.FormatFloat(f, 'f', rng.IntN(25), 64)
			default:
				s = strconv.FormatFloat(f, 'E', -1, 64)
			}
			w, err := strconv.ParseFloat(s, 32)
			if err != nil {
				s, w = "0.5", 0.5
			}
			want[n-1-i][k] = float32(w)
			if k > 0 {
				body.WriteString(seps[rng.IntN(len(seps))])
			}
			body.WriteString(s)
		}
		body.WriteString(` ]}`)
	}
	body.WriteString(`]}`)
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(body.String()),
		"one byte": iotest.OneByteReader(strings.NewReader(body.String())),
		"halves":   iotest.HalfReader(strings.NewReader(body.String())),
	} {
		d, err := decodeEmbeddings(r, n)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range want {
			for k := range want[i] {
				if math.Float32bits(d.vectors[i][k]) != math.Float32bits(want[i][k]) {
					t.Fatalf("%s: vector %d[%d] = %v, want %v", name, i, k, d.vectors[i][k], want[i][k])
				}
			}
		}
	}
}

// TestDecodeBase64Vectors covers the base64 form's spellings and each way
// it can be wrong.
func TestDecodeBase64Vectors(t *testing.T) {
	t.Parallel()
	enc := func(vals ...float32) []byte {
		b := make([]byte, 4*len(vals))
		for k, v := range vals {
			binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
		}
		return b
	}
	body := func(strs ...string) string {
		var sb strings.Builder
		sb.WriteString(`{"data":[`)
		for i, s := range strs {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(`{"index":` + strconv.Itoa(i) + `,"embedding":"` + s + `"}`)
		}
		sb.WriteString(`]}`)
		return sb.String()
	}
	want := []float32{0.25, -1.5, 3e-7}
	for name, s := range map[string]string{
		"padded":   base64.StdEncoding.EncodeToString(enc(want...)),
		"unpadded": base64.RawStdEncoding.EncodeToString(enc(want...)),
		"escaped":  strings.ReplaceAll(base64.StdEncoding.EncodeToString(enc(want...)), "/", `\/`),
	} {
		d, err := decodeEmbeddings(strings.NewReader(body(s)), 1)
		if err != nil || !reflect.DeepEqual(d.vectors[0], want) {
			t.Errorf("%s (%s): %v, %v; want %v", name, s, d.vectors, err, want)
		}
	}
	one := base64.StdEncoding.EncodeToString(enc(1))
	for name, strs := range map[string][]string{
		"not base64":          {"AAAA!AAA"},
		"bad padding":         {"AAAAAA=A"},
		"six bytes":           {base64.StdEncoding.EncodeToString([]byte{1, 2, 3, 4, 5, 6})},
		"empty":               {""},
		"NaN":                 {base64.StdEncoding.EncodeToString(enc(1, float32(math.NaN())))},
		"infinity":            {base64.StdEncoding.EncodeToString(enc(float32(math.Inf(-1))))},
		"dimension mismatch":  {one, base64.StdEncoding.EncodeToString(enc(1, 2))},
		"after a good vector": {one, "AAAA!AAA"},
	} {
		var ie *invalidError
		if _, err := decodeEmbeddings(strings.NewReader(body(strs...)), len(strs)); !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
}
