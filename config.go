package polygateway

import (
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
)

// ConfigError is a bad or missing configuration value; Key names it (go doc
// core.ConfigError).
type ConfigError = core.ConfigError

// LoadSettings parses and validates the configuration of scope from env
// (keys as in the configuration reference). It does no I/O: PGW_PRICING_PATH
// is read by FromSettings.
func LoadSettings(scope string, env map[string]string) (GatewaySettings, error) {
	return config.Load(scope, env)
}

// LoadPricing reads a pricing JSON file of the form
// {"model": {"input_per_1m": 2.1, "output_per_1m": 8.4}}.
func LoadPricing(path string) (PricingTable, error) { return config.LoadPricing(path) }
