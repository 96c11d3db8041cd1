package redisstore

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/core"
)

func TestKeyCacheIsBoundedAndShared(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil, WithPrefix("p"))
	first := l.scriptKeys("S", "a:b", "")
	if again := l.scriptKeys("S", "a:b", ""); again != first {
		t.Fatal("the keys of one (scope, source) were built twice")
	}
	want := []string{"p:lim:{S}:src:a%3Ab:slots", "p:lim:{S}:src:a%3Ab:log", "p:lim:{S}:src:a%3Ab:tok",
		"p:lim:{S}:global:slots", "p:lim:{S}:global:log", "p:lim:{S}:global:tok", "p:brk:{S}:a%3Ab"}
	for i, k := range want {
		if first.keys[i] != k {
			t.Errorf("key %d = %q, want %q", i, first.keys[i], k)
		}
	}
	if m, g := first.member(42, levelSource), first.member(42, levelGlobal); m != "42" || g != "42/a%3Ab" {
		t.Errorf("members = %q, %q", m, g)
	}
	for i := range maxCachedKeys + 100 {
		l.scriptKeys("S"+strconv.Itoa(i), "a", "")
	}
	if n := len(l.keys.m); n != maxCachedKeys {
		t.Errorf("%d cached key sets, want the bound %d", n, maxCachedKeys)
	}
	// Past the bound keys are still right, only not kept.
	if sk := l.scriptKeys("late", "z", ""); sk.keys[0] != "p:lim:{late}:src:z:slots" {
		t.Errorf("keys past the bound = %v", sk.keys)
	}
}

// TestPooledKeysShareThePoolsTag: every key of a pooled scope, its circuit
// included, carries the pool's hash tag, and the names of scope and source
// stay apart from another scope's.
func TestPooledKeysShareThePoolsTag(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil, WithPrefix("p"))
	sk := l.scriptKeys("S:1", "a", "P{x}")
	want := []string{"p:pool:{P%7Bx%7D}:src:S%3A1:a:slots", "p:pool:{P%7Bx%7D}:src:S%3A1:a:log", "p:pool:{P%7Bx%7D}:src:S%3A1:a:tok",
		"p:pool:{P%7Bx%7D}:global:slots", "p:pool:{P%7Bx%7D}:global:log", "p:pool:{P%7Bx%7D}:global:tok",
		"p:pool:{P%7Bx%7D}:brk:S%3A1:a"}
	for i, k := range want {
		if sk.keys[i] != k {
			t.Errorf("key %d = %q, want %q", i, sk.keys[i], k)
		}
	}
	if g := sk.member(7, levelGlobal); g != "7/S%3A1:a" {
		t.Errorf("global member = %q", g)
	}
	if k := usageKeys("p", "S:1", "", "P{x}"); k[0] != want[3] {
		t.Errorf("usage keys of the pool's global gates = %v", k)
	}
}

// TestAcquireRequestNamesEveryGate: the acquire request is JSON with one
// record per gate that is on, each naming its kind, level, limit, window
// and amount, and the levels the lease's low bits name.
func TestAcquireRequestNamesEveryGate(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil)
	req := core.PermitRequest{Scope: "S", Source: "we\"ird\n", SourceLimits: core.Limits{MaxConcurrency: 2, TPM: 1000},
		GlobalLimits: core.Limits{RPM: 5}, Tokens: 30, LeaseTTL: 65 * time.Second, Pool: "P"}
	lease := newLease(&req)
	if lease&leaseLevels != slotsBit(levelSource)|logBit(levelSource)|logBit(levelGlobal) || lease&leasePooled == 0 {
		t.Fatalf("lease bits %b", lease&leaseMeta)
	}
	if end, ok := leaseEnd(lease, time.Unix(0, 0)); !ok || end.Sub(time.Unix(0, 0)) < 65*time.Second || end.Sub(time.Unix(0, 0)) > 130*time.Second {
		t.Fatalf("lease end bound %v, %v", end, ok)
	}
	w := newRequest()
	w.open()
	l.writeAcquire(w, &req, l.scriptKeys("S", req.Source, "P"), lease, circuitIndex-1)
	w.close()
	var got struct {
		LeaseTTL int64 `json:"lease_ttl"`
		Levels   []struct {
			Key    int
			Member string
		}
		Gates []struct {
			Gate                         int
			Kind                         string
			Level, Limit, Window, Amount int64
		}
	}
	if err := json.Unmarshal([]byte(w.String()), &got); err != nil {
		t.Fatalf("%s: %v", w.String(), err)
	}
	if got.LeaseTTL != 65_000_000 || len(got.Levels) != 2 || got.Levels[0].Key != 1 || got.Levels[1].Key != 4 ||
		got.Levels[1].Member != strconv.FormatUint(lease, 10)+"/S:we\"ird\n" {
		t.Fatalf("request %s", w.String())
	}
	type g = struct {
		Gate                         int
		Kind                         string
		Level, Limit, Window, Amount int64
	}
	want := []g{
		{int(core.GateSourceConcurrency), "conc", 1, 2, 0, 0},
		{int(core.GateSourceTPM), "sum", 1, 1000, 60_000_000, 30},
		{int(core.GateGlobalRPM), "rate", 2, 5, 60_000_000, 0},
	}
	if len(got.Gates) != len(want) {
		t.Fatalf("gates %+v", got.Gates)
	}
	for i := range want {
		if got.Gates[i] != want[i] {
			t.Errorf("gate %d = %+v, want %+v", i, got.Gates[i], want[i])
		}
	}
}

func TestBackoffDoublesToItsCap(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{1: 50 * time.Millisecond, 2: 100 * time.Millisecond, 5: 800 * time.Millisecond, 7: 2 * time.Second, 50: 2 * time.Second} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestBudgetKeyShapes: a budget's key names its (escaped) key and window
// length; on a cluster it carries the scope's hash tag, or the pool's, so
// that it lies in the slot of the scope's other keys.
func TestBudgetKeyShapes(t *testing.T) {
	t.Parallel()
	b := core.Budget{Key: "client:{t}%", Limit: 1, Window: 24 * time.Hour}
	cases := []struct {
		tagged      bool
		scope, pool string
		want        string
	}{
		{false, "S:1", "", "p:bud:client%3A%7Bt%7D%25:86400"},
		{false, "S:1", "P", "p:bud:client%3A%7Bt%7D%25:86400"},
		{true, "S:1", "", "p:lim:{S%3A1}:bud:client%3A%7Bt%7D%25:86400"},
		{true, "S:1", "P{x}", "p:pool:{P%7Bx%7D}:bud:client%3A%7Bt%7D%25:86400"},
		{true, "", "", "p:lim:{%}:bud:client%3A%7Bt%7D%25:86400"},
	}
	for _, tc := range cases {
		if got := budgetKeyName("p", tc.tagged, tc.scope, tc.pool, b); got != tc.want {
			t.Errorf("budgetKeyName(tagged %v, %q, %q) = %q, want %q", tc.tagged, tc.scope, tc.pool, got, tc.want)
		}
		l := NewLimiter(nil, WithPrefix("p"))
		l.tagged = tc.tagged
		keys := l.withBudgets(l.scriptKeys(tc.scope, "a", tc.pool).keys, tc.scope, tc.pool, []core.Budget{b})
		if keys[len(keys)-1] != tc.want || keys[circuitIndex-1] != l.scriptKeys(tc.scope, "a", tc.pool).keys[circuitIndex-1] {
			t.Errorf("script keys %v", keys)
		}
		if tc.tagged {
			base := l.scriptKeys(tc.scope, "a", tc.pool).keys[0]
			if tag(keys[len(keys)-1]) != tag(base) {
				t.Errorf("the budget key %s and the scope's key %s carry other hash tags", keys[len(keys)-1], base)
			}
		}
	}
	if cached := NewLimiter(nil, WithPrefix("p")); cached.budgetKey("S", "", b) != cached.budgetKey("S", "", b) { //nolint:staticcheck // the same call twice: the key is cached and must not change
		t.Error("budget keys differ between two calls")
	}
	// The client's type decides: one node and Sentinel's failover client
	// share budgets across scopes, a cluster client (or another) counts
	// per scope.
	node, cluster := redis.NewClient(&redis.Options{}), redis.NewClusterClient(&redis.ClusterOptions{})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer node.Close()
	defer cluster.Close()
	defer failover.Close()
	for c, want := range map[redis.UniversalClient]bool{node: false, failover: false, cluster: true} {
		if got := NewLimiter(c).tagged; got != want {
			t.Errorf("%T: tagged = %v, want %v", c, got, want)
		}
	}
}

// tag returns the hash tag of key (what Redis Cluster hashes).
func tag(key string) string {
	i := strings.IndexByte(key, '{')
	j := strings.IndexByte(key[i+1:], '}')
	return key[i+1 : i+1+j]
}

// TestBudgetRequests: acquire and release requests name the budgets'
// keys after the script's other keys, the member, the cost (clamped) and
// each limit and window; the refusing budget's index maps to its key.
func TestBudgetRequests(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil)
	bs := []core.Budget{{Key: "a", Limit: 500, Window: time.Minute}, {Key: "b", Limit: 9, Window: 24 * time.Hour}}
	req := core.PermitRequest{Scope: "S", Source: "x:y", Budgets: bs, Cost: -4}
	sk := l.scriptKeys("S", "x:y", "")
	w := newRequest()
	w.open()
	l.writeAcquire(w, &req, sk, 77, circuitIndex)
	w.close()
	type budgetReq struct{ Key, Limit, Window int64 }
	var got struct {
		Cost    int64
		Bmember string
		Bgate   int
		Budgets []budgetReq
	}
	if err := json.Unmarshal([]byte(w.String()), &got); err != nil {
		t.Fatalf("%s: %v", w.String(), err)
	}
	want := []budgetReq{{circuitIndex + 1, 500, 60}, {circuitIndex + 2, 9, 86400}}
	if got.Cost != 0 || got.Bmember != "77/S:x%3Ay" || got.Bgate != int(core.GateBudget) || len(got.Budgets) != 2 ||
		got.Budgets[0] != want[0] || got.Budgets[1] != want[1] {
		t.Fatalf("acquire request %s", w.String())
	}
	w = newRequest()
	w.open()
	l.writeRelease(w, core.Permit{Scope: "S", Source: "x:y", Lease: 77, Budgets: bs}, core.Settlement{Kind: core.SettleActual, Cost: 1 << 60}, sk, false, 6)
	w.close()
	got.Budgets = nil
	if err := json.Unmarshal([]byte(w.String()), &got); err != nil {
		t.Fatalf("%s: %v", w.String(), err)
	}
	if got.Cost != 1<<53 || got.Budgets[0] != (budgetReq{7, 0, 60}) || got.Budgets[1] != (budgetReq{8, 0, 86400}) {
		t.Fatalf("release request %s", w.String())
	}
	g, err := l.grant([]int64{0, int64(core.GateBudget), 5_000_000, 1, 2}, &req, 77, "test")
	if err != nil || g.Gate != core.GateBudget || g.Budget != "b" || g.RetryAfter != 5*time.Second {
		t.Fatalf("grant = %+v, %v", g, err)
	}
	if _, err := l.grant([]int64{0, int64(core.GateBudget), 0, 1, 3}, &req, 77, "test"); err == nil {
		t.Fatal("a reply naming a budget the request does not have was taken")
	}
}
