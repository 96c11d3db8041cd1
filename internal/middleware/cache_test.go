package middleware

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// stubHandler is the inner handler of a layer under test.
type stubHandler struct {
	mu    sync.Mutex
	calls int
	resp  core.LLMResponse
	err   error
	// during runs inside the call, before it returns.
	during func()
}

// handle answers as the engine would: a call carrying a Served answer (a
// cache hit) gets it back without an attempt, which is not counted.
func (h *stubHandler) handle(_ context.Context, call *core.Call) (*core.LLMResponse, error) {
	if call.Served != nil {
		return call.Served, nil
	}
	h.mu.Lock()
	h.calls++
	resp, err, during := h.resp, h.err, h.during
	h.mu.Unlock()
	if during != nil {
		during()
	}
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

func (h *stubHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func answer() core.LLMResponse {
	cost := 0.25
	return core.LLMResponse{
		Content: "the answer", Thinking: "thoughts", Model: "m1", Provider: "prov", SourceName: "prov_1",
		PromptTokens: 100, CompletionTokens: 20, Cost: &cost, FinishReason: "stop", UsageSource: core.UsageMeasured,
		TTFT: 50 * time.Millisecond, Attempts: []string{"prov_1"},
		ToolCalls: []core.ToolCall{{Index: 0, ID: "t1", Type: "function", Name: "lookup", Arguments: `{"q":1}`}},
	}
}

func cacheConfig(c core.Cache) CacheConfig {
	return CacheConfig{Cache: c, Namespace: "ns1", TTL: time.Hour, Scope: testScope, Models: []string{"m1", "m2"}}
}

func callWithID(id string, msgs ...core.Message) *core.Call {
	if len(msgs) == 0 {
		msgs = []core.Message{core.System("be brief"), core.User("what is 2+2?")}
	}
	return &core.Call{ID: id, Scope: testScope, Messages: msgs}
}

func TestCacheHitSkipsTheInnerHandlerWithZeroUsageAndCost(t *testing.T) {
	t.Parallel()
	inner := &stubHandler{resp: answer()}
	h := core.Chain(inner.handle, Cache(cacheConfig(memory.NewCache())))
	first, err := h(context.Background(), callWithID("c1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.CacheHit || first.PromptTokens != 100 || *first.Cost != 0.25 {
		t.Errorf("miss changed the answer: %+v", first)
	}
	hit, err := h(context.Background(), callWithID("c2"))
	if err != nil {
		t.Fatal(err)
	}
	if inner.count() != 1 {
		t.Errorf("inner handler called %d times, want 1", inner.count())
	}
	want := answer()
	if !hit.CacheHit || hit.CallID != "c2" {
		t.Errorf("CacheHit=%v CallID=%q, want true and c2", hit.CacheHit, hit.CallID)
	}
	if hit.PromptTokens != 0 || hit.CompletionTokens != 0 || hit.Cost == nil || *hit.Cost != 0 {
		t.Errorf("hit usage = (%d, %d, %v), want zero tokens and a zero cost", hit.PromptTokens, hit.CompletionTokens, hit.Cost)
	}
	if hit.Content != want.Content || hit.Thinking != want.Thinking || hit.Model != want.Model ||
		hit.Provider != want.Provider || hit.SourceName != want.SourceName || hit.FinishReason != want.FinishReason ||
		!slices.Equal(hit.ToolCalls, want.ToolCalls) {
		t.Errorf("hit = %+v, want the stored answer %+v", hit, want)
	}
	if hit.TTFT != 0 || hit.MaxInterToken != 0 {
		t.Errorf("hit carries stream timings: %+v", hit)
	}
}

func TestCacheKeyDistinguishesEveryGenerationInput(t *testing.T) {
	t.Parallel()
	img := func(b ...byte) core.ContentPart { return core.ImageBytesPart("image/png", b) }
	base := func() *core.Call {
		return &core.Call{
			ID:       "c",
			Messages: []core.Message{core.System("s"), core.UserParts(core.TextPart("look"), img(1, 2, 3))},
			Params:   map[string]any{"temperature": 0.2},
		}
	}
	const prefix, ns = "pgw:v1:LLM:m1", "ns1"
	variants := map[string]struct {
		prefix, ns string
		call       *core.Call
	}{
		"base":             {prefix, ns, base()},
		"salt":             {prefix, ns, func() *core.Call { c := base(); c.CacheSalt = "v2"; return c }()},
		"call namespace":   {prefix, ns, func() *core.Call { c := base(); c.CacheNamespace = "tenant-b"; return c }()},
		"config namespace": {prefix, "ns2", base()},
		"scope":            {"pgw:v1:VLM:m1", ns, base()},
		"models":           {"pgw:v1:LLM:m1,m2", ns, base()},
		"param value":      {prefix, ns, func() *core.Call { c := base(); c.Params["temperature"] = 0.3; return c }()},
		"param added":      {prefix, ns, func() *core.Call { c := base(); c.Params["max_tokens"] = 10; return c }()},
		"no params":        {prefix, ns, func() *core.Call { c := base(); c.Params = nil; return c }()},
		"message text":     {prefix, ns, func() *core.Call { c := base(); c.Messages[0].Content = "t"; return c }()},
		"message role":     {prefix, ns, func() *core.Call { c := base(); c.Messages[0].Role = core.RoleUser; return c }()},
		"message name":     {prefix, ns, func() *core.Call { c := base(); c.Messages[0].Name = "n"; return c }()},
		"tool call id":     {prefix, ns, func() *core.Call { c := base(); c.Messages[0].ToolCallID = "x"; return c }()},
		"assistant tool call": {prefix, ns, func() *core.Call {
			c := base()
			c.Messages[0].ToolCalls = []core.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}
			return c
		}()},
		"extra message": {prefix, ns, func() *core.Call { c := base(); c.Messages = append(c.Messages, core.User("more")); return c }()},
		"part text":     {prefix, ns, func() *core.Call { c := base(); c.Messages[1].Parts[0].Text = "see"; return c }()},
		"image bytes":   {prefix, ns, func() *core.Call { c := base(); c.Messages[1].Parts[1] = img(1, 2, 4); return c }()},
		"image mime": {prefix, ns, func() *core.Call {
			c := base()
			c.Messages[1].Parts[1] = core.ImageBytesPart("image/jpeg", []byte{1, 2, 3})
			return c
		}()},
		"image detail": {prefix, ns, func() *core.Call { c := base(); c.Messages[1].Parts[1].Detail = "high"; return c }()},
		"image url": {prefix, ns, func() *core.Call {
			c := base()
			c.Messages[1].Parts[1] = core.ImageURLPart("https://x/y.png")
			return c
		}()},
		"plain vs parts":     {prefix, ns, func() *core.Call { c := base(); c.Messages[1] = core.User("look"); return c }()},
		"part order swapped": {prefix, ns, func() *core.Call { c := base(); p := c.Messages[1].Parts; p[0], p[1] = p[1], p[0]; return c }()},
	}
	seen := map[string]string{}
	for name, v := range variants {
		key := keyOf(v.prefix, v.ns, v.call)
		if other, dup := seen[key]; dup {
			t.Errorf("%q and %q share the key %s", name, other, key)
		}
		seen[key] = name
		if again := keyOf(v.prefix, v.ns, v.call); again != key {
			t.Errorf("%q: key not deterministic", name)
		}
	}
	if k := keyOf(prefix, ns, base()); !strings.HasPrefix(k, "pgw:ns1:") {
		t.Errorf("key %q does not start with its namespace", k)
	}
	if k := variants["call namespace"]; !strings.HasPrefix(keyOf(k.prefix, k.ns, k.call), "pgw:tenant-b:") {
		t.Error("a call's namespace does not override the configured one")
	}
}

func TestCacheKeyIsTheSameForTheSameInputs(t *testing.T) {
	t.Parallel()
	mk := func(order int) *core.Call {
		params := map[string]any{}
		keys := []string{"temperature", "max_tokens", "top_p"}
		vals := []any{0.5, 100, 0.9}
		for i := range keys {
			j := (i + order) % len(keys)
			params[keys[j]] = vals[j]
		}
		return &core.Call{
			ID:       "id-" + string(rune('a'+order)), // the call id is not part of the key
			Messages: []core.Message{core.UserParts(core.TextPart("x"), core.ImageBytesPart("image/png", []byte("img")))},
			Params:   params, SessionID: "s", ParentCallID: "p", Stream: order%2 == 0,
		}
	}
	want := keyOf("p", "ns", mk(0))
	for order := 1; order < 3; order++ {
		if got := keyOf("p", "ns", mk(order)); got != want {
			t.Errorf("key changed with param order / call id / stream: %s vs %s", got, want)
		}
	}
}

func TestCacheModelOrderDoesNotChangeTheKey(t *testing.T) {
	t.Parallel()
	store := memory.NewCache()
	inner := &stubHandler{resp: answer()}
	cfgA, cfgB := cacheConfig(store), cacheConfig(store)
	cfgA.Models, cfgB.Models = []string{"m1", "m2"}, []string{"m2", "m1"}
	if _, err := core.Chain(inner.handle, Cache(cfgA))(context.Background(), callWithID("c1")); err != nil {
		t.Fatal(err)
	}
	resp, err := core.Chain(inner.handle, Cache(cfgB))(context.Background(), callWithID("c2"))
	if err != nil || !resp.CacheHit {
		t.Errorf("= (%+v, %v), want a hit across model orders", resp, err)
	}
}

func TestCacheNeverStoresImageDataInKeysOrValues(t *testing.T) {
	t.Parallel()
	data := []byte(strings.Repeat("\x89PNG-secret-pixels", 20))
	b64 := base64.StdEncoding.EncodeToString(data)
	rc := newRecordingCache()
	inner := &stubHandler{resp: answer()}
	h := core.Chain(inner.handle, Cache(cacheConfig(rc)))
	call := callWithID("c1", core.UserParts(core.TextPart("what is this?"), core.ImageBytesPart("image/png", data)))
	for range 2 {
		if _, err := h(context.Background(), call); err != nil {
			t.Fatal(err)
		}
	}
	if len(rc.stored()) != 1 {
		t.Fatalf("stored %d entries, want 1", len(rc.stored()))
	}
	for _, k := range rc.keys {
		if strings.Contains(k, b64[:40]) || strings.Contains(k, "data:") {
			t.Errorf("image data in key %q", k)
		}
	}
	for k, v := range rc.stored() {
		if strings.Contains(string(v), b64[:40]) || strings.Contains(string(v), "data:image") {
			t.Errorf("image data in stored value of %q", k)
		}
	}
}

func TestCacheDoesNotStoreAnswersWithoutFinishReason(t *testing.T) {
	t.Parallel()
	rc := newRecordingCache()
	resp := answer()
	resp.FinishReason = "" // salvaged or cut
	inner := &stubHandler{resp: resp}
	h := core.Chain(inner.handle, Cache(cacheConfig(rc)))
	for i := range 2 {
		got, err := h(context.Background(), callWithID("c"))
		if err != nil || got.CacheHit || got.Content != "the answer" {
			t.Fatalf("call %d = (%+v, %v)", i, got, err)
		}
	}
	if n := len(rc.stored()); n != 0 {
		t.Errorf("stored %d incomplete answers", n)
	}
	if inner.count() != 2 {
		t.Errorf("inner called %d times, want 2", inner.count())
	}
}

func TestCacheDoesNotStoreErrors(t *testing.T) {
	t.Parallel()
	rc := newRecordingCache()
	want := testkit.InvalidErr("prov_1")
	inner := &stubHandler{err: want}
	h := core.Chain(inner.handle, Cache(cacheConfig(rc)))
	for range 2 {
		if _, err := h(context.Background(), callWithID("c")); err != want { //nolint:errorlint // the inner error must come back unchanged, not wrapped
			t.Fatalf("err = %v, want the inner error unchanged", err)
		}
	}
	if n := len(rc.stored()); n != 0 || inner.count() != 2 {
		t.Errorf("stored %d entries, inner called %d times; want 0 and 2", n, inner.count())
	}
}

func TestCacheBackendFailureDegradesToAMissAndWarnsOnce(t *testing.T) {
	t.Parallel()
	fc := &failingCache{}
	logs := &testkit.Logs{}
	cfg := cacheConfig(fc)
	cfg.Logger = slog.New(logs)
	inner := &stubHandler{resp: answer()}
	h := core.Chain(inner.handle, Cache(cfg))
	for i := range 4 {
		resp, err := h(context.Background(), callWithID("c"))
		if err != nil || resp.CacheHit || resp.Content != "the answer" {
			t.Fatalf("call %d = (%+v, %v), want the inner answer", i, resp, err)
		}
	}
	if inner.count() != 4 || fc.gets != 4 || fc.sets != 4 {
		t.Errorf("inner %d, gets %d, sets %d; want 4 each", inner.count(), fc.gets, fc.sets)
	}
	if n := logs.Count(); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}
}

func TestCacheBackendFailureOnACancelledCallReturnsTheCancellation(t *testing.T) {
	t.Parallel()
	inner := &stubHandler{resp: answer()}
	h := core.Chain(inner.handle, Cache(cacheConfig(&failingCache{})))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h(ctx, callWithID("c"))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, core.ErrGateway) {
		t.Errorf("err = %v, want a cancellation", err)
	}
	if inner.count() != 0 {
		t.Errorf("inner called %d times", inner.count())
	}
}

func TestCacheCorruptOrForeignEntriesReadAsAMiss(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"not JSON":         "\x00garbage",
		"truncated":        `{"v":1,"content":"x`,
		"other version":    `{"v":2,"content":"x","finish_reason":"stop"}`,
		"no version":       `{"content":"x","finish_reason":"stop"}`,
		"wrong field type": `{"v":"1","content":"x"}`,
		"array":            `[1,2,3]`,
		"empty":            ``,
	}
	for name, value := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rc := newRecordingCache()
			inner := &stubHandler{resp: answer()}
			h := core.Chain(inner.handle, Cache(cacheConfig(rc)))
			if _, err := h(context.Background(), callWithID("c")); err != nil {
				t.Fatal(err)
			}
			keys := slices.Collect(maps.Keys(rc.stored()))
			if len(keys) != 1 {
				t.Fatalf("stored %d entries", len(keys))
			}
			if err := rc.inner.Set(context.Background(), keys[0], []byte(value), time.Hour); err != nil {
				t.Fatal(err)
			}
			resp, err := h(context.Background(), callWithID("c"))
			if err != nil || resp.CacheHit || inner.count() != 2 {
				t.Errorf("= (%+v, %v) after %d inner calls, want a miss", resp, err, inner.count())
			}
			// The miss stored a good entry again.
			if resp, err := h(context.Background(), callWithID("c")); err != nil || !resp.CacheHit {
				t.Errorf("after the repair = (%+v, %v), want a hit", resp, err)
			}
		})
	}
}

func TestCacheEntriesExpireAfterTheirTTL(t *testing.T) {
	t.Parallel()
	clk := backendtest.NewFakeClock(testkit.Epoch)
	cfg := cacheConfig(memory.NewCache(memory.WithClock(clk)))
	cfg.TTL = time.Minute
	inner := &stubHandler{resp: answer()}
	h := core.Chain(inner.handle, Cache(cfg))
	for range 2 {
		if _, err := h(context.Background(), callWithID("c")); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(2 * time.Minute)
	resp, err := h(context.Background(), callWithID("c"))
	if err != nil || resp.CacheHit || inner.count() != 2 {
		t.Errorf("= (%+v, %v) after %d inner calls, want an expired miss", resp, err, inner.count())
	}
}

func TestCacheHitsAreRecorded(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	clk := backendtest.NewFakeClock(testkit.Epoch)
	cfg := cacheConfig(memory.NewCache())
	cfg.Clock = clk
	inner := &stubHandler{resp: answer()}
	h := core.Chain(inner.handle, Cache(cfg), Telemetry(TelemetryConfig{Sink: sink, Scope: testScope, Clock: clk}))
	call := callWithID("c1")
	call.SessionID, call.ParentCallID = "sess", "parent"
	if _, err := h(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	call2 := callWithID("c2")
	call2.SessionID = "sess"
	if _, err := h(context.Background(), call2); err != nil {
		t.Fatal(err)
	}
	recs := sink.records()
	if len(recs) != 2 {
		t.Fatalf("%d records for a miss and a hit, want 2", len(recs))
	}
	miss, hit := recs[0], recs[1]
	if miss.CacheHit || miss.CallID != "c1" || miss.PromptTokens != 100 || miss.ParentCallID != "parent" {
		t.Errorf("miss record = %+v", miss)
	}
	if !hit.CacheHit || hit.CallID != "c2" || hit.SessionID != "sess" || hit.PromptTokens != 0 ||
		hit.Cost == nil || *hit.Cost != 0 || hit.Response != "the answer" || hit.Error != "" || hit.Scope != testScope {
		t.Errorf("hit record = %+v", hit)
	}
}

// keyOf returns the cache key of a call that must be cacheable.
func keyOf(prefix, ns string, call *core.Call) string {
	k, ok := cacheKey(prefix, ns, call)
	if !ok {
		panic("call unexpectedly uncacheable")
	}
	return k
}

func TestCallsWithUnencodableParamsBypassTheCache(t *testing.T) {
	t.Parallel()
	call := &core.Call{Messages: []core.Message{core.User("x")}, Params: map[string]any{"f": func() {}}}
	if _, ok := cacheKey("p", "ns", call); ok {
		t.Fatal("a call whose params cannot be encoded got a cache key")
	}
}

func TestCacheEntryRoundTripsAndRejectsTruncatedValues(t *testing.T) {
	t.Parallel()
	in := cacheEntry{Content: "answer ✓", Thinking: "hmm", Model: "m", Provider: "p", SourceName: "p_1", FinishReason: "tool_calls",
		ToolCalls: []core.ToolCall{{Index: 0, ID: "c1", Type: "function", Name: "f", Arguments: `{"a":1}`}}}
	b, err := in.encode()
	if err != nil {
		t.Fatal(err)
	}
	var out cacheEntry
	if !out.decode(b) || out.Content != in.Content || out.FinishReason != in.FinishReason || len(out.ToolCalls) != 1 || out.ToolCalls[0] != in.ToolCalls[0] {
		t.Fatalf("round trip: %+v", out)
	}
	for cut := 0; cut < len(b); cut++ {
		var e cacheEntry
		if e.decode(b[:cut]) {
			t.Fatalf("a value truncated to %d of %d bytes decoded", cut, len(b))
		}
	}
	if (&cacheEntry{}).decode(append(b, 'x')) {
		t.Fatal("a value with trailing bytes decoded")
	}
}

// TestCacheKeyCoversUntypedImageParts: a part without a Type but with an
// ImageURL goes upstream as an image (see the transport's setPart), so the
// image belongs in the key: two such calls with other images must not
// share an entry.
func TestCacheKeyCoversUntypedImageParts(t *testing.T) {
	t.Parallel()
	untyped := func(data string) *core.Call {
		return &core.Call{ID: "c", Messages: []core.Message{{Role: core.RoleUser, Parts: []core.ContentPart{
			core.TextPart("what is this?"),
			{ImageURL: "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte(data))},
		}}}}
	}
	a, b := keyOf("p", "ns", untyped("cat")), keyOf("p", "ns", untyped("dog"))
	if a == b {
		t.Errorf("calls with other untyped images share the key %s", a)
	}
	text := &core.Call{ID: "c", Messages: []core.Message{core.UserParts(core.TextPart("what is this?"), core.ContentPart{})}}
	if keyOf("p", "ns", text) == a {
		t.Error("an untyped image part has the key of an empty part")
	}
}

// laggingCache is a core.Cache that keeps its values longer than asked (a
// shared store whose clock runs behind this process's, or that rounds TTLs
// up): a value past its TTL on the cache layer's clock may still be read.
type laggingCache struct {
	mu     sync.Mutex
	values map[string][]byte
}

func (c *laggingCache) Get(_ context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.values[key]
	return slices.Clone(v), ok, nil
}

func (c *laggingCache) Set(_ context.Context, key string, value []byte, _ time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values[key] = slices.Clone(value)
	return nil
}

// TestCacheServesNoStaleAnswerOutsideItsStaleWindow: an entry read past its
// TTL plus the stale window (0 = off) is no stale answer, even when the
// backend still holds it; a failed call then fails.
func TestCacheServesNoStaleAnswerOutsideItsStaleWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		stale   time.Duration
		advance time.Duration
		served  bool
	}{
		{"stale off", 0, 2 * time.Minute, false},
		{"past the window", time.Minute, 3 * time.Minute, false},
		{"inside the window", time.Minute, 90 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := backendtest.NewFakeClock(testkit.Epoch)
			cfg := cacheConfig(&laggingCache{values: map[string][]byte{}})
			cfg.TTL, cfg.Stale, cfg.Clock = time.Minute, tc.stale, clk
			inner := &stubHandler{resp: answer()}
			h := core.Chain(inner.handle, Cache(cfg), Degrade(DegradeConfig{}))
			if _, err := h(context.Background(), callWithID("c1")); err != nil {
				t.Fatal(err)
			}
			down := testkit.TransientErr("prov_1")
			inner.mu.Lock()
			inner.err = down
			inner.mu.Unlock()
			clk.Advance(tc.advance)
			resp, err := h(context.Background(), callWithID("c2"))
			if tc.served {
				if err != nil || resp.DegradedBy != core.DegradedStaleCache {
					t.Errorf("= (%+v, %v), want the stale answer", resp, err)
				}
				return
			}
			if err != down || resp != nil { //nolint:errorlint // the inner error must come back unchanged
				t.Errorf("= (%+v, %v), want the failure: the entry is past its stale window", resp, err)
			}
		})
	}
}
