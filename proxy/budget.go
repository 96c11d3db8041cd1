package proxy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/internal/kernel"
)

// ClientBudget is the spend budget of every client key: each key may spend
// at most USD per Window across every scope it calls. It needs ClientKeys
// (an X-Client-Id is the client's own claim, and a budget on it could be
// dodged by claiming another). A key's spend is counted under the budget
// key "client:key-" and the first 12 hex digits of the key's SHA-256, so
// that every gateway sharing a backend (Redis) counts one spend per key,
// and reordering PGW_CLIENT_KEYS moves no spend. The zero value is off.
type ClientBudget struct {
	// USD is the spend allowed per window (0 = no client budgets; at most
	// 9e9, the most a limiter keeps).
	USD float64
	// Window is the budget's window, fixed and aligned to the Unix epoch
	// (default 24 h; at least 1 s, whole seconds).
	Window time.Duration
}

// defaultClientBudgetWindow is a client budget's window when unset.
const defaultClientBudgetWindow = 24 * time.Hour

// keyBudgets returns the budget of each client key (nil when off).
func (c *Config) keyBudgets(hashes [][sha256.Size]byte) ([]core.Budget, error) {
	b := c.ClientBudget
	if b.USD == 0 {
		return nil, nil
	}
	if math.IsNaN(b.USD) || b.USD < 0 || b.USD > config.MaxBudgetUSD {
		return nil, fmt.Errorf("proxy: ClientBudget.USD %v: want a positive amount, at most %g", b.USD, float64(config.MaxBudgetUSD))
	}
	if len(hashes) == 0 {
		return nil, errors.New("proxy: ClientBudget needs ClientKeys: without them a client's id is its own claim")
	}
	window := b.Window
	if window == 0 {
		window = defaultClientBudgetWindow
	}
	if window < time.Second || window%time.Second != 0 {
		return nil, fmt.Errorf("proxy: ClientBudget.Window %v: want whole seconds, at least 1", window)
	}
	limit := int64(math.Round(b.USD * 1e6))
	if limit <= 0 {
		return nil, fmt.Errorf("proxy: ClientBudget.USD %v: below one micro-USD", b.USD)
	}
	out := make([]core.Budget, len(hashes))
	for i, h := range hashes {
		out[i] = core.Budget{Key: clientBudgetKey(h), Limit: limit, Window: window}
	}
	return out, nil
}

// clientBudgetKey names the spend of the key whose digest is h.
func clientBudgetKey(h [sha256.Size]byte) string { return "client:" + keyID(h) }

// clientBudget returns the budget of the request's client key, or false.
func (s *Server) clientBudget(ri *reqInfo) (core.Budget, bool) {
	if ri.key <= 0 || ri.key > len(s.keyBudgets) {
		return core.Budget{}, false
	}
	return s.keyBudgets[ri.key-1], true
}

// callBudgets is the Call.Budgets of a request: its client key's budget.
func (s *Server) callBudgets(ri *reqInfo) []core.Budget {
	if b, ok := s.clientBudget(ri); ok {
		return []core.Budget{b}
	}
	return nil
}

// budgetOptions is the call option of a request's client budget.
func (s *Server) budgetOptions(ri *reqInfo) []polygateway.CallOption {
	if b, ok := s.clientBudget(ri); ok {
		return []polygateway.CallOption{polygateway.WithBudget(b)}
	}
	return nil
}

// checkBudgets refuses a generation whose chat scopes cannot keep the
// client budgets (a limiter without budgets, an unpriced source).
func (s *Server) checkBudgets(b *Backends) error { return checkBudgets(s.keyBudgets, b) }

// checkBudgets refuses chat scopes that cannot keep budgets, naming every
// one of them.
func checkBudgets(budgets []core.Budget, b *Backends) error {
	if len(budgets) == 0 {
		return nil
	}
	var errs []error
	for _, scope := range slices.Sorted(maps.Keys(b.Clients)) {
		k, err := kernel.Unwrap(b.Clients[scope])
		if err != nil {
			continue // validate refuses nil clients
		}
		if err := k.CanBudget(); err != nil {
			var ce *polygateway.ConfigError
			if errors.As(err, &ce) {
				err = errors.New(ce.Problem)
			}
			errs = append(errs, fmt.Errorf("proxy: client budgets: scope %s: %w", scope, err))
		}
	}
	return errors.Join(errs...)
}

// ClientBudgets reads the current window of every client key's budget
// (nil without client budgets), through the first chat scope's limiter:
// every client of a gateway shares its limiter backend. For a metrics
// collector's WatchBudgets.
func (s *Server) ClientBudgets(ctx context.Context) ([]polygateway.BudgetUsage, error) {
	if len(s.keyBudgets) == 0 {
		return nil, nil
	}
	g := s.gen.Load()
	scopes := g.chatScopes()
	if len(scopes) == 0 {
		return nil, nil
	}
	us, err := g.chat[scopes[0]].k.Budgets(ctx, s.keyBudgets...)
	if err != nil {
		return nil, err
	}
	out := us[:0]
	for _, u := range us {
		if slices.ContainsFunc(s.keyBudgets, func(b core.Budget) bool { return b.Key == u.Key }) {
			out = append(out, u)
		}
	}
	return out, nil
}
