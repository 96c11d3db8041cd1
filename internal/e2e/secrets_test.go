package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/proxy"
	"github.com/polygateway/polygateway/telemetry"
)

// This file checks the redaction rule end to end: upstreams that echo the
// API key they were sent (in error bodies, malformed answers, SSE events,
// headers, redirects and OCR payloads, at random offsets and near the
// library's cut points, plain or escaped) never get 8 consecutive bytes of
// it into an error string, a Raw field, a log record, a telemetry row or a
// gateway response. Successful answers are the source's content and are
// passed on as they are, so the key is only ever placed where it makes the
// answer fail.

// keyOf returns the credential a request carries: the bearer key, else
// Azure's api-key header.
func keyOf(r *http.Request) string {
	if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return k
	}
	return r.Header.Get("Api-Key")
}

// leakUpstream serves every protocol with the behaviour the test set last.
type leakUpstream struct {
	srv, foreign *httptest.Server
	foreignHits  atomic.Int64
	mu           sync.Mutex
	answer       func(w http.ResponseWriter, r *http.Request, key string)
}

func newLeakUpstream(t *testing.T) *leakUpstream {
	u := &leakUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		u.mu.Lock()
		answer := u.answer
		u.mu.Unlock()
		answer(w, r, keyOf(r))
	}))
	u.foreign = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.foreignHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"foreign"}}],"data":[{"index":0,"embedding":[1]}],"success":true,"content":"foreign"}`)
	}))
	t.Cleanup(func() {
		u.srv.CloseClientConnections()
		u.srv.Close()
		u.foreign.Close()
	})
	return u
}

func (u *leakUpstream) set(answer func(w http.ResponseWriter, r *http.Request, key string)) {
	u.mu.Lock()
	u.answer = answer
	u.mu.Unlock()
}

// captureHandler is a slog handler that keeps every record as text, with
// every attribute resolved.
type captureHandler struct {
	mu     *sync.Mutex
	lines  *[]string
	prefix string
}

func newCapture() (*captureHandler, *slog.Logger) {
	h := &captureHandler{mu: &sync.Mutex{}, lines: new([]string)}
	return h, slog.New(h)
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.prefix + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, a)
		return true
	})
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func writeAttr(b *strings.Builder, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			writeAttr(b, g)
		}
		return
	}
	fmt.Fprintf(b, " %s=%+v", a.Key, v.Any())
}

func (h *captureHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range attrs {
		writeAttr(&b, a)
	}
	return &captureHandler{mu: h.mu, lines: h.lines, prefix: h.prefix + b.String() + " "}
}

func (h *captureHandler) WithGroup(name string) slog.Handler {
	return &captureHandler{mu: h.mu, lines: h.lines, prefix: h.prefix + name + "."}
}

// since returns the records after the first n.
func (h *captureHandler) since(n int) ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), (*h.lines)[n:]...), len(*h.lines)
}

// keyFragment returns a run of 8 consecutive bytes of key found in text
// as it is or with its URL or JSON escapes undone, "" when there is none.
func keyFragment(text, key string) string {
	forms := []string{text}
	if u, err := url.QueryUnescape(text); err == nil {
		forms = append(forms, u)
	}
	unjson := strings.NewReplacer(`\/`, "/", `\u002b`, "+", `\u002B`, "+", `\u003d`, "=", `\u003D`, "=", `\u0026`, "&", `\\`, `\`).Replace(text)
	forms = append(forms, unjson)
	if u, err := url.QueryUnescape(unjson); err == nil {
		forms = append(forms, u)
	}
	for _, f := range forms {
		for j := 0; j+8 <= len(key); j++ {
			if strings.Contains(f, key[j:j+8]) {
				return key[j : j+8]
			}
		}
	}
	return ""
}

// errorTexts returns the text of err and of every error it wraps, and the
// Raw of every ResultInvalidError among them.
func errorTexts(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		out = append(out, e.Error())
		var ri *polygateway.ResultInvalidError
		if errors.As(e, &ri) {
			out = append(out, ri.Raw, ri.Message)
		}
		switch u := e.(type) { //nolint:errorlint // walks the tree one level at a time by its Unwrap methods; errors.As would skip levels
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

// leakGen places the key in upstream payloads. Its generator is shared by
// the test and the fake's handlers: lockedSource orders their draws.
type leakGen struct{ rng *rand.Rand }

// lockedSource is a rand.Source safe for concurrent use.
type lockedSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src.Uint64()
}

const fillerAlphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789-_.:,;!?()"

func (g leakGen) filler(n int) string {
	b := make([]byte, max(n, 0))
	for i := range b {
		b[i] = fillerAlphabet[g.rng.IntN(len(fillerAlphabet))]
	}
	return string(b)
}

// form writes key as an upstream might echo it.
func (g leakGen) form(key string) string {
	switch g.rng.IntN(5) {
	case 0:
		return url.QueryEscape(key)
	case 1:
		return strings.ReplaceAll(key, "/", `\/`)
	case 2:
		return "Bearer " + key
	}
	return key
}

// cuts are the bounds the library cuts upstream text at.
var cuts = []int{120, 128, 256, 512, 1024, 4096}

// placed returns filler with the key (in some form) starting at a random
// offset, near one of cuts, or straddling it.
func (g leakGen) placed(key string, more ...int) string {
	var at int
	switch all := append(append([]int(nil), cuts...), more...); g.rng.IntN(3) {
	case 0:
		at = g.rng.IntN(300)
	default:
		c := all[g.rng.IntN(len(all))]
		at = max(0, c-g.rng.IntN(len(key)+12)+4)
	}
	return g.filler(at) + g.form(key) + g.filler(g.rng.IntN(40))
}

func (g leakGen) pick(options ...string) string { return options[g.rng.IntN(len(options))] }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// write answers with status, content type, body and (sometimes) headers
// that echo the key.
func (g leakGen) write(w http.ResponseWriter, key string, status int, ctype, body string) {
	if g.rng.IntN(3) == 0 {
		w.Header().Set("X-Echo-Authorization", "Bearer "+key)
		w.Header().Set("Retry-After", key)
		id := g.placed(key)
		w.Header().Set("X-Request-Id", id[:min(200, len(id))])
	}
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// errorEnvelope is an OpenAI-style error with the key in its message,
// code or type.
func (g leakGen) errorEnvelope(key string) string {
	msg, code, typ := jsonString(g.placed(key)), `"invalid_api_key"`, `"invalid_request_error"`
	switch g.rng.IntN(4) {
	case 0:
		code = jsonString(g.placed(key))
	case 1:
		typ = jsonString(g.form(key))
	}
	if g.rng.IntN(4) == 0 {
		return `{"base_resp":{"status_code":1004,"status_msg":` + msg + `}}`
	}
	return `{"error":{"message":` + msg + `,"type":` + typ + `,"code":` + code + `}}`
}

// textPage is a non-JSON error page: plain text, or HTML whose tags pad
// the key to the 64 KiB read limit.
func (g leakGen) textPage(key string) (string, string) {
	switch g.rng.IntN(3) {
	case 0:
		return "text/plain", g.placed(key)
	case 1:
		return "text/html", "<html><head><title>" + g.placed(key) + "</title></head><body>x</body></html>"
	}
	before := g.rng.IntN(len(key)+6) + 1
	pad := 64<<10 - before - len("<html>")
	return "text/html", "<html>" + strings.Repeat("<br>", pad/4) + strings.Repeat(" ", pad%4) + key + " tail</html>"
}

// redirect answers with a 3xx to the foreign host, the key in the query.
func (g leakGen) redirect(w http.ResponseWriter, r *http.Request, key, foreign string) {
	w.Header().Set("Location", foreign+r.URL.Path+"?token="+url.QueryEscape(key))
	w.WriteHeader([]int{301, 302, 303, 307, 308}[g.rng.IntN(5)])
	_, _ = io.WriteString(w, "moved: "+g.placed(key))
}

// chat is a failing answer of a chat completions endpoint.
func (g leakGen) chat(foreign string) func(http.ResponseWriter, *http.Request, string) {
	kind := g.rng.IntN(8)
	status := []int{400, 401, 403, 404, 408, 422, 429, 500, 502, 503}[g.rng.IntN(10)]
	return func(w http.ResponseWriter, r *http.Request, key string) {
		switch kind {
		case 0:
			g.write(w, key, status, "application/json", g.errorEnvelope(key))
		case 1:
			ct, body := g.textPage(key)
			g.write(w, key, []int{500, 502, 503}[g.rng.IntN(3)], ct, body)
		case 2: // a 200 body that is not the protocol's JSON
			g.write(w, key, 200, "application/json", g.pick("", "{")+g.placed(key))
		case 3: // an error inside a 200 body
			g.write(w, key, 200, "application/json", g.errorEnvelope(key))
		case 4: // a malformed SSE event, after a good one or not
			first := g.pick("", `data: {"choices":[{"delta":{"content":"hi"}}]}`+"\n\n")
			ev := `{"choices":[{"delta":{"content":"` + g.placed(key, 120-34, 120)
			g.write(w, key, 200, "text/event-stream", first+"data: "+ev+"\n\ndata: [DONE]\n\n")
		case 5: // an SSE error event
			first := g.pick("", `data: {"choices":[{"delta":{"content":"hi"}}]}`+"\n\n")
			ev := g.pick("event: error\ndata: ", "data: ") + g.errorEnvelope(key)
			g.write(w, key, 200, "text/event-stream", first+ev+"\n\ndata: [DONE]\n\n")
		case 6:
			g.redirect(w, r, key, foreign)
		default: // a large malformed event
			g.write(w, key, 200, "text/event-stream", "data: {"+g.filler(g.rng.IntN(2000))+g.placed(key)+g.filler(8000)+"\n\n")
		}
	}
}

// embeddings is a failing answer of an embeddings endpoint.
func (g leakGen) embeddings(foreign string) func(http.ResponseWriter, *http.Request, string) {
	kind := g.rng.IntN(6)
	status := []int{400, 401, 429, 500, 503}[g.rng.IntN(5)]
	return func(w http.ResponseWriter, r *http.Request, key string) {
		switch kind {
		case 0:
			g.write(w, key, status, "application/json", g.errorEnvelope(key))
		case 1:
			ct, body := g.textPage(key)
			g.write(w, key, 502, ct, body)
		case 2:
			g.write(w, key, 200, "application/json", `{"object":"list","data":[{"index":0,"embedding":[0.1,`+g.placed(key))
		case 3:
			g.write(w, key, 200, "application/json", g.errorEnvelope(key))
		case 4:
			g.write(w, key, 200, "application/json", `{"object":"list","data":[{"index":0,"embedding":`+jsonString(g.placed(key))+`}]}`)
		default:
			g.redirect(w, r, key, foreign)
		}
	}
}

// zipOf returns a ZIP of the named members.
func zipOf(members map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range members {
		f, _ := zw.Create(name)
		_, _ = io.WriteString(f, data)
	}
	_ = zw.Close()
	return buf.Bytes()
}

// ocrAnswer is a failing answer of a MonkeyOCR server (both phases of a
// layout parse).
func (g leakGen) ocrAnswer(foreign string) func(http.ResponseWriter, *http.Request, string) {
	kind := g.rng.IntN(10)
	return func(w http.ResponseWriter, r *http.Request, key string) {
		if strings.HasPrefix(r.URL.Path, "/static/") {
			switch kind {
			case 5:
				g.write(w, key, g.rng.IntN(2)*96+404, "application/json", `{"detail":`+jsonString(g.placed(key))+`}`)
			case 6:
				g.write(w, key, 200, "application/zip", g.placed(key))
			case 7:
				g.write(w, key, 200, "application/zip", string(zipOf(map[string]string{"doc/" + g.form(key) + ".txt": "x", g.filler(5) + key: "y"})))
			default:
				middle := g.pick(
					`{"pdf_info":[{"page_idx":0,"page_size":[600,800],"para_blocks":[{"type":`+jsonString(g.placed(key))+`,"bbox":[10,10,5,5]}]}]}`,
					`{"pdf_info":[{"page_idx":`+jsonString(g.placed(key))+`,"page_size":[600,800],"para_blocks":[]}]}`,
					`{"pdf_info":[{"page_idx":0,"page_size":`+jsonString(g.form(key))+`,"para_blocks":[]}]}`,
					`{"pdf_info":[{"page_idx":0,"page_size":[600,800],"para_blocks":[{"type":"text","bbox":`+jsonString(g.placed(key))+`}]}]}`,
					`{"pdf_info": `+g.placed(key),
				)
				g.write(w, key, 200, "application/zip", string(zipOf(map[string]string{"doc/doc_middle.json": middle})))
			}
			return
		}
		if r.URL.Path != "/parse" && kind >= 5 {
			kind = 0 // the layout-only failures answer /ocr/text as a failed task
		}
		switch kind {
		case 0:
			g.write(w, key, 200, "application/json", `{"success":false,"content":"","message":`+jsonString(g.placed(key))+`}`)
		case 1:
			g.write(w, key, 200, "application/json", g.pick("", `{"success":`)+g.placed(key, 256))
		case 2:
			g.write(w, key, 200, "application/json", `{"success":false,"content":"","message":`+jsonString("400: Unsupported file type: "+g.placed(key))+`}`)
		case 3:
			g.write(w, key, 500, "application/json", `{"detail":`+jsonString(g.pick("Parsing failed: 400: Unsupported file type: ", "Parsing failed: ")+g.placed(key))+`}`)
		case 4:
			g.redirect(w, r, key, foreign)
		case 8:
			dl := g.pick(foreign+"/static/x.zip?token="+url.QueryEscape(key), "/static/"+g.form(key)+"/../x.zip", "/static/"+g.filler(g.rng.IntN(260))+"/../"+key)
			g.write(w, key, 200, "application/json", `{"success":true,"message":"ok","download_url":`+jsonString(dl)+`}`)
		default:
			g.write(w, key, 200, "application/json", `{"success":true,"message":"ok","download_url":"/static/`+url.PathEscape(strings.ReplaceAll(key, "/", "_"))+`.zip"}`)
		}
	}
}

// randomKey is an API key of 20 to 64 bytes, sometimes with the + / =
// that base64-style keys carry.
func randomKey(rng *rand.Rand) string {
	alphabet := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	if rng.IntN(2) == 0 {
		alphabet += "+/="
	}
	b := []byte("sk-")
	for range 17 + rng.IntN(45) {
		b = append(b, alphabet[rng.IntN(len(alphabet))])
	}
	return string(b)
}

// leakWorld is one set of clients on one key.
type leakWorld struct {
	key     string
	logs    *captureHandler
	sink    *telemetry.Memory
	chat    *polygateway.GatewayClient
	emb     *embed.Client
	ocr     *ocr.Client
	gateway *httptest.Server
	gwChat  *polygateway.GatewayClient
	gwEmb   *embed.Client
}

func newLeakWorld(t *testing.T, up *leakUpstream, key, provider string, hc *http.Client) *leakWorld {
	t.Helper()
	w := &leakWorld{key: key, sink: telemetry.NewMemory()}
	var logger *slog.Logger
	w.logs, logger = newCapture()
	env := map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"EMB__BATCH_SIZE": "8",
	}
	for _, scope := range []string{"LLM", "EMB", "OCR"} {
		p := scope + "__" + strings.ToUpper(provider) + "__1__"
		env[p+"BASE_URL"] = up.srv.URL + "/v1"
		env[p+"API_KEY"] = key
		env[p+"MODEL"] = "m"
		env[p+"TIMEOUT_S"] = "5"
		// No stream watchdog: the stall window below is shorter than its default.
		env[p+"TTFT_TIMEOUT_S"], env[p+"INTER_TOKEN_TIMEOUT_S"] = "0", "0"
		env[scope+"__RETRY__MAX_ATTEMPTS"] = "1"
		// A 429 is waited out and retried until the scope stalls: keep
		// both short.
		env[scope+"__QUOTA_FULL"] = "fail_fast"
		env[scope+"__RETRY__BACKOFF_BASE_S"] = "0.01"
		env[scope+"__RETRY__BACKOFF_MAX_S"] = "0.02"
		env[scope+"__BACKPRESSURE__STALL_WINDOW_S"] = "0.3"
		env[scope+"__BACKPRESSURE__POLL_INTERVAL_S"] = "0.05"
	}
	env["OCR__"+strings.ToUpper(provider)+"__1__BASE_URL"] = up.srv.URL
	opts := []polygateway.Option{polygateway.WithEnv(env), polygateway.WithLogger(logger), polygateway.WithTelemetry(w.sink)}
	if hc != nil {
		opts = append(opts, polygateway.WithHTTPClient(hc))
	}
	var err error
	mk := func() *polygateway.GatewayClient {
		c, err := polygateway.FromEnv("LLM", opts...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	w.chat, w.gwChat = mk(), mk()
	t.Cleanup(func() { _ = w.chat.Close() })
	if w.emb, err = embed.FromEnv("EMB", opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.emb.Close() })
	if w.gwEmb, err = embed.FromEnv("EMB", opts...); err != nil {
		t.Fatal(err)
	}
	if w.ocr, err = ocr.FromEnv("OCR", opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.ocr.Close() })
	srv, err := proxy.New(proxy.Config{Logger: logger, Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": w.gwChat}, DefaultScope: "LLM",
		Embedders: map[string]proxy.Embedder{"EMB": w.gwEmb}, DefaultEmbedScope: "EMB",
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.gateway = httptest.NewServer(srv)
	t.Cleanup(func() {
		w.gateway.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return w
}

// reset closes every breaker again (a 401 opens it at once).
func (w *leakWorld) reset(t *testing.T, source string) {
	ctx := context.Background()
	for _, err := range []error{w.chat.ResetSource(ctx, source), w.gwChat.ResetSource(ctx, source),
		w.emb.ResetSource(ctx, source), w.gwEmb.ResetSource(ctx, source), w.ocr.ResetSource(ctx, source)} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// post sends body to the gateway and returns the whole response as text.
func (w *leakWorld) post(t *testing.T, path, body string) string {
	t.Helper()
	resp, err := w.gateway.Client().Post(w.gateway.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("gateway %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d %v\n", resp.StatusCode, resp.Header)
	sb.Write(b)
	return sb.String()
}

var pngDoc = []byte("\x89PNG\r\n\x1a\nfake png pixels")

func TestPropertyNoKeyFragmentLeaksAnywhere(t *testing.T) {
	up := newLeakUpstream(t)
	iterations := 40
	if testing.Short() {
		iterations = 10
	}
	rounds := []struct {
		provider string
		hc       *http.Client
	}{{"openai", nil}, {"azure", &http.Client{}}, {"openai", &http.Client{}}}
	for round, rc := range rounds {
		rng := rand.New(&lockedSource{src: rand.NewPCG(uint64(round), 0x5ec2e7)})
		key := randomKey(rng)
		w := newLeakWorld(t, up, key, rc.provider, rc.hc)
		source := rc.provider + "_1"
		g := leakGen{rng: rng}
		logsSeen, rowsSeen := 0, 0
		check := func(what string, texts ...string) {
			t.Helper()
			var lines []string
			lines, logsSeen = w.logs.since(logsSeen)
			rows := w.sink.Records()
			for _, r := range rows[rowsSeen:] {
				texts = append(texts, fmt.Sprintf("%+v", r))
			}
			rowsSeen = len(rows)
			for _, text := range append(texts, lines...) {
				if f := keyFragment(text, key); f != "" {
					t.Fatalf("round %d (%s, key %q), %s: %q of the key leaked into:\n%s", round, rc.provider, key, what, f, text)
				}
			}
			w.reset(t, source)
		}
		ctx := context.Background()
		for i := range iterations {
			up.set(g.chat(up.foreign.URL))
			stream := rng.IntN(2) == 0
			resp, err := w.chat.Chat(ctx, []polygateway.Message{polygateway.User("hello")}, polygateway.WithStream(stream))
			if err == nil {
				t.Fatalf("iteration %d: a leaking chat answer was accepted: %q", i, resp.Content)
			}
			check(fmt.Sprintf("chat stream=%v iteration %d", stream, i), errorTexts(err)...)

			up.set(g.chat(up.foreign.URL))
			check(fmt.Sprintf("gateway chat iteration %d", i), w.post(t, "/v1/chat/completions", chatBodyFor(rng.IntN(2) == 0)))

			up.set(g.embeddings(up.foreign.URL))
			_, err = w.emb.Embed(ctx, []string{"a text"})
			if err == nil {
				t.Fatalf("iteration %d: a leaking embeddings answer was accepted", i)
			}
			check(fmt.Sprintf("embeddings iteration %d", i), errorTexts(err)...)

			up.set(g.embeddings(up.foreign.URL))
			check(fmt.Sprintf("gateway embeddings iteration %d", i), w.post(t, "/v1/embeddings", `{"model":"any","input":["a text"]}`))

			up.set(g.ocrAnswer(up.foreign.URL))
			if rng.IntN(2) == 0 {
				_, err = w.ocr.RecognizeText(ctx, pngDoc)
			} else {
				_, err = w.ocr.ParseLayout(ctx, pngDoc)
			}
			if err == nil {
				t.Fatalf("iteration %d: a leaking OCR answer was accepted", i)
			}
			check(fmt.Sprintf("ocr iteration %d", i), errorTexts(err)...)
		}
	}
	if n := up.foreignHits.Load(); n != 0 {
		t.Fatalf("a redirect carried the key to another host %d times", n)
	}
}

func chatBodyFor(stream bool) string {
	return `{"model":"any","stream":` + fmt.Sprint(stream) + `,"messages":[{"role":"user","content":"hello"}]}`
}
