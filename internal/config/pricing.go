package config

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/polygateway/polygateway/core"
)

// LoadPricing reads a pricing JSON file of the form
// {"model": {"input_per_1m": 2.1, "output_per_1m": 8.4}}.
func LoadPricing(path string) (core.PricingTable, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("cannot read %q: %v", path, err)}
	}
	var table core.PricingTable
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("%q is not a pricing table ({\"model\": {\"input_per_1m\": n, \"output_per_1m\": n}}): %v", path, err)}
	}
	for model, p := range table {
		if p.InputPer1M < 0 || p.OutputPer1M < 0 || p.CachedInputPer1M < 0 {
			return nil, &Error{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("%q: negative price for model %q", path, model)}
		}
	}
	return table, nil
}
