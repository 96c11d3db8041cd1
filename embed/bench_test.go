package embed_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
)

// benchServer is a cheap /v1/embeddings fake for benchmarks: it counts the
// inputs of a request without decoding it and answers with a pre-rendered
// body of that many vectors (dim values each), so that the client's cost
// dominates what the benchmark measures.
type benchServer struct {
	srv    *httptest.Server
	bodies map[string]map[int][]byte // format → count → body
}

func newBenchServer(b *testing.B, dim int, counts ...int) *benchServer {
	s := &benchServer{bodies: map[string]map[int][]byte{"float": {}, "base64": {}}}
	for _, n := range counts {
		s.bodies["float"][n] = renderBench(n, dim, false)
		s.bodies["base64"][n] = renderBench(n, dim, true)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	b.Cleanup(s.srv.Close)
	return s
}

var (
	inputKey  = []byte(`"input":[`)
	base64Key = []byte(`"encoding_format":"base64"`)
)

func (s *benchServer) serve(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(r.Body)
	body := buf.Bytes()
	n := countInputs(body)
	form := "float"
	if bytes.Contains(body, base64Key) {
		form = "base64"
	}
	out, ok := s.bodies[form][n]
	if !ok {
		http.Error(w, "no body for "+strconv.Itoa(n), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// countInputs counts the strings of the request's input array.
func countInputs(body []byte) int {
	i := bytes.Index(body, inputKey)
	if i < 0 {
		return 0
	}
	n, in, esc := 0, false, false
	for _, c := range body[i+len(inputKey):] {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			if !in {
				n++
			}
			in = !in
		case !in && c == ']':
			return n
		}
	}
	return n
}

func renderBench(n, dim int, b64Form bool) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"object":"list","data":[`)
	v := make([]float32, dim)
	raw := make([]byte, 4*dim)
	for i := range n {
		for k := range v {
			// Like a real embedding: values of about ±1/√dim with all the
			// digits of a float32 (json.Marshal writes 8 or 9 of them).
			v[k] = float32(math.Sin(float64(i*7919+k*104729)) * 0.08)
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"object":"embedding","index":` + strconv.Itoa(i) + `,"embedding":`)
		if b64Form {
			for k, x := range v {
				binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(x))
			}
			buf.WriteString(`"` + base64.StdEncoding.EncodeToString(raw) + `"`)
		} else {
			enc, _ := json.Marshal(v)
			buf.Write(enc)
		}
		buf.WriteByte('}')
	}
	buf.WriteString(`],"model":"m","usage":{"prompt_tokens":` + strconv.Itoa(4*n) + `,"total_tokens":` + strconv.Itoa(4*n) + `}}`)
	return buf.Bytes()
}

// BenchmarkEmbed embeds 10,000 short texts with BATCH_SIZE=64 (157
// governed calls) against a local fake with 256-dimensional vectors, and
// reports throughput (vectors/s) and allocations per vector (the fake
// server's allocations, in the same process, are included). "raw" sends
// the same 157 requests with plain net/http and discards the answers: the
// baseline of the HTTP cost.
func BenchmarkEmbed(b *testing.B) {
	const total, bs, dim = 10000, 64, 256
	in := make([]string, total)
	for i := range in {
		in[i] = "short text number " + strconv.Itoa(i)
	}
	srv := newBenchServer(b, dim, bs, total%bs)
	for _, form := range []string{"float", "base64"} {
		b.Run("client/"+form, func(b *testing.B) {
			c := newClient(b, env(srv.srv.URL+"/v1", strconv.Itoa(bs), "EMBED__ENCODING_FORMAT", form))
			ctx := context.Background()
			runMeasured(b, total, func() {
				resp, err := c.Embed(ctx, in)
				if err != nil || len(resp.Vectors) != total {
					b.Fatalf("Embed: %v", err)
				}
			})
		})
		b.Run("raw/"+form, func(b *testing.B) {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			defer hc.CloseIdleConnections()
			bodies := make([][]byte, 0, total/bs+1)
			for lo := 0; lo < total; lo += bs {
				body, _ := json.Marshal(map[string]any{"model": "m", "input": in[lo:min(lo+bs, total)], "encoding_format": form})
				bodies = append(bodies, body)
			}
			runMeasured(b, total, func() {
				for _, body := range bodies {
					resp, err := hc.Post(srv.srv.URL+"/v1/embeddings", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			})
		})
	}
}

// runMeasured runs op b.N times and reports vectors/s and allocs/vector
// for op's vectors.
func runMeasured(b *testing.B, vectors int, op func()) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		op()
	}
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(vectors)
	b.ReportMetric(n/b.Elapsed().Seconds(), "vectors/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/vector")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/vector")
}
