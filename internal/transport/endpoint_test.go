package transport

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// TestUnusableBaseURLIsADeadSourceWithoutARequest: a BASE_URL that is not
// an http(s) URL with a host ends the attempt as a dead source, every time
// (the parse is cached, its verdict too), and its text never carries the key.
func TestUnusableBaseURLIsADeadSourceWithoutARequest(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	for _, base := range []string{"ftp://example.test/v1", "localhost:8080/v1", "http://", "http://[::1", "/v1", "https://" + testKey + "@%zz/v1"} {
		src := &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: base, APIKey: testKey, Model: "m"}
		for range 2 {
			_, err := c.Do(t.Context(), src, &core.Call{Messages: []core.Message{core.User("hi")}})
			var dead *core.SourceDeadError
			if !errors.As(err, &dead) {
				t.Fatalf("base %q: %T %v, want *core.SourceDeadError", base, err, err)
			}
			if strings.Contains(err.Error(), testKey[8:16]) {
				t.Fatalf("base %q: the error carries the key: %v", base, err)
			}
		}
	}
}

// TestEndpointURLKeepsPathQueryAndHost: the request of every attempt goes
// to the parsed endpoint (path joined, Azure's query kept, "host:" as
// "host"), and attempts do not share one URL value.
func TestEndpointURLKeepsPathQueryAndHost(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Host + " " + r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	c := newClient(t, Config{})
	host := strings.TrimPrefix(srv.URL, "http://")
	src := &core.SourceConfig{Name: "azure_1", Provider: "azure", BaseURL: srv.URL + "/openai/v1/?api-version=2025-01-01", APIKey: testKey, Model: "m"}
	for range 3 {
		if _, err := c.Do(t.Context(), src, &core.Call{Messages: []core.Message{core.User("hi")}}); err != nil {
			t.Fatal(err)
		}
		if want := host + " /openai/v1/chat/completions?api-version=2025-01-01"; got.Load() != want {
			t.Fatalf("request went to %q, want %q", got.Load(), want)
		}
	}
	ep := c.endpointFor(src)
	if ep.u == nil || ep.err != nil {
		t.Fatalf("endpoint not parsed: %v", ep.err)
	}
	before := *ep.u
	if _, err := c.Do(t.Context(), src, &core.Call{Messages: []core.Message{core.User("hi")}}); err != nil {
		t.Fatal(err)
	}
	if *ep.u != before {
		t.Fatal("an attempt changed the cached endpoint URL")
	}
	trailing := &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: srv.URL, Model: "m"}
	if ep := c.endpointFor(&core.SourceConfig{BaseURL: "http://example.test:/v1"}); ep.u == nil || ep.u.Host != "example.test" {
		t.Fatalf("host with an empty port: %+v", ep.u)
	}
	if _, err := c.Do(t.Context(), trailing, &core.Call{Messages: []core.Message{core.User("hi")}}); err != nil {
		t.Fatal(err)
	}
}

// TestSourcesSharingAnEndpointSendTheirOwnModel: two sources with the same
// BASE_URL and key but different models each send their own model (the
// cached opening of the body is per model), escaped as encoding/json does.
func TestSourcesSharingAnEndpointSendTheirOwnModel(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		got.Store(body.Model)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	c := newClient(t, Config{})
	for range 2 {
		for _, model := range []string{"model-a", "model-b", `quoted "m" <&>` + "\u2028"} {
			src := &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: srv.URL + "/v1", APIKey: testKey, Model: model}
			if _, err := c.Do(t.Context(), src, &core.Call{Messages: []core.Message{core.User("hi")}}); err != nil {
				t.Fatal(err)
			}
			if g := got.Load(); g != model {
				t.Fatalf("sent model %q, want %q", g, model)
			}
		}
	}
}
