package memory

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/polygateway/polygateway/backend/internal/budget"
	"github.com/polygateway/polygateway/core"
)

// BudgetError is returned by TryAcquire and Budgets for a budget that
// cannot be enforced: an empty key, a Limit that is not positive (or above
// 2^53 micro-USD), a Window that is not a whole number of seconds of at
// least one, or a (Key, Window) named twice in one request. It is a
// programming error of the caller; the request is refused and nothing is
// counted.
type BudgetError struct {
	// Key is the budget's key; Reason says what is wrong with it.
	Key, Reason string
}

// Error implements error.
func (e *BudgetError) Error() string {
	return "polygateway: memory: budget " + strconv.Quote(e.Key) + ": " + e.Reason
}

// checkBudgets returns a *BudgetError for the first budget of bs that
// cannot be enforced.
func checkBudgets(bs []core.Budget) error {
	if i, why := budget.Problem(bs); i >= 0 {
		return &BudgetError{Key: bs[i].Key, Reason: why}
	}
	return nil
}

// budgetID names one spend: a budget's key and window length. Budgets of
// one key share their spend across scopes and sources; a key checked with
// two window lengths has two spends.
type budgetID struct {
	key    string
	window time.Duration
}

// spend is one budget's current window.
type spend struct {
	start int64 // the window's start, Unix seconds
	spent int64 // micro-USD: settled costs and the reservations in flight
}

// budgetBook holds every budget's current window. Its lock is taken after
// a scope's (TryAcquire and Release hold the scope's lock around it), so
// a grant checks the gates and the budgets in one step.
//
// Budget keys are the caller's to name (a tenant's, per call), so a spend
// whose window has ended is forgotten: it counts nothing any more (a new
// window starts at 0, and settle leaves an ended window alone). The map is
// swept when a new budget would take it to sweepAt entries, which is then
// set to twice the entries left, so sweeping costs O(1) a budget added.
type budgetBook struct {
	mu      sync.Mutex
	m       map[budgetID]*spend
	sweepAt int
}

// minSweep is the size of the budget map below which it is never swept.
const minSweep = 64

// sweep drops the spends whose window ended at least a second before t
// (the margin a Redis budget key keeps): a call that read the clock just
// before the window's end still finds its spend.
func (bk *budgetBook) sweep(t time.Time) {
	now := t.Unix() - 1
	for id, sp := range bk.m {
		if now >= sp.start+max(int64(id.window/time.Second), 1) {
			delete(bk.m, id)
		}
	}
	bk.sweepAt = max(2*len(bk.m), minSweep)
}

// current returns b's spend rolled to the window holding t, or nil when
// b has none yet. Time never runs backwards for a budget: a reading older
// than the window it counts counts in that window.
func (bk *budgetBook) current(b core.Budget, t time.Time) *spend {
	sp := bk.m[budgetID{b.Key, b.Window}]
	if sp != nil {
		sp.roll(b, t)
	}
	return sp
}

// roll starts the window holding t if it is later than sp's.
func (sp *spend) roll(b core.Budget, t time.Time) {
	if ws := budget.Start(b, t); ws > sp.start {
		sp.start, sp.spent = ws, 0
	}
}

// acquire checks bs in order at t and, when every one has room for cost,
// reserves it on all and returns -1; otherwise it returns the index of
// the first without room and the time until its window ends, reserving
// nothing. Called with mu held; it allocates only for a budget's first
// use (and for a request of more than eight budgets).
func (bk *budgetBook) acquire(bs []core.Budget, cost int64, t time.Time) (int, time.Duration) {
	var buf [8]*spend
	sps := buf[:0]
	for i, b := range bs {
		id := budgetID{b.Key, b.Window}
		sp := bk.m[id]
		if sp == nil {
			if bk.m == nil {
				bk.m = make(map[budgetID]*spend)
			}
			if len(bk.m) >= max(bk.sweepAt, minSweep) {
				bk.sweep(t)
			}
			sp = &spend{start: budget.Start(b, t)}
			bk.m[id] = sp
		}
		sp.roll(b, t)
		if budget.Refuses(sp.spent, b.Limit, cost) {
			return i, time.Unix(sp.start+budget.Seconds(b), 0).Sub(t)
		}
		sps = append(sps, sp)
	}
	for _, sp := range sps {
		sp.spent += cost
	}
	return -1, 0
}

// settle settles p's reservation as s says in each of its budgets, in the
// window holding p.AcquiredAt; a window that has ended, or that a later
// one has replaced, is left alone. Called with mu held, once per permit.
func (bk *budgetBook) settle(p *core.Permit, s core.Settlement, now time.Time) {
	for _, b := range p.Budgets {
		sp := bk.m[budgetID{b.Key, b.Window}]
		if sp == nil || sp.start != budget.Start(b, p.AcquiredAt) {
			continue
		}
		if now.Unix() >= sp.start+budget.Seconds(b) {
			continue // the window has ended
		}
		sp.spent = budget.Settled(sp.spent, p.Cost, s)
	}
}

// Budgets reports the current window of each budget: the spend counted
// in it (settled costs plus the reservations of permits in flight; 0 for
// a budget nothing has been counted on yet) and its bounds. A budget's
// spend is shared by every scope that names its key, so scope and pool do
// not matter. It fails only for a budget that cannot be enforced
// (*BudgetError); ctx is not used.
func (l *Limiter) Budgets(_ context.Context, _, _ string, bs []core.Budget) ([]core.BudgetUsage, error) {
	if err := checkBudgets(bs); err != nil {
		return nil, err
	}
	now := l.clk.at(l.clk.now())
	out := make([]core.BudgetUsage, len(bs))
	l.budgets.mu.Lock()
	defer l.budgets.mu.Unlock()
	for i, b := range bs {
		u := core.BudgetUsage{Budget: b}
		start := budget.Start(b, now)
		if sp := l.budgets.current(b, now); sp != nil {
			start, u.Spent = sp.start, sp.spent
		}
		u.WindowStart = time.Unix(start, 0)
		u.WindowEnd = time.Unix(start+budget.Seconds(b), 0)
		out[i] = u
	}
	return out, nil
}
