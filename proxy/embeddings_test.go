package proxy_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/proxy"
)

// bigEmbedder answers every call with the same n vectors of dim values.
type bigEmbedder struct{ resp *embed.Response }

func newBigEmbedder(n, dim int) *bigEmbedder {
	vecs := make([][]float32, n)
	for i := range vecs {
		vecs[i] = make([]float32, dim)
		for k := range vecs[i] {
			vecs[i][k] = float32(math.Sin(float64(i*dim+k))) * 0.07
		}
	}
	cost := 0.5
	return &bigEmbedder{resp: &embed.Response{Vectors: vecs, Dim: dim, Model: "emb-served", SourceName: "openai_1",
		Provider: "openai", PromptTokens: 42, UsageSource: "measured", CallID: "call-1", Cost: &cost, BatchCallIDs: []string{"b-1"}}}
}

func (e *bigEmbedder) Embed(context.Context, []string, ...polygateway.CallOption) (*embed.Response, error) {
	return e.resp, nil
}
func (e *bigEmbedder) Sources(context.Context) []polygateway.SourceStatus { return nil }
func (e *bigEmbedder) ResetSource(context.Context, string) error          { return nil }
func (e *bigEmbedder) Close() error                                       { return nil }

// writeRecorder is a ResponseWriter that counts the body's bytes and
// its writes, remembers the largest write, and keeps the body when keep
// is set.
type writeRecorder struct {
	h                     http.Header
	status                int
	keep                  bool
	body                  []byte
	size, largest, writes int
}

func (w *writeRecorder) Header() http.Header { return w.h }
func (w *writeRecorder) WriteHeader(s int)   { w.status = s }
func (w *writeRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.size, w.largest, w.writes = w.size+len(b), max(w.largest, len(b)), w.writes+1
	if w.keep {
		w.body = append(w.body, b...)
	}
	return len(b), nil
}

// TestGatewayWritesEmbeddingsVectorByVector: an answer of 1,024 vectors of
// 1,536 values reaches the client in writes of at most 32 KiB plus one
// vector, never marshalled whole into one buffer first (writing it
// allocates at most 1.5× its bytes: each entry's JSON once), and it is the
// answer the client expects, float and base64.
func TestGatewayWritesEmbeddingsVectorByVector(t *testing.T) {
	const n, dim = 1024, 1536
	emb := newBigEmbedder(n, dim)
	srv, err := proxy.New(proxy.Config{Backends: proxy.Backends{
		Embedders: map[string]proxy.Embedder{"EMBED": emb}, EmbedRoutes: map[string]string{"emb": "EMBED"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	for _, format := range []string{"float", "base64"} {
		request := func() *http.Request {
			req := httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(`{"model":"emb","input":["a"],"encoding_format":"`+format+`"}`))
			req.Header.Set("Content-Type", "application/json")
			return req
		}
		// What writing costs, measured with a writer that keeps nothing.
		w := &writeRecorder{h: http.Header{}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		srv.ServeHTTP(w, request())
		runtime.ReadMemStats(&after)
		kept := &writeRecorder{h: http.Header{}, keep: true}
		srv.ServeHTTP(kept, request())
		body := string(kept.body)
		if w.status != http.StatusOK {
			t.Fatalf("%s: status %d: %.300s", format, w.status, body)
		}
		var got struct {
			Object string `json:"object"`
			Model  string `json:"model"`
			Data   []struct {
				Object    string          `json:"object"`
				Index     int             `json:"index"`
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Usage   map[string]int `json:"usage"`
			Gateway map[string]any `json:"gateway"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("%s: the answer is not JSON: %v", format, err)
		}
		if got.Object != "list" || got.Model != "emb-served" || len(got.Data) != n || got.Usage["prompt_tokens"] != 42 ||
			got.Usage["total_tokens"] != 42 || got.Gateway["call_id"] != "call-1" || got.Gateway["batches"] != 1.0 {
			t.Fatalf("%s: answer %+v", format, got.Gateway)
		}
		for i, d := range got.Data {
			want := emb.resp.Vectors[i]
			var v []float32
			if format == "base64" {
				var s string
				_ = json.Unmarshal(d.Embedding, &s)
				raw, _ := base64.StdEncoding.DecodeString(s)
				for k := 0; k+4 <= len(raw); k += 4 {
					v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[k:])))
				}
			} else if err := json.Unmarshal(d.Embedding, &v); err != nil {
				t.Fatal(err)
			}
			if d.Index != i || d.Object != "embedding" || len(v) != dim || v[0] != want[0] || v[dim-1] != want[dim-1] {
				t.Fatalf("%s: entry %d: index %d, %d values", format, i, d.Index, len(v))
			}
		}
		entry := len(body) / n
		if w.largest > 32<<10+2*entry {
			t.Errorf("%s: a write of %d bytes for an answer of %d: the answer was not written vector by vector", format, w.largest, len(body))
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes in %d writes (largest %d); the handler allocated %.2f× the answer's bytes", format, len(body), w.writes, w.largest,
			float64(alloc)/float64(len(body)))
		if !testkit.RaceEnabled && float64(alloc) > 1.5*float64(len(body)) {
			t.Errorf("%s: writing an answer of %d bytes allocated %d", format, len(body), alloc)
		}
	}
}

// An embeddings request whose member has the wrong JSON type is a 400
// invalid_type naming that member, as on chat completions; the message
// names no Go type.
func TestAnEmbeddingsFieldOfTheWrongTypeIsA400NamingIt(t *testing.T) {
	t.Parallel()
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Embedders:   map[string]proxy.Embedder{"EMBED": newBigEmbedder(1, 3)},
		EmbedRoutes: map[string]string{"text-embedding-3-small": "EMBED"},
	}})
	for _, tc := range []struct{ body, param string }{
		{`{"model":5,"input":"x"}`, "model"},
		{`{"model":["text-embedding-3-small"],"input":"x"}`, "model"},
		{`{"model":"text-embedding-3-small","input":"x","encoding_format":5}`, "encoding_format"},
		{`{"model":"text-embedding-3-small","input":"x","encoding_format":{"type":"float"}}`, "encoding_format"},
	} {
		resp, body := f.do("POST", "/v1/embeddings", tc.body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: status %d: %s", tc.body, resp.StatusCode, body)
		}
		assertOpenAIError(t, body, "invalid_type", tc.param)
		if strings.Contains(string(body), "Go ") {
			t.Errorf("%s: the message names a Go type: %s", tc.body, body)
		}
	}
	// Bad JSON is still invalid_json.
	_, body := f.do("POST", "/v1/embeddings", `{"model":`)
	assertOpenAIError(t, body, "invalid_json", "")
}
