package proxy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/kernel"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// places records the place of every governed call it sees.
type places struct {
	mu  sync.Mutex
	got []core.Place
}

func (p *places) add(pl core.Place) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, pl)
}

// last returns the place of the last call seen.
func (p *places) last(t *testing.T) core.Place {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.got) == 0 {
		t.Fatal("no governed call was seen")
	}
	return p.got[len(p.got)-1]
}

// placedEmbedder is an embeddings client that records the place its
// callers' options give each call.
type placedEmbedder struct {
	*embed.Client
	seen *places
}

func (e placedEmbedder) Embed(ctx context.Context, texts []string, opts ...polygateway.CallOption) (*embed.Response, error) {
	e.seen.add(kernel.ResolveCall(opts).Place)
	return e.Client.Embed(ctx, texts, opts...)
}

// digestID is the digest id of a client key, as the gateway names it.
func digestID(key string) string {
	h := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(h[:6])
}

// placeFixture serves a chat scope and an embeddings scope whose calls'
// places seen records.
func placeFixture(t *testing.T, cfg proxy.Config) (*fixture, *places) {
	t.Helper()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(3)))
	emb := fake(t, fakeupstream.WithHandler("/embeddings", embeddingsHandler(t)))
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	seen := &places{}
	cfg.Backends = proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM",
		Embedders: map[string]proxy.Embedder{"EMBED": placedEmbedder{embedClient(t, emb.URL()), seen}}, DefaultEmbedScope: "EMBED",
	}
	return serveGoverned(t, cfg, func(c *core.Call) { seen.add(c.Place) }), seen
}

// governedRequests are a request of every governed endpoint.
var governedRequests = []struct{ name, path, body string }{
	{"chat", "/v1/chat/completions", chatBody("m", false, "")},
	{"chat stream", "/v1/chat/completions", chatBody("m", true, "")},
	{"responses", "/v1/responses", `{"model":"m","input":"hello"}`},
	{"responses stream", "/v1/responses", `{"model":"m","input":"hello","stream":true}`},
	{"embeddings", "/v1/embeddings", `{"model":"e","input":["a","b","c"]}`},
}

func TestThePriorityHeaderAndTheClientIdPlaceEveryGovernedCall(t *testing.T) {
	t.Parallel()
	f, seen := placeFixture(t, proxy.Config{})
	for _, rq := range governedRequests {
		for _, tc := range []struct {
			hdr  []string
			want core.Place
		}{
			{nil, core.Place{Priority: polygateway.PriorityNormal}},
			{[]string{"X-PolyGateway-Priority", "interactive"}, core.Place{Priority: polygateway.PriorityInteractive}},
			{[]string{"X-PolyGateway-Priority", "batch", "X-Client-Id", "team-a"}, core.Place{Priority: polygateway.PriorityBatch, Tenant: "team-a"}},
			{[]string{"X-PolyGateway-Priority", "normal", "X-Client-Id", "job:7"}, core.Place{Priority: polygateway.PriorityNormal, Tenant: "job:7"}},
		} {
			resp, body := f.do("POST", rq.path, rq.body, tc.hdr...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %v: %d %s", rq.name, tc.hdr, resp.StatusCode, body)
			}
			if got := seen.last(t); got != tc.want {
				t.Errorf("%s %v: the call was placed %+v, want %+v", rq.name, tc.hdr, got, tc.want)
			}
		}
	}
}

func TestAClientKeyIsTheTenantAndSetsTheDefaultPriorityTheHeaderOverrides(t *testing.T) {
	t.Parallel()
	f, seen := placeFixture(t, proxy.Config{
		ClientKeys:       []string{"key-bulk", "key-chat"},
		ClientPriorities: map[string]polygateway.Priority{digestID("key-bulk"): polygateway.PriorityBatch},
	})
	for _, rq := range governedRequests {
		for _, tc := range []struct {
			hdr  []string
			want core.Place
		}{
			{[]string{"Authorization", "Bearer key-bulk"}, core.Place{Priority: polygateway.PriorityBatch, Tenant: digestID("key-bulk")}},
			{[]string{"Authorization", "Bearer key-bulk", "X-PolyGateway-Priority", "interactive"},
				core.Place{Priority: polygateway.PriorityInteractive, Tenant: digestID("key-bulk")}},
			{[]string{"Authorization", "Bearer key-chat", "X-Client-Id", "someone-else"}, core.Place{Priority: polygateway.PriorityNormal, Tenant: digestID("key-chat")}},
		} {
			resp, body := f.do("POST", rq.path, rq.body, tc.hdr...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %v: %d %s", rq.name, tc.hdr, resp.StatusCode, body)
			}
			if got := seen.last(t); got != tc.want {
				t.Errorf("%s %v: the call was placed %+v, want %+v", rq.name, tc.hdr[2:], got, tc.want)
			}
		}
	}
}

func TestABadPriorityOrClientIdIsA400NamingTheHeaderBeforeAnyCall(t *testing.T) {
	t.Parallel()
	f, seen := placeFixture(t, proxy.Config{})
	for _, rq := range governedRequests {
		for _, tc := range []struct{ header, value string }{
			{"X-PolyGateway-Priority", "urgent"},
			{"X-PolyGateway-Priority", "Batch"},
			{"X-PolyGateway-Priority", "0"},
			{"X-Client-Id", strings.Repeat("t", 129)},
			{"X-Client-Id", "a tenant"},
		} {
			resp, body := f.do("POST", rq.path, rq.body, tc.header, tc.value)
			var e struct {
				Error struct {
					Type, Code string
					Param      *string
				}
			}
			if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadRequest ||
				e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_value" || e.Error.Param == nil || *e.Error.Param != tc.header {
				t.Errorf("%s %s %q: %d %s", rq.name, tc.header, tc.value, resp.StatusCode, body)
			}
		}
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.got) != 0 {
		t.Errorf("refused requests made %d governed calls", len(seen.got))
	}
}

func TestTheAccessLogRecordsThePriorityAndTheTenant(t *testing.T) {
	t.Parallel()
	f, _ := placeFixture(t, proxy.Config{ClientKeys: []string{"key-one"}})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""),
		"Authorization", "Bearer key-one", "X-PolyGateway-Priority", "batch", "X-Request-ID", "placed-1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	f.do("GET", "/v1/models", "", "Authorization", "Bearer key-one", "X-Request-ID", "models-1")
	lines := map[string]map[string]any{}
	for _, l := range strings.Split(f.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			lines[m["request_id"].(string)] = m
		}
	}
	if m := lines["placed-1"]; m["priority"] != "batch" || m["tenant"] != digestID("key-one") {
		t.Errorf("log line %v: want priority batch and tenant %s", m, digestID("key-one"))
	}
	if m := lines["models-1"]; m == nil || m["priority"] != nil || m["tenant"] != nil {
		t.Errorf("log line of an ungoverned request %v: want no priority or tenant", m)
	}
}

func TestClientPrioritiesMustNameConfiguredKeys(t *testing.T) {
	t.Parallel()
	up := fake(t)
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	for _, tc := range []struct {
		name string
		cfg  proxy.Config
		want string // "" = valid
	}{
		{"a key's id", proxy.Config{ClientKeys: []string{"key-a"}, ClientPriorities: map[string]polygateway.Priority{digestID("key-a"): polygateway.PriorityBatch}}, ""},
		{"no keys", proxy.Config{ClientPriorities: map[string]polygateway.Priority{digestID("key-a"): polygateway.PriorityBatch}}, "needs ClientKeys"},
		{"the key itself", proxy.Config{ClientKeys: []string{"key-a"}, ClientPriorities: map[string]polygateway.Priority{"key-a": polygateway.PriorityBatch}}, `an entry that is no digest id (not shown: it may be a key) is no client key's id`},
		{"another key's id", proxy.Config{ClientKeys: []string{"key-a"}, ClientPriorities: map[string]polygateway.Priority{digestID("key-b"): polygateway.PriorityBatch}}, strconv.Quote(digestID("key-b")) + " is no client key's id"},
		{"no priority", proxy.Config{ClientKeys: []string{"key-a"}, ClientPriorities: map[string]polygateway.Priority{digestID("key-a"): 7}}, "priority(7) is not a priority"},
	} {
		tc.cfg.Backends = proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"}
		err := proxy.Validate(tc.cfg)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), `"key-a"`) {
			t.Errorf("%s: Validate quotes the key: %v", tc.name, err)
		}
		s, err := proxy.New(tc.cfg)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: New = %v, want %q", tc.name, err, tc.want)
		}
		if s != nil {
			_ = s.Shutdown(context.Background())
		} else {
			_ = tc.cfg.Clients["LLM"].Close()
		}
	}
}
