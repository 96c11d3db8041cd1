package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// postRaw posts body to path over a connection of its own, writing the
// body in the background while it reads the answer (as a client that does
// not wait for 100-continue does), and returns the answer. chunked sends
// the body without a Content-Length.
func postRaw(t *testing.T, f *fixture, path string, body []byte, chunked bool) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	head := "POST " + path + " HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		if !chunked {
			_, _ = conn.Write(body)
			return
		}
		for len(body) > 0 {
			n := min(len(body), 8<<10)
			if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", n, body[:n]); err != nil {
				return
			}
			body = body[n:]
		}
		_, _ = io.WriteString(conn, "0\r\n\r\n")
	}()
	defer func() {
		conn.Close()
		<-wrote
	}()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b)
}

// bigChat is a chat request of about n bytes.
func bigChat(n int) []byte {
	return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", max(0, n-60)) + `"}]}`)
}

// hold starts a streaming chat (with body) that the hanging upstream keeps
// in flight until the returned function is called.
func hold(t *testing.T, f *fixture, up *fakeupstream.Server, body []byte) func() {
	t.Helper()
	n := up.InFlight()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", f.ts.URL+"/v1/chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := f.ts.Client().Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	testkit.WaitFor(t, 10*time.Second, 5*time.Millisecond, "a held call", func() bool { return up.InFlight() == n+1 })
	return func() {
		cancel()
		<-done
	}
}

// hangingLLM is a chat client whose upstream hangs every call until
// hang is set to false.
func hangingLLM(t *testing.T) (up *fakeupstream.Server, llm *polygateway.GatewayClient, hang *atomic.Bool) {
	hang = &atomic.Bool{}
	hang.Store(true)
	up = fake(t, fakeupstream.WithFunc(func(fakeupstream.RequestInfo) fakeupstream.Behavior {
		if hang.Load() {
			return fakeupstream.Hang()
		}
		return fakeupstream.OK()
	}))
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model", "TIMEOUT_S", "30")
	return up, chatClient(t, "LLM", e), hang
}

// embedderOf builds the embeddings client of scope from e.
func embedderOf(t *testing.T, scope string, e env) *embed.Client {
	t.Helper()
	c, err := embed.FromEnv(scope, polygateway.WithEnv(e))
	if err != nil {
		t.Fatalf("embed.FromEnv(%s): %v", scope, err)
	}
	return c
}

// TestRequestsBeyondMaxInFlightAreRefusedUnread: with one call in flight
// and MaxInFlight 1, eight concurrent 4 MiB requests are all refused with
// 503, and the server reads almost none of their 32 MiB from the
// connections.
func TestRequestsBeyondMaxInFlightAreRefusedUnread(t *testing.T) {
	up, llm, _ := hangingLLM(t)
	var read atomic.Int64
	f := serveOn(t, proxy.Config{
		Backends:    proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": llm}, DefaultScope: "LLM"},
		MaxInFlight: 1,
	}, func(l net.Listener) net.Listener { return countingListener{l, &read} })
	defer hold(t, f, up, []byte(chatBody("m", true, "")))()

	const n, size = 8, 4 << 20
	body := bigChat(size)
	before := read.Load()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			code, h, b := postRaw(t, f, "/v1/chat/completions", body, false)
			if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || !strings.Contains(b, `"code":"server_overloaded"`) {
				t.Errorf("over MaxInFlight: %d %s", code, b)
			}
		})
	}
	wg.Wait()
	got := read.Load() - before
	t.Logf("%d refused requests of %d bytes: %d bytes read from their connections", n, len(body), got)
	if got > n*8<<10 {
		t.Errorf("the server read %d bytes of %d refused requests (%d bytes sent each), want at most 8 KiB each (headers and one read buffer)", got, n, len(body))
	}
	if up.Requests() != 1 {
		t.Errorf("upstream saw %d requests, want only the held one", up.Requests())
	}
}

// TestBodyBudgetRefusesBodiesThatDoNotFit: with a 100 KiB budget and a
// 60 KiB request held, another 60 KiB request — declared or chunked — is
// refused with 503 (the declared one unread), a small one is served, and
// the budget is whole again once everything is done.
func TestBodyBudgetRefusesBodiesThatDoNotFit(t *testing.T) {
	up, llm, hang := hangingLLM(t)
	var read atomic.Int64
	f := serveOn(t, proxy.Config{
		Backends:     proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": llm}, DefaultScope: "LLM"},
		MaxBodyBytes: 64 << 10, MaxBufferedBodyBytes: 100 << 10,
	}, func(l net.Listener) net.Listener { return countingListener{l, &read} })
	big := bigChat(60 << 10)
	release := hold(t, f, up, big)
	if got := proxy.BufferedBodyBytes(f.srv); got != int64(len(big)) {
		t.Errorf("a held request of %d bytes reserves %d", len(big), got)
	}

	before := read.Load()
	code, h, b := postRaw(t, f, "/v1/chat/completions", big, false)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || !strings.Contains(b, `"code":"server_overloaded"`) {
		t.Errorf("declared body beyond the budget: %d %s", code, b)
	}
	if got := read.Load() - before; got > 8<<10 {
		t.Errorf("the server read %d bytes of a refused %d-byte request, want at most 8 KiB", got, len(big))
	}
	if code, _, b := postRaw(t, f, "/v1/chat/completions", big, true); code != http.StatusServiceUnavailable || !strings.Contains(b, `"code":"server_overloaded"`) {
		t.Errorf("chunked body beyond the budget: %d %s", code, b)
	}
	// A small request fits beside the held one (it is held too, by the
	// hanging upstream; release it at once).
	releaseSmall := hold(t, f, up, []byte(chatBody("m", true, "")))
	releaseSmall()
	release()
	testkit.WaitFor(t, 10*time.Second, 5*time.Millisecond, "the budget to be given back", func() bool { return proxy.BufferedBodyBytes(f.srv) == 0 })

	// Once the held request is gone the same bodies are read in full.
	hang.Store(false)
	for _, chunked := range []bool{false, true} {
		if code, _, b := postRaw(t, f, "/v1/chat/completions", big, chunked); code != http.StatusOK {
			t.Errorf("chunked %v after the budget freed: %d %s", chunked, code, b)
		}
	}
	if got := proxy.BufferedBodyBytes(f.srv); got != 0 {
		t.Errorf("%d body bytes still reserved after every request ended", got)
	}
}

func TestBufferedBodyBytesBelowMaxBodyBytesIsAnError(t *testing.T) {
	_, err := proxy.New(proxy.Config{
		Backends:     proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": nil}},
		MaxBodyBytes: 1 << 20, MaxBufferedBodyBytes: 1 << 19,
	})
	if err == nil || !strings.Contains(err.Error(), "MaxBufferedBodyBytes") {
		t.Fatalf("New = %v, want an error naming MaxBufferedBodyBytes", err)
	}
}

// TestOneKeyRotatingClientIDsStaysWithinItsLimit: with client keys the
// bucket is the key's; X-Client-Id values, fresh each time, change nothing
// (and with an id rate they only sub-divide the key's limit).
func TestOneKeyRotatingClientIDsStaysWithinItsLimit(t *testing.T) {
	now := time.Unix(1_000_000, 0) // a clock that never moves: no refill
	for _, tc := range []struct {
		name         string
		idRate       float64
		idBurst      int
		sameID, want int // requests with one repeated id admitted
	}{
		{"keys only", 0, 0, 3, 3},
		{"ids sub-divide", 1, 1, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serve(t, proxy.Config{
				Backends:   proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": embedClient(t, "http://127.0.0.1:1/v1")}, DefaultEmbedScope: "EMBED"},
				ClientKeys: []string{"key-one", "key-two"}, ClientRate: 1, ClientBurst: 3,
				ClientIDRate: tc.idRate, ClientIDBurst: tc.idBurst,
				Now: func() time.Time { return now },
			})
			ok := 0
			for i := range tc.sameID + 2 {
				resp, _ := f.do("GET", "/v1/models", "", "Authorization", "Bearer key-two", "X-Client-Id", "same")
				if resp.StatusCode == http.StatusOK {
					ok++
				} else if resp.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("request %d: %d", i, resp.StatusCode)
				}
			}
			if ok != tc.sameID {
				t.Errorf("one id of key-two: %d admitted, want %d", ok, tc.sameID)
			}
			ok = 0
			for i := range 20 {
				resp, body := f.do("GET", "/v1/models", "", "Authorization", "Bearer key-one", "X-Client-Id", fmt.Sprintf("rotating-%d", i))
				switch resp.StatusCode {
				case http.StatusOK:
					ok++
				case http.StatusTooManyRequests:
					if !strings.Contains(string(body), "rate_limit_exceeded") || resp.Header.Get("Retry-After") == "" {
						t.Errorf("429 without its code or Retry-After: %v %s", resp.Header, body)
					}
				default:
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
				}
			}
			if ok != tc.want {
				t.Errorf("key-one with 20 fresh ids: %d admitted, want its burst of %d", ok, tc.want)
			}
			if strings.Contains(f.logs.String(), "key-one") || !strings.Contains(f.logs.String(), `"client":"key:1/id:rotating-0"`) {
				t.Errorf("log lines should name the key by its place, never by itself: %.500s", f.logs.String())
			}
		})
	}
}

// TestFreshIDsDoNotResetAnotherKeysBucket: a key sending 1,000 fresh ids
// (with MaxClients far below that) neither refills nor evicts another
// key's bucket.
func TestFreshIDsDoNotResetAnotherKeysBucket(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": embedClient(t, "http://127.0.0.1:1/v1")}, DefaultEmbedScope: "EMBED"},
		ClientKeys: []string{"key-one", "key-two"}, ClientRate: 0.5, ClientBurst: 3, ClientIDRate: 0.5, ClientIDBurst: 3, MaxClients: 20,
		Now: func() time.Time { return now },
	})
	models := func(key, id string) int {
		resp, _ := f.do("GET", "/v1/models", "", "Authorization", "Bearer "+key, "X-Client-Id", id)
		return resp.StatusCode
	}
	for i := range 2 {
		if code := models("key-two", "victim"); code != http.StatusOK {
			t.Fatalf("key-two request %d: %d", i, code)
		}
	}
	admitted := 0
	for i := range 1000 {
		if models("key-one", fmt.Sprintf("fresh-%d", i)) == http.StatusOK {
			admitted++
		}
	}
	if admitted != 3 {
		t.Errorf("key-one admitted %d of 1,000 fresh ids, want its burst of 3", admitted)
	}
	if code := models("key-two", "victim"); code != http.StatusOK {
		t.Errorf("key-two's last token: %d", code)
	}
	if code := models("key-two", "victim"); code != http.StatusTooManyRequests {
		t.Errorf("key-two after its burst: %d, want 429 (its bucket was reset)", code)
	}
	if code := models("key-two", "another"); code != http.StatusTooManyRequests {
		t.Errorf("key-two with a new id after its burst: %d, want 429", code)
	}
}

func TestWithoutClientKeysClientIDsStillKeyTheLimit(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": embedClient(t, "http://127.0.0.1:1/v1")}, DefaultEmbedScope: "EMBED"},
		ClientRate: 1, ClientBurst: 1, Now: func() time.Time { return now },
	})
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if resp, _ := f.do("GET", "/v1/models", "", "X-Client-Id", "a"); resp.StatusCode != want {
			t.Errorf("request %d of id a: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if resp, _ := f.do("GET", "/v1/models", "", "X-Client-Id", "b"); resp.StatusCode != http.StatusOK {
		t.Errorf("id b: %d", resp.StatusCode)
	}
	if _, err := proxy.New(proxy.Config{
		Backends:   proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": embedClient(t, "http://127.0.0.1:1/v1")}},
		ClientRate: 1, ClientIDRate: 1,
	}); err == nil || !strings.Contains(err.Error(), "ClientIDRate") {
		t.Errorf("ClientIDRate without ClientKeys: %v, want an error", err)
	}
}

// TestMetricsNeedTheTokenWhenOneIsSet: /metrics is open without
// MetricsToken and needs it (or the admin token) once it is set.
func TestMetricsNeedTheTokenWhenOneIsSet(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "polygateway_up 1\n") })
	backends := func() proxy.Backends {
		return proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": embedClient(t, "http://127.0.0.1:1/v1")}, DefaultEmbedScope: "EMBED"}
	}
	open := serve(t, proxy.Config{Backends: backends(), Metrics: metrics})
	if resp, body := open.do("GET", "/metrics", ""); resp.StatusCode != http.StatusOK || string(body) != "polygateway_up 1\n" {
		t.Errorf("/metrics without a token configured: %d %s", resp.StatusCode, body)
	}
	f := serve(t, proxy.Config{Backends: backends(), Metrics: metrics, MetricsToken: "scrape-token", AdminToken: "admin-token"})
	for _, auth := range []string{"", "Bearer wrong", "Bearer scrape-tokenx", "Basic scrape-token"} {
		resp, body := f.do("GET", "/metrics", "", "Authorization", auth)
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "polygateway_up") ||
			!strings.Contains(string(body), "invalid_metrics_token") || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("/metrics with %q: %d %s", auth, resp.StatusCode, body)
		}
	}
	for _, tok := range []string{"scrape-token", "admin-token"} {
		if resp, body := f.do("GET", "/metrics", "", "Authorization", "Bearer "+tok); resp.StatusCode != http.StatusOK || string(body) != "polygateway_up 1\n" {
			t.Errorf("/metrics with %s: %d %s", tok, resp.StatusCode, body)
		}
	}
	if strings.Contains(f.logs.String(), "scrape-token") {
		t.Error("the metrics token was logged")
	}
}

// TestReadyzDetailsNeedAToken: /readyz tells only ready or not, unless the
// request carries the metrics or admin token; then it names the scopes and
// sources.
func TestReadyzDetailsNeedAToken(t *testing.T) {
	down := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	e := baseEnv().source("LLM", "primary", 1, down.URL(), secretKey1, "primary-model").
		set("LLM__RETRY__MAX_ATTEMPTS", "1", "LLM__BREAKER__FAIL_THRESHOLD", "1", "LLM__BREAKER__COOLDOWN_S", "60")
	for _, tc := range []struct {
		name           string
		metrics, admin string
		detailed       []string // tokens that see the details
	}{
		{"no tokens configured", "", "", nil},
		{"metrics token", "scrape-token", "", []string{"scrape-token"}},
		{"both tokens", "scrape-token", "admin-token", []string{"scrape-token", "admin-token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serve(t, proxy.Config{
				Backends:     proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
				MetricsToken: tc.metrics, AdminToken: tc.admin,
			})
			f.do("POST", "/v1/chat/completions", chatBody("m", false, "")) // opens the only breaker
			for _, auth := range []string{"", "Bearer wrong", "Bearer scrape-token", "Bearer admin-token"} {
				resp, body := f.do("GET", "/readyz", "", "Authorization", auth)
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("%q: %d, want 503 with the only breaker open", auth, resp.StatusCode)
				}
				detailed := false
				for _, tok := range tc.detailed {
					detailed = detailed || auth == "Bearer "+tok
				}
				var got map[string]any
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatal(err)
				}
				switch {
				case detailed && (!strings.Contains(string(body), `"unavailable_scopes":["LLM"]`) || !strings.Contains(string(body), `"primary_1":false`)):
					t.Errorf("%q: details missing: %s", auth, body)
				case !detailed && (len(got) != 1 || got["ready"] != false):
					t.Errorf("%q: %s, want only {\"ready\":false}", auth, body)
				}
			}
		})
	}
}

// TestHealthzIsOpenAndNamesNoSource: liveness needs no token and names no
// scope or source, even with client keys and tokens configured.
func TestHealthzIsOpenAndNamesNoSource(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "secretive", 1, up.URL(), secretKey1, "model-x")
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		ClientKeys: []string{"k"}, MetricsToken: "m", AdminToken: "a",
	})
	resp, body := f.do("GET", "/healthz", "")
	if resp.StatusCode != http.StatusOK || string(body) != `{"draining":false,"ok":true}` {
		t.Errorf("/healthz = %d %s", resp.StatusCode, body)
	}
	for _, name := range []string{"LLM", "secretive", "model-x"} {
		if strings.Contains(string(body), name) {
			t.Errorf("/healthz names %q: %s", name, body)
		}
	}
}

// TestEmbeddingInputCapsAre400WithoutAnUpstreamCall: too many inputs
// (the default 2048, a million, or the scope's MAX_INPUTS) and too many
// input bytes are OpenAI-shaped 400s, and nothing goes upstream.
func TestEmbeddingInputCapsAre400WithoutAnUpstreamCall(t *testing.T) {
	emb := fake(t, fakeupstream.WithHandler("/embeddings", embeddingsHandler(t)))
	small := baseEnv().source("SMALL", "emb", 1, emb.URL(), secretEmbed, "embed-model").
		set("SMALL__BATCH_SIZE", "2", "SMALL__MAX_INPUTS", "3", "SMALL__MAX_INPUT_BYTES", "10")
	smallClient := embedderOf(t, "SMALL", small)
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Embedders:   map[string]proxy.Embedder{"EMBED": embedClient(t, emb.URL()), "SMALL": smallClient},
		EmbedRoutes: map[string]string{"emb": "EMBED", "small": "SMALL"},
	}})
	inputs := func(n int, s string) string {
		b, _ := json.Marshal(strings.Split(strings.Repeat(s+"\x00", n-1)+s, "\x00"))
		return string(b)
	}
	for _, tc := range []struct {
		name, body, code, param string
	}{
		{"2049 inputs", `{"model":"emb","input":` + inputs(2049, "a") + `}`, "too_many_inputs", "input"},
		{"a million inputs", `{"model":"emb","input":` + inputs(1_000_000, "a") + `}`, "too_many_inputs", "input"},
		{"scope's MAX_INPUTS", `{"model":"small","input":["a","b","c","d"]}`, "too_many_inputs", "input"},
		{"scope's MAX_INPUT_BYTES", `{"model":"small","input":["0123456","0123456"]}`, "input_too_large", ""},
	} {
		resp, body := f.do("POST", "/v1/embeddings", tc.body)
		var e struct {
			Error struct {
				Type  string  `json:"type"`
				Code  string  `json:"code"`
				Param *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadRequest ||
			e.Error.Type != "invalid_request_error" || e.Error.Code != tc.code || (e.Error.Param == nil) != (tc.param == "") {
			t.Errorf("%s: %d %.300s", tc.name, resp.StatusCode, body)
		}
	}
	if emb.Requests() != 0 {
		t.Errorf("upstream saw %d requests, want 0", emb.Requests())
	}
	if resp, body := f.do("POST", "/v1/embeddings", `{"model":"small","input":["a","b","c"]}`); resp.StatusCode != http.StatusOK {
		t.Errorf("at the scope's limits: %d %s", resp.StatusCode, body)
	}
}
