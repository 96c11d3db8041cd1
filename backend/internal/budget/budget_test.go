package budget

import (
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

func TestProblem(t *testing.T) {
	t.Parallel()
	ok := core.Budget{Key: "client:a", Limit: 1000, Window: time.Hour}
	cases := []struct {
		name string
		bs   []core.Budget
		idx  int
		want string
	}{
		{"none", nil, -1, ""},
		{"valid", []core.Budget{ok, {Key: "scope:S", Limit: 1, Window: time.Second}}, -1, ""},
		{"same key, other window", []core.Budget{ok, {Key: ok.Key, Limit: 5, Window: 24 * time.Hour}}, -1, ""},
		{"largest limit", []core.Budget{{Key: "k", Limit: MaxAmount, Window: time.Second}}, -1, ""},
		{"empty key", []core.Budget{ok, {Limit: 1, Window: time.Second}}, 1, "empty"},
		{"zero limit", []core.Budget{{Key: "k", Window: time.Second}}, 0, "positive"},
		{"negative limit", []core.Budget{{Key: "k", Limit: -1, Window: time.Second}}, 0, "positive"},
		{"limit too large", []core.Budget{{Key: "k", Limit: MaxAmount + 1, Window: time.Second}}, 0, "2^53"},
		{"zero window", []core.Budget{{Key: "k", Limit: 1}}, 0, "at least 1s"},
		{"window below a second", []core.Budget{{Key: "k", Limit: 1, Window: 999 * time.Millisecond}}, 0, "at least 1s"},
		{"fractional window", []core.Budget{{Key: "k", Limit: 1, Window: 1500 * time.Millisecond}}, 0, "whole number"},
		{"named twice", []core.Budget{ok, {Key: "x", Limit: 1, Window: time.Second}, ok}, 2, "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			i, why := Problem(tc.bs)
			if i != tc.idx || !strings.Contains(why, tc.want) || (tc.want == "") != (why == "") {
				t.Fatalf("Problem = %d, %q; want %d, a reason containing %q", i, why, tc.idx, tc.want)
			}
		})
	}
}

func TestClamp(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]int64{-5: 0, 0: 0, 7: 7, MaxAmount: MaxAmount, MaxAmount + 1: MaxAmount, 1<<62 + 3: MaxAmount} {
		if got := Clamp(in); got != want {
			t.Errorf("Clamp(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spent, limit, cost int64
		want               bool
	}{
		{0, 1000, 1000, false},  // exactly fits
		{0, 1000, 1001, true},   // alone above the limit
		{900, 1000, 100, false}, // up to the limit
		{901, 1000, 100, true},
		{999, 1000, 0, false},  // a free call passes below the limit
		{1000, 1000, 0, true},  // and not at it
		{1500, 1000, 0, true},  // nor above (an actual cost overshot)
		{1500, 1000, 10, true}, // nor does a paid one
		{0, 1, 0, false},
		{0, MaxAmount, MaxAmount, false},
		{1, MaxAmount, MaxAmount, true},
		{MaxAmount * 4, MaxAmount, MaxAmount, true}, // no overflow
	}
	for _, tc := range cases {
		if got := Refuses(tc.spent, tc.limit, tc.cost); got != tc.want {
			t.Errorf("Refuses(spent %d, limit %d, cost %d) = %v, want %v", tc.spent, tc.limit, tc.cost, got, tc.want)
		}
	}
}

func TestSettled(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name            string
		spent, reserved int64
		s               core.Settlement
		want            int64
	}{
		{"actual below the estimate", 1000, 400, core.Settlement{Kind: core.SettleActual, Cost: 100}, 700},
		{"actual above the estimate", 1000, 400, core.Settlement{Kind: core.SettleActual, Cost: 900}, 1500},
		{"actual equal", 1000, 400, core.Settlement{Kind: core.SettleActual, Cost: 400}, 1000},
		{"actual of a free call", 0, 0, core.Settlement{Kind: core.SettleActual, Cost: 50}, 50},
		{"negative actual counts as 0", 1000, 400, core.Settlement{Kind: core.SettleActual, Cost: -7}, 600},
		{"actual clamped", 0, 0, core.Settlement{Kind: core.SettleActual, Cost: MaxAmount + 9}, MaxAmount},
		{"estimate keeps", 1000, 400, core.Settlement{Kind: core.SettleEstimate, Cost: 1}, 1000},
		{"unknown kind keeps", 1000, 400, core.Settlement{Kind: 9, Cost: 1}, 1000},
		{"refund removes", 1000, 400, core.Settlement{Kind: core.SettleRefund, Cost: 999}, 600},
		{"refund never below 0", 300, 400, core.Settlement{Kind: core.SettleRefund}, 0},
		{"actual never below 0", 100, 400, core.Settlement{Kind: core.SettleActual, Cost: 10}, 0},
	}
	for _, tc := range cases {
		if got := Settled(tc.spent, tc.reserved, tc.s); got != tc.want {
			t.Errorf("%s: Settled(%d, %d, %+v) = %d, want %d", tc.name, tc.spent, tc.reserved, tc.s, got, tc.want)
		}
	}
}

func TestStartIsEpochAligned(t *testing.T) {
	t.Parallel()
	day := core.Budget{Key: "k", Limit: 1, Window: 24 * time.Hour}
	minute := core.Budget{Key: "k", Limit: 1, Window: time.Minute}
	at := time.Date(2030, 1, 1, 13, 45, 10, 500, time.UTC)
	cases := []struct {
		b    core.Budget
		t    time.Time
		want time.Time
	}{
		{day, at, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		{minute, at, time.Date(2030, 1, 1, 13, 45, 0, 0, time.UTC)},
		{minute, time.Date(2030, 1, 1, 13, 45, 0, 0, time.UTC), time.Date(2030, 1, 1, 13, 45, 0, 0, time.UTC)},
		{minute, time.Unix(-1, 0), time.Unix(-60, 0)},
		{core.Budget{Window: 7 * time.Second}, time.Unix(20, 0), time.Unix(14, 0)},
	}
	for _, tc := range cases {
		if got := Start(tc.b, tc.t); got != tc.want.Unix() {
			t.Errorf("Start(%v, %v) = %v, want %v", tc.b.Window, tc.t, time.Unix(got, 0).UTC(), tc.want)
		}
	}
	if s := Seconds(day); s != 86400 {
		t.Errorf("Seconds(day) = %d", s)
	}
}
