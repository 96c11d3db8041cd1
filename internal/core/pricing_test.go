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
