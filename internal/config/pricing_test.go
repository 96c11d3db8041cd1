package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

func TestLoadPricing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		want    core.PricingTable
		problem string // a part of the error's Problem; "" = no error
	}{
		{name: "two models", content: `{"a": {"input_per_1m": 2.1, "output_per_1m": 8.4}, "b": {"input_per_1m": 1, "output_per_1m": 2, "cached_input_per_1m": 0.1}}`,
			want: core.PricingTable{"a": {InputPer1M: 2.1, OutputPer1M: 8.4}, "b": {InputPer1M: 1, OutputPer1M: 2, CachedInputPer1M: 0.1}}},
		{name: "a free model", content: `{"free": {}}`, want: core.PricingTable{"free": {}}},
		{name: "no models", content: " {} \n", want: core.PricingTable{}},
		{name: "not JSON", content: `{"a": `, problem: "is not a pricing table"},
		{name: "not an object", content: `[1, 2]`, problem: "is not a pricing table"},
		{name: "a price that is not a number", content: `{"a": {"input_per_1m": "2.1"}}`, problem: "is not a pricing table"},
		{name: "a number beyond a float64", content: `{"a": {"input_per_1m": 1e999}}`, problem: "is not a pricing table"},
		{name: "trailing data", content: `{"a": {}} {"b": {}}`, problem: "is not a pricing table"},
		{name: "a negative price", content: `{"a": {"input_per_1m": 1, "output_per_1m": -1}}`, problem: `negative price for model "a"`},
		{name: "a negative cached price", content: `{"a": {"cached_input_per_1m": -0.1}}`, problem: `negative price for model "a"`},
		{name: "a price too large to keep a cost finite", content: `{"a": {"input_per_1m": 1e308}}`, problem: `price of model "a" is not a number up to 1e+09 per 1M tokens`},
		// A misspelt field would price the model's output at 0: a budget
		// would then reserve and spend nothing for it.
		{name: "a misspelt field", content: `{"a": {"input_per_1m": 1, "ouput_per_1m": 4}}`, problem: `unknown field "ouput_per_1m"`},
		{name: "a field of another format", content: `{"a": {"input": 1, "output": 4}}`, problem: `unknown field "input"`},
		// Two prices of one model: which one holds is the file's mistake.
		{name: "a model named twice", content: `{"a": {"input_per_1m": 1}, "b": {}, "a": {"input_per_1m": 2}}`, problem: `model "a" is priced twice`},
		{name: "a file beyond the bound", content: `{"a": {}` + strings.Repeat(" ", maxPricingBytes) + `}`, problem: "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "prices.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadPricing(path)
			if tt.problem == "" {
				if err != nil || len(got) != len(tt.want) {
					t.Fatalf("LoadPricing = %v, %v; want %v", got, err, tt.want)
				}
				for m, p := range tt.want {
					if got[m] != p {
						t.Fatalf("LoadPricing = %v; want %v", got, tt.want)
					}
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != "PGW_PRICING_PATH" || !strings.Contains(ce.Problem, tt.problem) {
				t.Fatalf("LoadPricing = %v, %v; want a ConfigError naming PGW_PRICING_PATH with %q", got, err, tt.problem)
			}
		})
	}
}

func TestLoadPricingOfAMissingFile(t *testing.T) {
	t.Parallel()
	_, err := LoadPricing(filepath.Join(t.TempDir(), "none.json"))
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "PGW_PRICING_PATH" || !strings.Contains(ce.Problem, "cannot read") {
		t.Fatalf("LoadPricing = %v; want a ConfigError naming PGW_PRICING_PATH", err)
	}
}

// FuzzDecodePricing: decodePricing never panics, and a table it accepts is
// the one encoding/json reads from the same bytes (it only refuses more:
// unknown fields, a model twice, data after the table).
func FuzzDecodePricing(f *testing.F) {
	for _, s := range []string{
		`{"a": {"input_per_1m": 2.1, "output_per_1m": 8.4}}`, `{}`, `{"a": {}, "a": {}}`, `{"a": {"input": 1}}`,
		`{"a": {"cached_input_per_1m": 0.1}} x`, `[1]`, `null`, `{"a": {"input_per_1m": -1e3}}`, `{"\u00e9": {"OUTPUT_PER_1M": 4}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodePricing(raw)
		if err != nil {
			return
		}
		var want core.PricingTable
		if uerr := json.Unmarshal(raw, &want); uerr != nil {
			t.Fatalf("decodePricing accepted %q, encoding/json refuses it: %v", raw, uerr)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %v, encoding/json reads %v", raw, got, want)
		}
		for m, p := range want {
			if got[m] != p {
				t.Fatalf("%q: %v, encoding/json reads %v", raw, got, want)
			}
		}
	})
}
