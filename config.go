package polygateway

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/polygateway/polygateway/internal/config"
)

// ConfigError is a bad or missing configuration value; Key names it.
type ConfigError = config.Error

// LoadSettings parses and validates the configuration of scope from env
// (keys as in the configuration reference). It does no I/O: PGW_PRICING_PATH
// is read by FromSettings.
func LoadSettings(scope string, env map[string]string) (GatewaySettings, error) {
	return config.Load(scope, env)
}

// LoadPricing reads a pricing JSON file of the form
// {"model": {"input_per_1m": 2.1, "output_per_1m": 8.4}}.
func LoadPricing(path string) (PricingTable, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("cannot read %q: %v", path, err)}
	}
	var table PricingTable
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, &ConfigError{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("%q is not a pricing table ({\"model\": {\"input_per_1m\": n, \"output_per_1m\": n}}): %v", path, err)}
	}
	for model, p := range table {
		if p.InputPer1M < 0 || p.OutputPer1M < 0 || p.CachedInputPer1M < 0 {
			return nil, &ConfigError{Key: "PGW_PRICING_PATH", Problem: fmt.Sprintf("%q: negative price for model %q", path, model)}
		}
	}
	return table, nil
}
