package core

import (
	"math"
	"testing"
)

func TestPricingTableCost(t *testing.T) {
	t.Parallel()
	table := PricingTable{
		"gpt":   {InputPer1M: 2.1, OutputPer1M: 8.4},
		"free":  {},
		"cache": {InputPer1M: 1, OutputPer1M: 2, CachedInputPer1M: 0.1},
	}
	tests := []struct {
		name               string
		table              PricingTable
		model              string
		prompt, completion int
		want               *float64
	}{
		{"one million prompt tokens", table, "gpt", 1_000_000, 0, ptr(2.1)},
		{"one million completion tokens", table, "gpt", 0, 1_000_000, ptr(8.4)},
		{"mixed", table, "gpt", 1000, 500, ptr((1000*2.1 + 500*8.4) / 1e6)},
		{"zero usage", table, "gpt", 0, 0, ptr(0)},
		{"free model", table, "free", 123, 456, ptr(0)},
		{"cached price is not applied to plain input", table, "cache", 1_000_000, 1_000_000, ptr(3)},
		{"unknown model", table, "other", 10, 10, nil},
		{"nil table", nil, "gpt", 10, 10, nil},
		{"model names are exact", table, "GPT", 10, 10, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.table.Cost(tc.model, tc.prompt, tc.completion)
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("Cost = %v, want nil", *got)
			case tc.want != nil && got == nil:
				t.Errorf("Cost = nil, want %v", *tc.want)
			case tc.want != nil && math.Abs(*got-*tc.want) > 1e-12:
				t.Errorf("Cost = %v, want %v", *got, *tc.want)
			}
		})
	}
}

func TestPricingTablePrice(t *testing.T) {
	t.Parallel()
	table := PricingTable{"m": {InputPer1M: 1, OutputPer1M: 2}}
	if p, ok := table.Price("m"); !ok || p.InputPer1M != 1 || p.OutputPer1M != 2 {
		t.Errorf("Price(m) = %+v, %v", p, ok)
	}
	if _, ok := table.Price("x"); ok {
		t.Error("Price(x) reported a price")
	}
	if _, ok := PricingTable(nil).Price("m"); ok {
		t.Error("nil table reported a price")
	}
}

func ptr(f float64) *float64 { return &f }

func TestCostCachedPricesTheCachedPartOfThePrompt(t *testing.T) {
	t.Parallel()
	table := PricingTable{
		"with-cache":    {InputPer1M: 2, OutputPer1M: 8, CachedInputPer1M: 0.5},
		"without-cache": {InputPer1M: 2, OutputPer1M: 8},
	}
	cases := []struct {
		model                     string
		prompt, cached, completed int
		want                      float64
	}{
		{"with-cache", 1000, 400, 100, (600*2 + 400*0.5 + 100*8) / 1e6},
		{"without-cache", 1000, 400, 100, (1000*2 + 100*8) / 1e6},
		{"with-cache", 100, 500, 0, 100 * 0.5 / 1e6}, // cached never exceeds the prompt
		{"with-cache", 100, -3, 0, 100 * 2 / 1e6},
	}
	for _, tc := range cases {
		got := table.CostCached(tc.model, tc.prompt, tc.cached, tc.completed)
		if got == nil || math.Abs(*got-tc.want) > 1e-12 {
			t.Errorf("CostCached(%s, %d, %d, %d) = %v, want %v", tc.model, tc.prompt, tc.cached, tc.completed, got, tc.want)
		}
	}
	if table.CostCached("unknown", 1, 0, 1) != nil {
		t.Error("an unpriced model got a cost")
	}
}
