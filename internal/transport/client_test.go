package transport

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

func TestKeyNeverInErrorsOrLogs(t *testing.T) {
	t.Parallel()
	logs := &testkit.Buffer{}
	c := newClient(t, Config{Logger: logs.TextLogger()})
	echo := "Incorrect API key provided: " + testKey + ". You can find your API key at https://platform.openai.com/account/api-keys."
	cases := []http.Handler{
		jsonResp(401, `{"error":{"message":"`+echo+`","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`),
		jsonResp(500, `<html><title>`+testKey+`</title></html>`),
		jsonResp(200, `{"error":{"message":"`+echo+`"}}`),
		sse(data(`{"error":{"message":"` + echo + `","code":"` + testKey + `"}}`)),
		sse(data(`{"choices":[{"delta":{"content":"` + testKey + `"}]}`)), // malformed, echoes the key
	}
	for i, h := range cases {
		srv := newServer(t, h)
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(i >= 3))
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if strings.Contains(err.Error(), testKey) {
			t.Fatalf("case %d: key in error: %v", i, err)
		}
	}
	if logs.Len() == 0 {
		t.Fatal("no debug logs written")
	}
	if strings.Contains(logs.String(), testKey) {
		t.Fatalf("key in logs: %s", logs.String())
	}
}

func TestConcurrentCallsReuseConnections(t *testing.T) {
	t.Parallel()
	var newConns atomic.Int64
	srv := httptest.NewUnstartedServer(jsonResp(200, `{"model":"m","choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, Config{})
	src := source(srv, "openai")
	const workers, rounds = 64, 4
	for range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				r, err := c.Do(context.Background(), src, chatCall(false))
				if err == nil && r.Content != "ok" {
					err = &core.TransientError{Message: "wrong content " + r.Content}
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	t.Logf("%d new connections", newConns.Load())
	// With a small idle pool most rounds would redial; ours keeps them.
	if n := newConns.Load(); n > workers+workers/2 {
		t.Fatalf("%d connections for %d calls in %d rounds of %d: idle pool too small", n, workers*rounds, rounds, workers)
	}
}

func TestConfigDefaultsAndCopies(t *testing.T) {
	t.Parallel()
	profiles := map[string]core.ProviderProfile{
		"MyProv": {Name: "myprov", Thinking: core.ThinkingEnableFlag, ThinkingFields: []string{core.ThinkingFieldThinkTags}},
	}
	c := New(Config{Profiles: profiles})
	defer c.Close()
	if c.cfg.MaxBodyBytes != DefaultMaxBodyBytes || c.cfg.MaxEventBytes != DefaultMaxEventBytes ||
		c.cfg.MaxRetryAfter != DefaultMaxRetryAfter || c.cfg.MaxIdleConnsPerHost != DefaultMaxIdleConnsPerHost {
		t.Fatalf("defaults not applied: %+v", c.cfg)
	}
	if p := c.Profile("myprov"); p.Thinking != core.ThinkingEnableFlag {
		t.Fatalf("custom profile not found: %+v", p)
	}
	if p := c.Profile("nobody"); p.Name != "openai" {
		t.Fatalf("fallback = %+v", p)
	}
	profiles["MyProv"].ThinkingFields[0] = "changed"
	if p := c.Profile("myprov"); p.ThinkingFields[0] != core.ThinkingFieldThinkTags {
		t.Fatal("client shares the caller's profile slices")
	}
	if len(profiles) != 1 {
		t.Fatal("caller map modified")
	}
	// Two transports: one honouring proxies, one not.
	if len(c.own) != 2 || c.own[0].Proxy == nil || c.own[1].Proxy != nil {
		t.Fatalf("transports = %+v", c.own)
	}
	if c.own[0].MaxIdleConnsPerHost < 64 {
		t.Fatal("idle pool too small for 64 concurrent calls")
	}
	if c.transportFor(&core.SourceConfig{TrustEnv: true}) != c.own[0] || c.transportFor(&core.SourceConfig{TrustEnv: false}) != c.own[1] {
		t.Fatal("TrustEnv not honoured")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v (not idempotent)", err)
	}
	// A caller's http.Client is used for every source.
	var used atomic.Int64
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	c2 := New(Config{HTTPClient: hc})
	defer c2.Close()
	srv := newServer(t, jsonResp(200, `{"choices":[{"message":{"content":"ok"}}]}`))
	for _, trust := range []bool{true, false} {
		src := source(srv, "openai")
		src.TrustEnv = trust
		if _, err := c2.Do(context.Background(), src, chatCall(false)); err != nil {
			t.Fatal(err)
		}
	}
	if used.Load() != 2 || len(c2.own) != 0 {
		t.Fatal("HTTPClient not used")
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

func TestDefaultProfilesFresh(t *testing.T) {
	t.Parallel()
	a := DefaultProfiles()
	for _, name := range []string{"openai", "azure", "deepseek", "qwen", "dashscope", "minimax", "vllm", "ollama", "moonshot", "kimi", "zhipu", "glm"} {
		p, ok := a[name]
		if !ok || p.Name != name {
			t.Fatalf("profile %q missing or misnamed: %+v", name, p)
		}
	}
	for name, want := range map[string]bool{"openai": true, "azure": true, "vllm": true, "ollama": true, "deepseek": false, "qwen": false, "minimax": false, "zhipu": false, "moonshot": false} {
		if a[name].NativeJSONSchema != want {
			t.Errorf("%s NativeJSONSchema = %v", name, !want)
		}
	}
	a["openai"].DeadCodes[0] = "mutated"
	delete(a, "qwen")
	b := DefaultProfiles()
	if b["openai"].DeadCodes[0] == "mutated" || b["qwen"].Name != "qwen" {
		t.Fatal("DefaultProfiles shares state between calls")
	}
	a["kimi"].DeadCodes[0] = "x"
	if a["moonshot"].DeadCodes[0] == "x" {
		t.Fatal("alias shares slices with its profile")
	}
	if ProfileFor(b, "GLM").Name != "glm" || ProfileFor(nil, "x").Name != "openai" || ProfileFor(b, "unknown").Name != "openai" {
		t.Fatal("ProfileFor lookup")
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4096)
	t.Run("body", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, Config{MaxBodyBytes: 1024})
		srv := newServer(t, jsonResp(200, `{"choices":[{"message":{"content":"`+big+`"}}]}`))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
		_ = asTransient(t, err) // the assertion is the check
	})
	t.Run("event", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, Config{MaxEventBytes: 1024})
		srv := newServer(t, sse(contentChunk(big), data("[DONE]")))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
		_ = asTransient(t, err) // the assertion is the check
	})
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, Config{MaxStreamBytes: 2000})
		var frames []string
		for range 50 {
			frames = append(frames, contentChunk("abcdefghij"))
		}
		srv := newServer(t, sse(append(frames, data("[DONE]"))...))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
		_ = asTransient(t, err) // the assertion is the check
	})
	t.Run("large event within default", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, Config{})
		huge := strings.Repeat("y", 3<<20)
		srv := newServer(t, sse(contentChunk(huge), data("[DONE]")))
		r, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
		if err != nil || len(r.Content) != len(huge) {
			t.Fatalf("%v", err)
		}
	})
}

func TestNilArgumentsAndBadURL(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	if _, err := c.Do(context.Background(), nil, chatCall(false)); err == nil {
		t.Fatal("nil source accepted")
	}
	if _, err := c.Do(context.Background(), &core.SourceConfig{}, nil); err == nil {
		t.Fatal("nil call accepted")
	}
	for _, base := range []string{"http://[::1", "", "localhost:8000/v1", "ftp://x/v1"} {
		_, err := c.Do(context.Background(), &core.SourceConfig{Name: "bad_1", BaseURL: base, APIKey: testKey}, chatCall(false))
		if e := asDead(t, err); e.Source != "bad_1" {
			t.Fatalf("%q: %+v", base, e)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {"你好世界", 4}, {"こんにちは", 5}, {"안녕", 2}, {"héllo", 2}, {"привет", 3},
	}
	for _, tt := range tests {
		if got := EstimateTokens(tt.in); got != tt.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	msgs := []core.Message{core.System("abcd"), core.UserParts(core.TextPart("abcd"), core.ImageURLPart("x"))}
	if got := EstimatePromptTokens(msgs); got != 4+1+4+1+imageTokens {
		t.Fatalf("EstimatePromptTokens = %d", got)
	}
}

func TestUsageEstimatedWhenAbsent(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, sse(contentChunk("abcdefgh"), data(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`), data("[DONE]")))
	call := &core.Call{Messages: []core.Message{core.User("12345678")}, Stream: true}
	r, err := c.Do(context.Background(), source(srv, "openai"), call)
	if err != nil {
		t.Fatal(err)
	}
	if r.UsageSource != core.UsageEstimated || r.PromptTokens != 4+2 || r.CompletionTokens != 2 {
		t.Fatalf("usage = %d/%d %s", r.PromptTokens, r.CompletionTokens, r.UsageSource)
	}
	if r.Latency <= 0 || r.Latency > 5*time.Second {
		t.Fatalf("latency = %v", r.Latency)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestIsEventStream(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ct         string
		asked, out bool
	}{
		{"text/event-stream", false, true},
		{"Text/Event-Stream; charset=utf-8", false, true},
		{"application/json", true, false},
		{"application/json; charset=utf-8", true, false},
		{"", true, true},
		{"", false, false},
		{"text/plain; charset=utf-8", true, true},
	} {
		if got := isEventStream(tt.ct, tt.asked); got != tt.out {
			t.Errorf("isEventStream(%q, %v) = %v", tt.ct, tt.asked, got)
		}
	}
}
