package proxy

import (
	"crypto/sha256"
	"math"
	"strings"
	"testing"
	"time"
)

// TestKeyBudgetsAreOnesALimiterKeeps: a client budget is refused unless a
// limiter can keep it (at most 2^53 micro-USD, about 9.007 billion USD),
// rather than accepted and then failing every call of the key.
func TestKeyBudgetsAreOnesALimiterKeeps(t *testing.T) {
	t.Parallel()
	hashes := [][sha256.Size]byte{sha256.Sum256([]byte("key-a"))}
	for _, tt := range []struct {
		usd     float64
		limit   int64
		problem string
	}{
		{usd: 20, limit: 20_000_000},
		{usd: 9e9, limit: 9e15},
		{usd: 1e10, problem: "ClientBudget.USD"},
		{usd: 1e12, problem: "ClientBudget.USD"},
		{usd: math.Inf(1), problem: "ClientBudget.USD"},
		{usd: math.NaN(), problem: "ClientBudget.USD"},
		{usd: -1, problem: "ClientBudget.USD"},
	} {
		c := &Config{ClientBudget: ClientBudget{USD: tt.usd, Window: time.Hour}}
		bs, err := c.keyBudgets(hashes)
		if tt.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tt.problem) {
				t.Errorf("USD %v: keyBudgets = %+v, %v; want an error naming %s", tt.usd, bs, err, tt.problem)
			}
			continue
		}
		if err != nil || len(bs) != 1 || bs[0].Limit != tt.limit {
			t.Errorf("USD %v: keyBudgets = %+v, %v; want one budget of %d micro-USD", tt.usd, bs, err, tt.limit)
		}
	}
}
