package redisstore_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// cmdLog is a go-redis hook that records the name of every command sent,
// except the connection handshake (HELLO, CLIENT SETINFO, AUTH, SELECT).
type cmdLog struct {
	mu    sync.Mutex
	names []string
	// trips counts round trips: one per plain command, one per pipeline.
	trips int
}

// roundTrips returns the round trips counted so far.
func (l *cmdLog) roundTrips() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trips
}

func (l *cmdLog) trip() {
	l.mu.Lock()
	l.trips++
	l.mu.Unlock()
}

func (l *cmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *cmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.record(cmd.Name())
		if !ignored(cmd.Name()) {
			l.trip()
		}
		return next(ctx, cmd)
	}
}

func (l *cmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		counted := false
		for _, c := range cmds {
			l.record("pipeline:" + c.Name())
			if !counted && !ignored(c.Name()) {
				l.trip()
				counted = true
			}
		}
		return next(ctx, cmds)
	}
}

// ignored reports the connection-setup commands the log leaves out.
func ignored(name string) bool {
	switch strings.ToLower(name) {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

func (l *cmdLog) record(name string) {
	name = strings.ToLower(name)
	if ignored(strings.TrimPrefix(name, "pipeline:")) {
		return
	}
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
}

// take returns the commands recorded since the last take.
func (l *cmdLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.names
	l.names = nil
	return out
}

// TestOneRoundTripPerOperation counts the commands each operation sends:
// exactly one EVALSHA once the server knows the scripts (EVAL only after a
// NOSCRIPT), with all six gates in the single TryAcquire script.
func TestOneRoundTripPerOperation(t *testing.T) {
	log := &cmdLog{}
	c := newClient(t, log)
	prefix := freshPrefix(t, c)
	ctx := t.Context()
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix))
	cfg := backendtest.SuiteBreakerConfig()
	all := core.Limits{MaxConcurrency: 5, RPM: 100, TPM: 10000}
	req := core.PermitRequest{Scope: "RT", Source: "a", SourceLimits: all, GlobalLimits: all, Tokens: 10, LeaseTTL: time.Minute}

	// TryAcquire and Release are checked below (Release needs the permit).
	op := map[string]func() error{
		"Allow": func() error { _, err := b.Allow(ctx, "RT", "a", cfg); return err },
		"Record": func() error {
			_, err := b.Record(ctx, "RT", "a", core.Admission{Allowed: true, State: core.StateClosed}, core.OutcomeSuccess, cfg)
			return err
		},
		"Snapshot": func() error { _, err := b.Snapshot(ctx, "RT", "a", cfg); return err },
		"Usage":    func() error { _, err := l.Usage(ctx, "RT", "a"); return err },
		"Reset":    func() error { return b.Reset(ctx, "RT", "b", core.BreakerConfig{}) },
	}
	// Warm up: the first use of a script on a server may cost EVALSHA+EVAL.
	for round := range 2 {
		g, err := l.TryAcquire(ctx, req)
		if err != nil || !g.OK {
			t.Fatalf("TryAcquire = %+v, %v", g, err)
		}
		if got := log.take(); round == 1 && !equal(got, "evalsha") {
			t.Errorf("TryAcquire sent %v, want one evalsha", got)
		}
		if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 3}); err != nil {
			t.Fatal(err)
		}
		if got := log.take(); round == 1 && !equal(got, "evalsha") {
			t.Errorf("Release sent %v, want one evalsha", got)
		}
		for name, f := range op {
			if err := f(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := log.take(); round == 1 && !equal(got, "evalsha") {
				t.Errorf("%s sent %v, want one evalsha", name, got)
			}
		}
	}
	// A refused admission records nothing and costs nothing.
	if applied, err := b.Record(ctx, "RT", "a", core.Admission{}, core.OutcomeFailure, cfg); applied || err != nil {
		t.Fatalf("Record of a refused admission = %v, %v", applied, err)
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("Record of a refused admission sent %v, want nothing", got)
	}
}

func equal(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestServerTime checks the default time source: the server's TIME.
func TestServerTime(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	ctx := t.Context()
	srvNow, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	lim := core.Limits{MaxConcurrency: 1, RPM: 2, TPM: 200}
	req := core.PermitRequest{Scope: "TIME", Source: "a", SourceLimits: lim, GlobalLimits: lim, Tokens: 40, LeaseTTL: time.Hour}
	g, err := l.TryAcquire(ctx, req)
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	if d := g.Permit.AcquiredAt.Sub(srvNow); d < 0 || d > 5*time.Second {
		t.Fatalf("AcquiredAt %v is %v after the server's TIME %v, want within 5s", g.Permit.AcquiredAt, d, srvNow)
	}
	if r, err := l.TryAcquire(ctx, req); err != nil || r.OK || r.Gate != core.GateSourceConcurrency {
		t.Fatalf("second TryAcquire = %+v, %v; want refused by source concurrency", r, err)
	}
	if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 70}); err != nil {
		t.Fatal(err)
	}
	g2, err := l.TryAcquire(ctx, req)
	if err != nil || !g2.OK {
		t.Fatalf("TryAcquire after release = %+v, %v", g2, err)
	}
	r, err := l.TryAcquire(ctx, req)
	if err != nil || r.OK || r.Gate != core.GateSourceConcurrency {
		t.Fatalf("TryAcquire = %+v, %v; want refused by source concurrency", r, err)
	}
	if err := l.Release(ctx, g2.Permit, core.Settlement{Kind: core.SettleEstimate}); err != nil {
		t.Fatal(err)
	}
	r, err = l.TryAcquire(ctx, req)
	if err != nil || r.OK || r.Gate != core.GateSourceRPM || r.RetryAfter <= 55*time.Second || r.RetryAfter > time.Minute {
		t.Fatalf("TryAcquire = %+v, %v; want refused by source RPM for just under a minute", r, err)
	}
	u, err := l.Usage(ctx, "TIME", "")
	if err != nil || u != (core.LimiterUsage{InFlight: 0, Requests: 2, Tokens: 110}) {
		t.Fatalf("global usage = %+v, %v; want 2 requests, 110 tokens", u, err)
	}

	// The breaker's cooldown runs on the server's clock too.
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix))
	cfg := backendtest.SuiteBreakerConfig()
	cfg.Cooldown = 200 * time.Millisecond
	adm, err := b.Allow(ctx, "TIME", "a", cfg)
	if err != nil || !adm.Allowed {
		t.Fatalf("Allow = %+v, %v", adm, err)
	}
	if ok, err := b.Record(ctx, "TIME", "a", adm, core.OutcomeDead, cfg); !ok || err != nil {
		t.Fatalf("Record = %v, %v", ok, err)
	}
	s, err := b.Snapshot(ctx, "TIME", "a", cfg)
	if err != nil || s.State != core.StateOpen || s.RetryAfter <= 0 || s.RetryAfter > cfg.Cooldown {
		t.Fatalf("Snapshot = %+v, %v; want open for at most %v", s, err, cfg.Cooldown)
	}
	time.Sleep(s.RetryAfter + 10*time.Millisecond)
	adm, err = b.Allow(ctx, "TIME", "a", cfg)
	if err != nil || !adm.Probe {
		t.Fatalf("Allow after the cooldown = %+v, %v; want the probe", adm, err)
	}
}

// TestKeyLayout checks the key names, their shared hash tag and their TTLs.
func TestKeyLayout(t *testing.T) {
	cl := newClocked(t)
	c, prefix, clk, l := cl.c, cl.prefix, cl.clk, cl.l
	ctx := t.Context()
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
	lim := core.Limits{MaxConcurrency: 2, RPM: 10, TPM: 1000}
	const scope, source = "OCR:{x}", "qwen_1"
	g, err := l.TryAcquire(ctx, core.PermitRequest{Scope: scope, Source: source, SourceLimits: lim, GlobalLimits: lim, Tokens: 5, LeaseTTL: 30 * time.Second})
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	adm, err := b.Allow(ctx, scope, source, backendtest.SuiteBreakerConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Record(ctx, scope, source, adm, core.OutcomeFailure, backendtest.SuiteBreakerConfig()); err != nil {
		t.Fatal(err)
	}
	tag := "{OCR%3A%7Bx%7D}"
	// Each key must outlive what it holds (the 30 s lease, the 60 s window)
	// by the 1 s margin; its TTL runs up to 10 s more so that a busy level
	// extends it once per 10 s rather than on every grant.
	want := map[string]time.Duration{
		prefix + ":lim:" + tag + ":src:qwen_1:slots": 31 * time.Second,
		prefix + ":lim:" + tag + ":src:qwen_1:log":   61 * time.Second,
		prefix + ":lim:" + tag + ":src:qwen_1:tok":   61 * time.Second,
		prefix + ":lim:" + tag + ":global:slots":     31 * time.Second,
		prefix + ":lim:" + tag + ":global:log":       61 * time.Second,
		prefix + ":lim:" + tag + ":global:tok":       61 * time.Second,
	}
	slack := map[string]time.Duration{prefix + ":brk:" + tag + ":qwen_1": 0}
	for k := range want {
		slack[k] = 10 * time.Second
	}
	want[prefix+":brk:"+tag+":qwen_1"] = 24 * time.Hour
	var slot int64 = -1
	for k, ttl := range want {
		got, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got <= 0 || got > ttl+slack[k] || got < ttl-5*time.Second {
			t.Errorf("PTTL(%s) = %v, want %v to %v", k, got, ttl, ttl+slack[k])
		}
		s, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			// CLUSTER KEYSLOT needs cluster support on some builds; skip that check.
			continue
		}
		if slot >= 0 && s != slot {
			t.Errorf("key %s is in slot %d, the scope's other keys in %d", k, s, slot)
		}
		slot = s
	}
	if n := countKeys(t, c, prefix+":*"); n != len(want) {
		t.Errorf("%d keys under the prefix, want %d", n, len(want))
	}
	// Releasing frees the slots; each slots key keeps only its sentinel (the
	// member "" at -inf), which keeps the key and its TTL until it lapses.
	if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{prefix + ":lim:" + tag + ":src:qwen_1:slots", prefix + ":lim:" + tag + ":global:slots"} {
		members, err := c.ZRangeWithScores(ctx, k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 1 || members[0].Member != "" || !math.IsInf(members[0].Score, -1) {
			t.Errorf("%s after release = %v, want only the sentinel", k, members)
		}
	}
	for _, source := range []string{source, ""} {
		if u, err := l.Usage(ctx, scope, source); err != nil || u.InFlight != 0 {
			t.Errorf("Usage(%q) after release = %+v, %v; want no slot in flight", source, u, err)
		}
	}
}

// TestCacheForeignValues checks that values not written by the Cache, and
// a Redis failure, are told apart: the first is a miss, the second an error.
func TestCacheForeignValues(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	ctx := t.Context()
	cache := redisstore.NewCache(c, redisstore.WithPrefix(prefix))
	for _, v := range []string{"", "plain text", "pgw\x00c", "{\"content\":\"x\"}"} {
		if err := c.Set(ctx, prefix+":cache:k", v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := cache.Get(ctx, "k"); ok || got != nil || err != nil {
			t.Fatalf("Get of foreign value %q = %q, %v, %v; want a miss", v, got, ok, err)
		}
	}
	if err := cache.Set(ctx, "k", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := cache.Get(ctx, "k"); !ok || string(got) != "mine" || err != nil {
		t.Fatalf("Get = %q, %v, %v", got, ok, err)
	}
	pttl, err := c.PTTL(ctx, prefix+":cache:k").Result()
	if err != nil || pttl <= 55*time.Second || pttl > time.Minute {
		t.Fatalf("PTTL = %v, %v; want the ttl", pttl, err)
	}
	if err := cache.Set(ctx, "k", []byte("gone"), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := cache.Get(ctx, "k"); ok || err != nil {
		t.Fatalf("Get after a zero-ttl Set = %v, %v; want a miss", ok, err)
	}

	// A broken connection is an error, not a miss.
	opt, _ := redis.ParseURL(redisURL())
	opt.Addr = "127.0.0.1:1"
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	dead := redis.NewClient(opt)
	defer dead.Close()
	dc := redisstore.NewCache(dead)
	if _, ok, err := dc.Get(ctx, "k"); ok || err == nil || !strings.Contains(err.Error(), "redisstore: cache get") {
		t.Fatalf("Get on a dead Redis = %v, %v; want an error", ok, err)
	}
	if err := dc.Set(ctx, "k", []byte("v"), time.Minute); err == nil {
		t.Fatal("Set on a dead Redis succeeded")
	}
	dl := redisstore.NewLimiter(dead)
	if _, err := dl.TryAcquire(ctx, core.PermitRequest{Scope: "S", Source: "a"}); err == nil ||
		!strings.Contains(err.Error(), "polygateway: redisstore: limiter acquire: ") {
		t.Fatalf("TryAcquire on a dead Redis: %v; want a wrapped error", err)
	}
	db := redisstore.NewBreaker(dead)
	if _, err := db.Allow(ctx, "S", "a", core.BreakerConfig{}); err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("Allow on a dead Redis: %v; want an error", err)
	}
}

// TestCacheKeyOfAnotherTypeIsAMiss: a key under the cache's prefix that
// another program made a hash (or any type but a string) holds no value of
// the Cache's: a miss, not a Redis failure, and a Set replaces it.
func TestCacheKeyOfAnotherTypeIsAMiss(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	ctx := t.Context()
	cache := redisstore.NewCache(c, redisstore.WithPrefix(prefix))
	if err := c.HSet(ctx, prefix+":cache:k", "content", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := cache.Get(ctx, "k"); ok || got != nil || err != nil {
		t.Fatalf("Get of a hash = %q, %v, %v; want a miss", got, ok, err)
	}
	if err := cache.Set(ctx, "k", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := cache.Get(ctx, "k"); !ok || string(got) != "mine" || err != nil {
		t.Fatalf("Get after a Set = %q, %v, %v; want the value", got, ok, err)
	}
}

// TestLargeLogs walks logs longer than the scripts' batch of 500 members:
// the TPM RetryAfter walk and the purge of many expired entries at once.
func TestLargeLogs(t *testing.T) {
	cl := newClocked(t)
	c, prefix, clk, l, t0 := cl.c, cl.prefix, cl.clk, cl.l, clockEpoch
	ctx := t.Context()
	lim := core.Limits{TPM: 1200}
	req := core.PermitRequest{Scope: "BIG", Source: "a", SourceLimits: lim, Tokens: 1, LeaseTTL: time.Second}
	for i := range 1200 {
		clk.Set(t0.Add(time.Duration(i) * 10 * time.Millisecond))
		if g, err := l.TryAcquire(ctx, req); err != nil || !g.OK {
			t.Fatalf("grant %d = %+v, %v", i, g, err)
		}
	}
	clk.Set(t0.Add(12 * time.Second))
	req.Tokens = 600
	g, err := l.TryAcquire(ctx, req)
	if err != nil || g.OK || g.Gate != core.GateSourceTPM {
		t.Fatalf("TryAcquire = %+v, %v; want refused by source TPM", g, err)
	}
	// 600 fit once the 600th oldest entry (made at +5.99 s) has left at +65.99 s.
	if want := 53990 * time.Millisecond; g.RetryAfter != want {
		t.Fatalf("RetryAfter = %v, want %v", g.RetryAfter, want)
	}
	// At +68 s the 801 entries made up to +8 s have left.
	clk.Set(t0.Add(68 * time.Second))
	if u, err := l.Usage(ctx, "BIG", "a"); err != nil || u != (core.LimiterUsage{Requests: 399, Tokens: 399}) {
		t.Fatalf("Usage = %+v, %v; want 399 requests and tokens, no slot (leases of 1 s)", u, err)
	}
	clk.Set(t0.Add(2 * time.Minute))
	for _, source := range []string{"a", ""} {
		if u, err := l.Usage(ctx, "BIG", source); err != nil || u != (core.LimiterUsage{}) {
			t.Fatalf("Usage(%q) = %+v, %v; want empty", source, u, err)
		}
	}
	if n := countKeys(t, c, prefix+":*"); n != 0 {
		t.Fatalf("%d keys left once the window drained, want 0", n)
	}
}

// TestLeaseWithoutExpiry: a non-positive LeaseTTL holds the slot until
// Release, and its key does not expire meanwhile.
func TestLeaseWithoutExpiry(t *testing.T) {
	cl := newClocked(t)
	c, prefix, clk, l := cl.c, cl.prefix, cl.clk, cl.l
	ctx := t.Context()
	req := core.PermitRequest{Scope: "NOTTL", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}}
	g, err := l.TryAcquire(ctx, req)
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	if ttl, err := c.PTTL(ctx, prefix+":lim:{NOTTL}:src:a:slots").Result(); err != nil || ttl != -1 {
		t.Fatalf("PTTL of the slots = %v, %v; want no expiry", ttl, err)
	}
	clk.Advance(24 * time.Hour)
	if r, err := l.TryAcquire(ctx, req); err != nil || r.OK {
		t.Fatalf("TryAcquire a day later = %+v, %v; want refused", r, err)
	}
	if err := l.Release(ctx, g.Permit, core.Settlement{}); err != nil {
		t.Fatal(err)
	}
	if u, err := l.Usage(ctx, "NOTTL", "a"); err != nil || u.InFlight != 0 {
		t.Fatalf("Usage = %+v, %v; want the slot freed", u, err)
	}
}

// TestReleasedLeaseWithoutExpiryLeavesNoKeyForever: once the last slot
// without expiry of a level is released, its keys get a TTL back that
// covers the slots still held (here a 30 s lease), so that an idle scope
// leaves nothing behind.
func TestReleasedLeaseWithoutExpiryLeavesNoKeyForever(t *testing.T) {
	cl := newClocked(t)
	c, prefix, l := cl.c, cl.prefix, cl.l
	ctx := t.Context()
	two := core.Limits{MaxConcurrency: 2}
	req := core.PermitRequest{Scope: "NOTTL2", Source: "a", SourceLimits: two, GlobalLimits: two}
	g, err := l.TryAcquire(ctx, req)
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	req.LeaseTTL = 30 * time.Second
	g2, err := l.TryAcquire(ctx, req)
	if err != nil || !g2.OK {
		t.Fatalf("TryAcquire with a lease = %+v, %v", g2, err)
	}
	ttls := func(want string, lo, hi time.Duration) {
		t.Helper()
		for _, level := range []string{"src:a:", "global:"} {
			for _, k := range []string{"slots", "tok"} {
				key := prefix + ":lim:{NOTTL2}:" + level + k
				if d, err := c.PTTL(ctx, key).Result(); err != nil || d < lo || d > hi {
					t.Fatalf("PTTL(%s) %s = %v, %v; want %v to %v", key, want, d, err, lo, hi)
				}
			}
		}
	}
	ttls("while a slot without expiry is held", -1, -1)
	if err := l.Release(ctx, g.Permit, core.Settlement{}); err != nil {
		t.Fatal(err)
	}
	ttls("once it is released", 31*time.Second, 41*time.Second)
	if err := l.Release(ctx, g2.Permit, core.Settlement{}); err != nil {
		t.Fatal(err)
	}
	ttls("once every slot is released", 31*time.Second, 41*time.Second)
}

// TestExpiredLogLeavesNoTokens: with a lease longer than the window, a
// level's book (which keeps the slots' TTL mark) outlives its log. Once the
// log's TTL runs out its entries no longer count, even though the book still
// holds their tokens.
func TestExpiredLogLeavesNoTokens(t *testing.T) {
	cl := newClocked(t)
	c, prefix, clk, l, t0 := cl.c, cl.prefix, cl.clk, cl.l, clockEpoch
	ctx := t.Context()
	lim := core.Limits{MaxConcurrency: 2, RPM: 1, TPM: 1000}
	req := core.PermitRequest{Scope: "EXP", Source: "a", SourceLimits: lim, Tokens: 1000, LeaseTTL: 25 * time.Minute}
	g, err := l.TryAcquire(ctx, req)
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 1000}); err != nil {
		t.Fatal(err)
	}
	base := prefix + ":lim:{EXP}:src:a:"
	logTTL, err := c.PTTL(ctx, base+"log").Result()
	if err != nil {
		t.Fatal(err)
	}
	tokTTL, err := c.PTTL(ctx, base+"tok").Result()
	if err != nil {
		t.Fatal(err)
	}
	if logTTL > 71*time.Second || tokTTL < 25*time.Minute {
		t.Fatalf("PTTL of the log %v and of the book %v; want the book to outlive the log", logTTL, tokTTL)
	}
	// 75 s later the log's TTL has run out: Redis deleted it.
	clk.Set(t0.Add(75 * time.Second))
	if err := c.Del(ctx, base+"log").Err(); err != nil {
		t.Fatal(err)
	}
	g, err = l.TryAcquire(ctx, req)
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire after the window = %+v, %v; want granted", g, err)
	}
	if u, err := l.Usage(ctx, "EXP", "a"); err != nil || u != (core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 1000}) {
		t.Fatalf("Usage = %+v, %v; want only the new permit", u, err)
	}
}

// TestKeysFollowTheGatesThatAreOn: a level keeps slots only while its
// concurrency gate is on and a log only while its RPM or TPM gate is on; a
// permit with every gate off is stored nowhere, so its Release sends
// nothing to Redis (its acquire still asks Redis, to fail closed when Redis
// is down).
func TestKeysFollowTheGatesThatAreOn(t *testing.T) {
	log := &cmdLog{}
	c := newClient(t, log)
	prefix := freshPrefix(t, c)
	ctx := t.Context()
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	for _, tc := range []struct {
		name         string
		src, global  core.Limits
		wantSuffixes []string
	}{
		{"concurrency only", core.Limits{MaxConcurrency: 5}, core.Limits{}, []string{"src:a:slots", "src:a:tok"}},
		{"rpm only", core.Limits{RPM: 5}, core.Limits{}, []string{"src:a:log", "src:a:tok"}},
		{"global tpm", core.Limits{}, core.Limits{TPM: 1000}, []string{"global:log", "global:tok"}},
		{"none", core.Limits{}, core.Limits{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := strings.ReplaceAll(tc.name, " ", "_")
			start := log.roundTrips()
			g, err := l.TryAcquire(ctx, core.PermitRequest{Scope: scope, Source: "a", SourceLimits: tc.src, GlobalLimits: tc.global, Tokens: 10, LeaseTTL: time.Minute})
			if err != nil || !g.OK || g.Permit.Lease == 0 || g.Permit.AcquiredAt.IsZero() {
				t.Fatalf("TryAcquire = %+v, %v", g, err)
			}
			if trips := log.roundTrips() - start; trips != 1 {
				t.Errorf("TryAcquire made %d round trips, want 1", trips)
			}
			var got []string
			iter := c.Scan(ctx, 0, prefix+":lim:{"+scope+"}:*", 100).Iterator()
			for iter.Next(ctx) {
				got = append(got, strings.TrimPrefix(iter.Val(), prefix+":lim:{"+scope+"}:"))
			}
			if err := iter.Err(); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.wantSuffixes) {
				t.Errorf("keys %v, want %v", got, tc.wantSuffixes)
			}
			before := log.roundTrips()
			if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 10}); err != nil {
				t.Fatal(err)
			}
			if trips := log.roundTrips() - before; (trips == 0) != (tc.wantSuffixes == nil) {
				t.Errorf("Release made %d round trips", trips)
			}
		})
	}
}

// TestLogIsPurgedWithoutRefusals: a level whose gates never refuse still
// drops the entries that left the window (at most a second late), so its
// log and book do not grow without bound.
func TestLogIsPurgedWithoutRefusals(t *testing.T) {
	cl := newClocked(t)
	ctx := t.Context()
	lim := core.Limits{RPM: 1_000_000, TPM: 1_000_000_000}
	req := core.PermitRequest{Scope: "GROW", Source: "a", SourceLimits: lim, Tokens: 10, LeaseTTL: time.Minute}
	grant := func() {
		t.Helper()
		g, err := cl.l.TryAcquire(ctx, req)
		if err != nil || !g.OK {
			t.Fatalf("TryAcquire = %+v, %v", g, err)
		}
		if err := cl.l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 20}); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		grant()
	}
	cl.clk.Advance(70 * time.Second)
	grant()
	base := cl.prefix + ":lim:{GROW}:src:a:"
	if n, err := cl.c.ZCard(ctx, base+"log").Result(); err != nil || n != 1 {
		t.Fatalf("log holds %d entries, %v; want only the last grant's", n, err)
	}
	fields, err := cl.c.HKeys(ctx, base+"tok").Result()
	if err != nil {
		t.Fatal(err)
	}
	if entries := slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "_") }); len(entries) != 1 {
		t.Fatalf("book holds %d entries, want only the last grant's", len(entries))
	}
	if sum, err := cl.c.HGet(ctx, base+"tok", "_sum").Result(); err != nil || sum != "20" {
		t.Fatalf("book _sum = %q, %v; want the last grant's 20 tokens", sum, err)
	}
}
