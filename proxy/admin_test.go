package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/proxy"
)

const adminAuth = "Bearer admin-token-xyz"

func TestAdminDisablesAndEnablesASource(t *testing.T) {
	t.Parallel()
	primary, fallback := fake(t), fake(t)
	e := baseEnv().
		source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 2, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1")
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		AdminToken: "admin-token-xyz",
	})
	if resp, _ := f.do("POST", "/admin/sources/primary_1/disable", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("disable without the token: %d", resp.StatusCode)
	}
	resp, body := f.do("POST", "/admin/sources/primary_1/disable", "", "Authorization", adminAuth)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"enabled":false`) {
		t.Fatalf("disable: %d %s", resp.StatusCode, body)
	}
	for range 3 {
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-PolyGateway-Source") != "fallback_2" {
			t.Fatalf("while disabled: %d %v %s", resp.StatusCode, resp.Header, body)
		}
	}
	if primary.Requests() != 0 {
		t.Fatalf("the disabled source got %d requests", primary.Requests())
	}
	_, body = f.do("GET", "/v1/providers", "")
	if !strings.Contains(string(body), `"disabled":true`) {
		t.Errorf("providers do not show the switch: %s", body)
	}
	if resp, body := f.do("POST", "/admin/sources/nosuch_1/disable", "", "Authorization", adminAuth); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown source: %d %s", resp.StatusCode, body)
	}
	// A reset of every breaker leaves the switch alone.
	resp, body = f.do("POST", "/admin/breakers/reset", "", "Authorization", adminAuth)
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), `"reset":true`) != 2 {
		t.Fatalf("reset all: %d %s", resp.StatusCode, body)
	}
	f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
	if primary.Requests() != 0 {
		t.Fatal("a breaker reset switched the source back on")
	}
	if resp, body := f.do("POST", "/admin/sources/primary_1/enable?scope=LLM", "", "Authorization", adminAuth); resp.StatusCode != http.StatusOK {
		t.Fatalf("enable: %d %s", resp.StatusCode, body)
	}
	resp, _ = f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
	if resp.Header.Get("X-PolyGateway-Source") != "primary_1" || primary.Requests() != 1 {
		t.Fatalf("after enable: answered by %q, primary saw %d", resp.Header.Get("X-PolyGateway-Source"), primary.Requests())
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "source disabled by admin") || !strings.Contains(logs, "source enabled by admin") || strings.Contains(logs, "admin-token-xyz") {
		t.Errorf("admin log: %s", logs)
	}
}

func TestEveryScopeOffAnswers503Disabled(t *testing.T) {
	t.Parallel()
	up := fake(t)
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		AdminToken: "admin-token-xyz",
	})
	f.do("POST", "/admin/sources/primary_1/disable", "", "Authorization", adminAuth)
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"disabled"`) || up.Requests() != 0 {
		t.Fatalf("all off: %d %s (upstream saw %d)", resp.StatusCode, body, up.Requests())
	}
	if resp, _ := f.do("GET", "/readyz", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz with its only source off: %d", resp.StatusCode)
	}
}

// A scope that serves chat and embeddings has a chat client and an
// embeddings client whose sources share their names: the source is in one
// scope, so ?scope= names it, and a reset or a switch acts on both clients
// instead of answering 409 with advice that cannot be followed.
func TestAdminActsOnASourceOfAScopeServingChatAndEmbeddings(t *testing.T) {
	t.Parallel()
	up := fake(t)
	e := baseEnv().source("LLM", "emb", 1, up.URL(), secretEmbed, "embed-model").set("LLM__BATCH_SIZE", "2")
	ec, err := embed.FromEnv("LLM", polygateway.WithEnv(e))
	if err != nil {
		t.Fatal(err)
	}
	f := serve(t, proxy.Config{
		Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
			Embedders: map[string]proxy.Embedder{"LLM": ec}, DefaultScope: "LLM", DefaultEmbedScope: "LLM"},
		AdminToken: "admin-token-xyz",
	})
	for _, path := range []string{"/admin/breakers/emb_1/reset", "/admin/breakers/emb_1/reset?scope=LLM", "/admin/sources/emb_1/disable?scope=LLM"} {
		if resp, body := f.do("POST", path, "", "Authorization", adminAuth); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"scope":"LLM"`) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	_, body := f.do("GET", "/v1/providers", "")
	if n := strings.Count(string(body), `"disabled":true`); n != 2 {
		t.Fatalf("disabled on %d of the scope's 2 clients: %s", n, body)
	}
	if resp, body := f.do("POST", "/admin/sources/emb_1/enable", "", "Authorization", adminAuth); resp.StatusCode != http.StatusOK {
		t.Fatalf("enable: %d %s", resp.StatusCode, body)
	}
	if _, body := f.do("GET", "/v1/providers", ""); strings.Contains(string(body), `"disabled":true`) {
		t.Fatalf("still disabled after enable: %s", body)
	}
}
