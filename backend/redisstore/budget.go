package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/internal/budget"
	"github.com/polygateway/polygateway/core"
)

// BudgetError is returned by TryAcquire, Admit (wrapped in a
// core.GovernanceBackendError) and Budgets for a budget that cannot be
// enforced: an empty key, a Limit that is not positive (or above 2^53
// micro-USD), a Window that is not a whole number of seconds of at least
// one, or a (Key, Window) named twice in one request. It is a programming
// error of the caller; the request is refused before any round trip and
// nothing is counted.
type BudgetError struct {
	// Key is the budget's key; Reason says what is wrong with it.
	Key, Reason string
}

// Error implements error.
func (e *BudgetError) Error() string {
	return "polygateway: redisstore: budget " + strconv.Quote(e.Key) + ": " + e.Reason
}

// checkBudgets returns a *BudgetError for the first budget of bs that
// cannot be enforced.
func checkBudgets(bs []core.Budget) error {
	if i, why := budget.Problem(bs); i >= 0 {
		return &BudgetError{Key: bs[i].Key, Reason: why}
	}
	return nil
}

// tagsBudgets reports whether budget keys carry a scope's (or pool's) hash
// tag on c: on anything but a single node or a Sentinel-managed one (a
// *redis.Client), that is on a Redis Cluster client or a client of the
// caller's own type, where every key of a script must share one slot.
// Hash tags work on a single node too, so a client of unknown type only
// shares budgets less.
func tagsBudgets(c redis.UniversalClient) bool {
	_, node := c.(*redis.Client)
	return !node
}

// budgetKeyName returns the key of b's spend (see keys.go):
//
//	{prefix}:bud:{key}:{window s}                  one node, Sentinel
//	{prefix}:lim:{SCOPE}:bud:{key}:{window s}      a cluster, a scope without a pool
//	{prefix}:pool:{POOL}:bud:{key}:{window s}      a cluster, a scope in a pool
func budgetKeyName(prefix string, tagged bool, scope, pool string, b core.Budget) string {
	tail := ":bud:" + escape(b.Key) + ":" + strconv.FormatInt(budget.Seconds(b), 10)
	switch {
	case !tagged:
		return prefix + tail
	case pool == "":
		return prefix + ":lim:" + hashTag(scope) + tail
	}
	return prefix + ":pool:" + hashTag(pool) + tail
}

// budgetID names one spend: a budget's key and window length.
type budgetID struct {
	key    string
	window time.Duration
}

// budgetKeyID names one budget key for one (scope, pool); scope and pool
// are "" where keys carry no tag.
type budgetKeyID struct {
	budgetID
	scope, pool string
}

// budgetKey returns the key of b's spend for a script of scope in pool.
func (l *Limiter) budgetKey(scope, pool string, b core.Budget) string {
	id := budgetKeyID{budgetID: budgetID{b.Key, b.Window}}
	if l.tagged {
		id.scope, id.pool = scope, pool
	}
	return l.budgetKeys.get(id, func() string {
		return budgetKeyName(l.opt.prefix, l.tagged, scope, pool, b)
	})
}

// withBudgets returns a new slice of base's keys followed by the keys of
// bs for scope in pool; a script names budget i's key as len(base)+i+1.
func (l *Limiter) withBudgets(base []string, scope, pool string, bs []core.Budget) []string {
	keys := make([]string, len(base), len(base)+len(bs))
	copy(keys, base)
	for _, b := range bs {
		keys = append(keys, l.budgetKey(scope, pool, b))
	}
	return keys
}

// writeBudgets writes the budget fields of an acquire (limit set) or a
// release request (see lua/lib/budget.lua): the budgets' keys from
// base+1, the permit's member on them and the cost.
func writeBudgets(w *request, bs []core.Budget, sk *scriptKeys, lease uint64, cost, base int64, acquire bool) {
	w.int("cost", cost)
	w.str("bmember", sk.budgetMember(lease))
	if acquire {
		w.int("bgate", int64(core.GateBudget))
	}
	w.array("budgets")
	for i, b := range bs {
		w.open()
		w.int("key", base+int64(i)+1)
		if acquire {
			w.int("limit", b.Limit)
		}
		w.int("window", budget.Seconds(b))
		w.close()
	}
	w.end()
}

// Budgets reports the current window of each budget as scope (in pool,
// "" = none) counts it, in one round trip: the spend counted in it
// (settled costs plus the reservations of calls in flight; 0 for a budget
// nothing has been counted on yet) and its bounds, by the server's clock.
// On a single node or Sentinel a budget's spend is shared by every scope,
// and scope and pool do not matter; on a Redis Cluster it is counted per
// scope (per pool), and Budgets reads that scope's (pool's) spend. It
// fails for a budget that cannot be enforced (*BudgetError) and when Redis
// fails.
func (l *Limiter) Budgets(ctx context.Context, scope, pool string, bs []core.Budget) ([]core.BudgetUsage, error) {
	if err := checkBudgets(bs); err != nil {
		return nil, err
	}
	out := make([]core.BudgetUsage, len(bs))
	if len(bs) == 0 {
		return out, nil
	}
	return out, l.readBudgets(ctx, scope, pool, bs, out)
}

// readBudgets reads bs as scope in pool counts them into out, in one script.
func (l *Limiter) readBudgets(ctx context.Context, scope, pool string, bs []core.Budget, out []core.BudgetUsage) error {
	keys := l.withBudgets(nil, scope, pool, bs)
	w := newRequest()
	w.open()
	w.now(&l.opt)
	w.array("windows")
	for _, b := range bs {
		w.elem(budget.Seconds(b))
	}
	w.end()
	w.close()
	res, err := budgetsScript.Run(ctx, l.c, keys, w.String()).Int64Slice()
	if err != nil {
		return fmt.Errorf("polygateway: redisstore: limiter budgets: %w", err)
	}
	if len(res) != 1+2*len(bs) {
		return fmt.Errorf("polygateway: redisstore: limiter budgets: unexpected reply %v", res)
	}
	for i, b := range bs {
		start := res[1+2*i]
		out[i] = core.BudgetUsage{
			Budget:      b,
			Spent:       res[2+2*i],
			WindowStart: time.Unix(start, 0),
			WindowEnd:   time.Unix(start+budget.Seconds(b), 0),
		}
	}
	return nil
}
