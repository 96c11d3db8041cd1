package proxy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// oneScope serves gpt-4o from one source of scope LLM at up, with cfg's
// other settings; kv adds keys to the client's environment.
func oneScope(t *testing.T, up *fakeupstream.Server, cfg proxy.Config, kv ...string) *fixture {
	t.Helper()
	e := baseEnv().source("LLM", "one", 1, up.URL(), secretKey1, "one-model").set(kv...)
	cfg.Backends = proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
		Routes:  map[string]string{"gpt-4o": "LLM"},
	}
	return serve(t, cfg)
}

// keyDigestID is how a client key is named outside the server.
func keyDigestID(key string) string {
	h := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(h[:6])
}

func TestProvidersShowBaseURLsOnlyToTheAdminToken(t *testing.T) {
	t.Parallel()
	up := fake(t)
	for _, tc := range []struct {
		name string
		cfg  proxy.Config
		hdr  []string
		want int
		urls bool
	}{
		{"no tokens at all", proxy.Config{}, nil, http.StatusOK, false},
		{"client key", proxy.Config{ClientKeys: []string{"key-a"}, AdminToken: "adm"}, []string{"Authorization", "Bearer key-a"}, http.StatusOK, false},
		{"no key when keys are set", proxy.Config{ClientKeys: []string{"key-a"}}, nil, http.StatusUnauthorized, false},
		{"admin token without client keys", proxy.Config{AdminToken: "adm"}, []string{"Authorization", "Bearer adm"}, http.StatusOK, true},
		{"admin token with client keys", proxy.Config{ClientKeys: []string{"key-a"}, AdminToken: "adm"}, []string{"Authorization", "Bearer adm"}, http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := oneScope(t, up, tc.cfg)
			resp, body := f.do("GET", "/v1/providers", "", tc.hdr...)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want != http.StatusOK {
				return
			}
			var out struct {
				Data []map[string]any `json:"data"`
			}
			if err := json.Unmarshal(body, &out); err != nil || len(out.Data) != 1 {
				t.Fatalf("body %s: %v", body, err)
			}
			p := out.Data[0]
			if p["name"] != "one_1" || p["model"] != "one-model" || p["breaker"].(map[string]any)["state"] != "closed" {
				t.Errorf("names, models and states missing: %s", body)
			}
			host := strings.TrimPrefix(strings.TrimSuffix(up.URL(), "/v1"), "http://")
			if shown := strings.Contains(string(body), host); shown != tc.urls {
				t.Errorf("upstream address shown = %v, want %v: %s", shown, tc.urls, body)
			}
			if _, has := p["base_url"]; has != tc.urls {
				t.Errorf("base_url present = %v, want %v", has, tc.urls)
			}
		})
	}
}

// cacheEnv turns the memory cache on for a client.
var cacheEnv = []string{"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "tenant-test", "PGW_CACHE_TTL_S", "60"}

func TestCachedAnswersArePerClientKeyUnlessShared(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "per key", true: "shared"}[shared], func(t *testing.T) {
			up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithContent("the answer")))
			f := oneScope(t, up, proxy.Config{ClientKeys: []string{"key-a", "key-b"}, SharedCache: shared}, cacheEnv...)
			ask := func(key string) (*http.Response, string) {
				resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""), "Authorization", "Bearer "+key)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", key, resp.StatusCode, body)
				}
				return resp, string(body)
			}
			ask("key-a")
			if resp, _ := ask("key-a"); resp.Header.Get("X-PolyGateway-Cache") != "hit" {
				t.Fatalf("the same key's second request was not a hit")
			}
			resp, body := ask("key-b")
			hit := resp.Header.Get("X-PolyGateway-Cache") == "hit"
			if hit != shared {
				t.Errorf("key-b answered from key-a's cache entry = %v, want %v (SharedCache %v): %s", hit, shared, shared, body)
			}
			want := 2
			if shared {
				want = 1
			}
			if up.Requests() != want {
				t.Errorf("upstream requests = %d, want %d", up.Requests(), want)
			}
		})
	}
}

func TestCacheHitSaysSoInTheAttemptsHeader(t *testing.T) {
	t.Parallel()
	up := fake(t)
	f := oneScope(t, up, proxy.Config{}, cacheEnv...)
	for _, stream := range []bool{false, true} {
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", stream, ""))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		resp, body = f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", stream, ""))
		if resp.Header.Get("X-PolyGateway-Cache") != "hit" {
			t.Fatalf("stream=%v: no hit: %s", stream, body)
		}
		if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "cache" {
			t.Errorf("stream=%v: X-PolyGateway-Attempts on a cache hit = %q, want cache", stream, got)
		}
	}
}

func TestRequestDeadline(t *testing.T) {
	t.Parallel()
	ok := fake(t)
	t.Run("default is known to the client", func(t *testing.T) {
		f := oneScope(t, ok, proxy.Config{})
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-PolyGateway-Timeout") != "600" {
			t.Fatalf("%d, X-PolyGateway-Timeout %q, want 600: %s", resp.StatusCode, resp.Header.Get("X-PolyGateway-Timeout"), body)
		}
	})
	t.Run("a shorter header is kept, a longer one clamped", func(t *testing.T) {
		f := oneScope(t, ok, proxy.Config{RequestTimeout: 90 * time.Second})
		for in, want := range map[string]string{"2.5": "2.5", "90": "90", "3600": "90"} {
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""), "X-PolyGateway-Timeout", in)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-PolyGateway-Timeout") != want {
				t.Errorf("header %s: %d, X-PolyGateway-Timeout %q, want %s: %s", in, resp.StatusCode, resp.Header.Get("X-PolyGateway-Timeout"), want, body)
			}
		}
	})
	t.Run("an invalid header is a 400 naming it", func(t *testing.T) {
		ok := fake(t)
		f := oneScope(t, ok, proxy.Config{})
		for _, in := range []string{"soon", "0", "-3", "NaN", "Inf"} {
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""), "X-PolyGateway-Timeout", in)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"param":"X-PolyGateway-Timeout"`) {
				t.Errorf("header %q: %d %s", in, resp.StatusCode, body)
			}
		}
		if ok.Requests() != 0 {
			t.Errorf("an invalid deadline reached the upstream")
		}
	})
	hang := fake(t, fakeupstream.WithBehavior(fakeupstream.Hang()))
	t.Run("a client without a deadline gets one", func(t *testing.T) {
		f := oneScope(t, hang, proxy.Config{RequestTimeout: 200 * time.Millisecond})
		for _, stream := range []bool{false, true} {
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", stream, ""))
			if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), `"code":"timeout"`) {
				t.Errorf("stream=%v: a hung upstream: %d %s", stream, resp.StatusCode, body)
			}
		}
	})
	t.Run("an over-long header is held to the maximum", func(t *testing.T) {
		f := oneScope(t, hang, proxy.Config{RequestTimeout: 200 * time.Millisecond})
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""), "X-PolyGateway-Timeout", "86400")
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("a hung upstream with a day's header: %d %s", resp.StatusCode, body)
		}
	})
}

// observer records what the server reports.
type observer struct {
	mu       sync.Mutex
	requests []string
	refusals []string
}

func (o *observer) ObserveRequest(route string, status int, client string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, route+" "+http.StatusText(status)+" "+client)
}

func (o *observer) ObserveRefusal(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refusals = append(o.refusals, reason)
}

func (o *observer) seen() ([]string, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.requests), slices.Clone(o.refusals)
}

func TestObserverSeesRoutesClientsAndRefusals(t *testing.T) {
	t.Parallel()
	up := fake(t)
	obs := &observer{}
	f := oneScope(t, up, proxy.Config{ClientKeys: []string{"key-a"}, ClientRate: 0.001, ClientBurst: 1, MaxBodyBytes: 1 << 10, Observer: obs})
	auth := []string{"Authorization", "Bearer key-a"}
	f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""), auth...)
	f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))          // no key
	f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""), auth...) // over the rate
	f.do("GET", "/nowhere", "")
	reqs, refusals := obs.seen()
	id := keyDigestID("key-a")
	want := []string{
		"/v1/chat/completions OK " + id,
		"/v1/chat/completions Unauthorized ",
		"/v1/chat/completions Too Many Requests " + id,
		"unmatched Not Found ",
	}
	if !slices.Equal(reqs, want) {
		t.Errorf("requests = %q\nwant       %q", reqs, want)
	}
	if !slices.Equal(refusals, []string{proxy.RefusedAuth, proxy.RefusedClientRate}) {
		t.Errorf("refusals = %q", refusals)
	}
	for _, r := range reqs {
		if strings.Contains(r, "key-a ") || strings.HasSuffix(r, " key-a") {
			t.Errorf("a key reached the observer: %q", r)
		}
	}
}

func TestObserverNamesEveryRefusalBeforeGovernance(t *testing.T) {
	t.Parallel()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.Hang()))
	obs := &observer{}
	f := oneScope(t, up, proxy.Config{MaxInFlight: 1, MaxBodyBytes: 1 << 10, Observer: obs})
	big := chatBody("gpt-4o", false, `,"user":"`+strings.Repeat("x", 2<<10)+`"`)
	f.do("POST", "/v1/chat/completions", big)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("POST", f.ts.URL+"/v1/chat/completions", strings.NewReader(chatBody("gpt-4o", false, "")))
		req.Header.Set("X-PolyGateway-Timeout", "2")
		if resp, err := f.ts.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the hung request in flight", func() bool { return up.InFlight() == 1 })
	f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	<-done
	_, refusals := obs.seen()
	if !slices.Equal(refusals, []string{proxy.RefusedBodyLimit, proxy.RefusedInFlight}) {
		t.Errorf("refusals = %q, want body_limit, in_flight", refusals)
	}
}

// TestTheGatewaysOwnBudgetAndDrainingRefusalsAreCounted: the scope's
// spend budget refuses with 429 budget_exhausted and a draining server
// with 503 server_shutting_down; the observer counts both refusals.
func TestTheGatewaysOwnBudgetAndDrainingRefusalsAreCounted(t *testing.T) {
	t.Parallel()
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"one-model": {"input_per_1m": 0, "output_per_1m": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every answer is 1000 tokens, 2000 micro-USD: the budget holds one.
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(1000)))
	obs := &observer{}
	f := oneScope(t, up, proxy.Config{Observer: obs}, "PGW_PRICING_PATH", prices, "LLM__BUDGET__USD", "0.0021",
		"LLM__BUDGET__WINDOW_S", "3600", "LLM__RETRY__MAX_ATTEMPTS", "1")
	body := `{"model":"gpt-4o","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	if resp, b := f.do("POST", "/v1/chat/completions", body); resp.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d %s", resp.StatusCode, b)
	}
	if resp, b := f.do("POST", "/v1/chat/completions", body); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `"budget_exhausted"`) {
		t.Fatalf("over the budget: %d %s", resp.StatusCode, b)
	}
	if err := f.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp, b := f.do("POST", "/v1/chat/completions", body); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "server_shutting_down") {
		t.Fatalf("while draining: %d %s", resp.StatusCode, b)
	}
	if _, refusals := obs.seen(); !slices.Equal(refusals, []string{proxy.RefusedBudget, proxy.RefusedDraining}) {
		t.Errorf("refusals = %q, want budget, draining", refusals)
	}
}

// TestAnUpstreamRefusalIsNoRefusalBeforeGovernance: a source's 429
// "Request too large" reaches the client as a rejected request with the
// code request_too_large, and a 400 whose provider code is
// rate_limit_exceeded (or one of the gateway's own refusal codes:
// budget_exhausted, server_overloaded, server_shutting_down) keeps it; the
// governed call ran, so the observer counts no refusal.
func TestAnUpstreamRefusalIsNoRefusalBeforeGovernance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		upstream fakeupstream.Behavior
		code     string
	}{
		{"429 request too large", fakeupstream.Status(http.StatusTooManyRequests,
			`{"error":{"message":"Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`, nil),
			"request_too_large"},
		{"400 rate_limit_exceeded", fakeupstream.Status(http.StatusBadRequest,
			`{"error":{"message":"bad request","type":"invalid_request_error","param":null,"code":"rate_limit_exceeded"}}`, nil),
			"rate_limit_exceeded"},
		{"400 budget_exhausted", fakeupstream.Status(http.StatusBadRequest,
			`{"error":{"message":"bad request","type":"invalid_request_error","param":null,"code":"budget_exhausted"}}`, nil),
			"budget_exhausted"},
		{"400 server_overloaded", fakeupstream.Status(http.StatusBadRequest,
			`{"error":{"message":"bad request","type":"invalid_request_error","param":null,"code":"server_overloaded"}}`, nil),
			"server_overloaded"},
		{"400 server_shutting_down", fakeupstream.Status(http.StatusBadRequest,
			`{"error":{"message":"bad request","type":"invalid_request_error","param":null,"code":"server_shutting_down"}}`, nil),
			"server_shutting_down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := fake(t, fakeupstream.WithBehavior(tc.upstream))
			obs := &observer{}
			f := oneScope(t, up, proxy.Config{Observer: obs})
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
				t.Fatalf("an upstream refusal: %d %s, want 400 %s", resp.StatusCode, body, tc.code)
			}
			if up.Requests() == 0 {
				t.Fatal("the upstream saw no request")
			}
			if _, refusals := obs.seen(); len(refusals) != 0 {
				t.Errorf("refusals = %q, want none: the governed call ran", refusals)
			}
		})
	}
}

// TestOnlyARequestBodyTheBudgetRefusesIsAMemoryRefusal: both a request
// body and an upstream answer that do not fit MaxBufferedBodyBytes are a
// 503 server_overloaded, but only the body is refused before the governed
// call runs: the answer's call ran (the upstream answered), and is no
// refusal.
func TestOnlyARequestBodyTheBudgetRefusesIsAMemoryRefusal(t *testing.T) {
	t.Parallel()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(40_000)))
	obs := &observer{}
	f := oneScope(t, up, proxy.Config{Observer: obs, MaxBodyBytes: 64 << 10, MaxBufferedBodyBytes: 128 << 10}, "LLM__RETRY__MAX_ATTEMPTS", "1")
	resp, b := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "server_overloaded") || up.Requests() == 0 {
		t.Fatalf("an answer over the budget: %d %.200s (upstream requests %d)", resp.StatusCode, b, up.Requests())
	}
	if _, refusals := obs.seen(); len(refusals) != 0 {
		t.Errorf("refusals = %q after an answer over the budget, want none: the governed call ran", refusals)
	}

	// A body that does not fit beside a held one is refused before any
	// call: that is the memory refusal.
	hup, llm, _ := hangingLLM(t)
	hobs := &observer{}
	h := serve(t, proxy.Config{Observer: hobs, MaxBodyBytes: 64 << 10, MaxBufferedBodyBytes: 100 << 10,
		Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": llm}, DefaultScope: "LLM"}})
	big := bigChat(60 << 10)
	release := hold(t, h, hup, big)
	defer release()
	if code, _, body := postRaw(t, h, "/v1/chat/completions", big, false); code != http.StatusServiceUnavailable || !strings.Contains(body, "server_overloaded") {
		t.Fatalf("a body beyond the budget: %d %.200s", code, body)
	}
	if _, refusals := hobs.seen(); !slices.Equal(refusals, []string{proxy.RefusedMemoryBudget}) {
		t.Errorf("refusals = %q after a body beyond the budget, want memory_budget", refusals)
	}
}
