package embed_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/embed"
)

// fakeReq is one request the fake embeddings server received.
type fakeReq struct {
	Model  string
	Input  []string
	Format string
	Auth   string
	Body   map[string]any
}

// fakeEmbed is an OpenAI-compatible /v1/embeddings server whose vectors
// are a deterministic function of each text (vecFor), with knobs to
// misbehave.
type fakeEmbed struct {
	srv *httptest.Server
	dim int

	mu   sync.Mutex
	reqs []fakeReq
	// failures maps a batch's first text to the number of 503s still to
	// send for it.
	failures map[string]int

	// shuffle answers data[] in reverse order.
	shuffle bool
	// withLength sends a Content-Length with the default answer (without
	// it, an answer beyond net/http's buffer is sent chunked).
	withLength bool
	// noUsage omits usage when it returns true for the batch.
	noUsage func(first string) bool
	// respond, when set, answers instead of the default (status, body).
	respond func(req fakeReq) (int, string)
	// hang blocks every request until the client gives up or Close.
	hang    bool
	arrived chan struct{}
	done    chan struct{}
}

// newFake starts a fake with vectors of length dim; tweak configures it
// before it serves.
func newFake(t testing.TB, dim int, tweak ...func(*fakeEmbed)) *fakeEmbed {
	t.Helper()
	f := &fakeEmbed{dim: dim, failures: map[string]int{}, arrived: make(chan struct{}, 1024), done: make(chan struct{})}
	for _, tw := range tweak {
		tw(f)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.close)
	return f
}

func (f *fakeEmbed) close() {
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// URL is the OpenAI-style base URL.
func (f *fakeEmbed) URL() string { return f.srv.URL + "/v1" }

func (f *fakeEmbed) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var req fakeReq
	_ = json.Unmarshal(raw, &req.Body)
	var typed struct {
		Model  string   `json:"model"`
		Input  []string `json:"input"`
		Format string   `json:"encoding_format"`
	}
	if err := json.Unmarshal(raw, &typed); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"bad json","type":"invalid_request_error","code":"bad_json"}}`)
		return
	}
	req.Model, req.Input, req.Format, req.Auth = typed.Model, typed.Input, typed.Format, r.Header.Get("Authorization")
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	fail := false
	if len(req.Input) > 0 && f.failures[req.Input[0]] > 0 {
		f.failures[req.Input[0]]--
		fail = true
	}
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	if f.hang {
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
		return
	}
	if fail {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
		return
	}
	if f.respond != nil {
		status, body := f.respond(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	body := f.answer(req)
	if f.withLength {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	_, _ = w.Write(body)
}

// answer renders the default answer to req.
func (f *fakeEmbed) answer(req fakeReq) []byte {
	type entry struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]entry, len(req.Input))
	tokens := 0
	for i, text := range req.Input {
		v := vecFor(text, f.dim)
		var emb any = v
		if req.Format == "base64" {
			emb = b64(v)
		}
		data[i] = entry{Object: "embedding", Index: i, Embedding: emb}
		tokens += len(text)
	}
	if f.shuffle {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	resp := map[string]any{"object": "list", "data": data, "model": req.Model + "-served"}
	if f.noUsage == nil || len(req.Input) == 0 || !f.noUsage(req.Input[0]) {
		resp["usage"] = map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}
	}
	b, _ := json.Marshal(resp)
	return b
}

// requests returns a copy of the requests received.
func (f *fakeEmbed) requests() []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.reqs...)
}

// perBatch counts requests by their first input.
func (f *fakeEmbed) perBatch() map[string]int {
	m := map[string]int{}
	for _, r := range f.requests() {
		if len(r.Input) > 0 {
			m[r.Input[0]]++
		}
	}
	return m
}

// vecFor is the fake's deterministic vector of text: values in [-1, 1]
// with three decimals, exactly representable round trips as float32.
func vecFor(text string, dim int) []float32 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, text)
	x := h.Sum64() | 1
	v := make([]float32, dim)
	for k := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[k] = float32(int64(x%2001)-1000) / 1000
	}
	return v
}

// b64 encodes v as base64 little-endian float32.
func b64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// texts returns n distinct texts.
func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "text number " + itoa(i)
	}
	return out
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// env returns a configuration for scope EMBED with one source at url and
// batch size bs, plus key=value overrides.
func env(url string, bs string, kv ...string) map[string]string {
	e := map[string]string{
		"PGW_LIMITER_BACKEND":          "memory",
		"PGW_BREAKER_BACKEND":          "memory",
		"PGW_CACHE_BACKEND":            "none",
		"PGW_TELEMETRY_BACKEND":        "none",
		"EMBED__OPENAI__1__BASE_URL":   url,
		"EMBED__OPENAI__1__API_KEY":    "sk-embed-test",
		"EMBED__OPENAI__1__MODEL":      "text-embedding-test",
		"EMBED__OPENAI__1__TIMEOUT_S":  "10",
		"EMBED__RETRY__BACKOFF_BASE_S": "0.01",
		"EMBED__RETRY__BACKOFF_MAX_S":  "0.05",
	}
	if bs != "" {
		e["EMBED__BATCH_SIZE"] = bs
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(e, kv[i])
			continue
		}
		e[kv[i]] = kv[i+1]
	}
	return e
}

// newClient assembles an embedding client from e and closes it at the end
// of the test.
func newClient(t testing.TB, e map[string]string, opts ...polygateway.Option) *embed.Client {
	t.Helper()
	c, err := embed.FromEnv("EMBED", append([]polygateway.Option{polygateway.WithEnv(e)}, opts...)...)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctxT returns a context bounded for a test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantVectors checks got against the fake's vectors of in, in order.
func wantVectors(t testing.TB, got [][]float32, in []string, dim int) {
	t.Helper()
	if len(got) != len(in) {
		t.Fatalf("got %d vectors, want %d", len(got), len(in))
	}
	for i, text := range in {
		want := vecFor(text, dim)
		if len(got[i]) != dim {
			t.Fatalf("vector %d has length %d, want %d", i, len(got[i]), dim)
		}
		for k := range want {
			if got[i][k] != want[k] {
				t.Fatalf("vector %d (%q) differs at %d: %v, want %v", i, text, k, got[i][k], want[k])
			}
		}
	}
}

// breakerClosed fails the test unless every source's breaker is closed
// with no failures counted.
func breakerClosed(t testing.TB, c *embed.Client) {
	t.Helper()
	for _, s := range c.Sources(context.Background()) {
		if s.Breaker.State != core.StateClosed || s.Breaker.ConsecutiveFailures != 0 {
			t.Errorf("source %s breaker = %v with %v failures, want closed with none", s.Name, s.Breaker.State, s.Breaker.ConsecutiveFailures)
		}
	}
}
