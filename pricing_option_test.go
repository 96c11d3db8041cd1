package polygateway_test

import (
	"errors"
	"math"
	"net/http"
	"testing"

	"github.com/polygateway/polygateway"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// TestWithPricingIsCheckedLikeThePricingFile: a table given in code is
// refused at assembly where the same prices in PGW_PRICING_PATH would be
// (negative), and where no file could carry them (NaN, infinite, large
// enough to overflow a call's cost), as an error naming WithPricing.
func TestWithPricingIsCheckedLikeThePricingFile(t *testing.T) {
	t.Parallel()
	upstream := fu.New()
	t.Cleanup(upstream.Close)
	for name, p := range map[string]polygateway.ModelPrice{
		"negative":  {InputPer1M: -1, OutputPer1M: 1},
		"NaN":       {InputPer1M: 1, OutputPer1M: math.NaN()},
		"infinite":  {CachedInputPer1M: math.Inf(1)},
		"too large": {OutputPer1M: 1e308},
	} {
		client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(upstream.Env("LLM", fu.EnvModel("m"))),
			polygateway.WithPricing(polygateway.PricingTable{"m": p}))
		var ce *polygateway.ConfigError
		if err == nil {
			client.Close()
		}
		if !errors.As(err, &ce) || ce.Key != "WithPricing" {
			t.Errorf("%s price: FromEnv = %v, want a ConfigError naming WithPricing", name, err)
		}
	}
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(upstream.Env("LLM", fu.EnvModel("m"))),
		polygateway.WithPricing(polygateway.PricingTable{"m": {InputPer1M: 0.5, OutputPer1M: 2}}))
	if err != nil {
		t.Fatalf("a valid table: %v", err)
	}
	client.Close()
}

// TestWithProfilesNamedInAnotherCaseReplaceTheDefault: profiles are named
// in lower case; a caller's "Qwen" replaces the default "qwen" for every
// source of that profile, on every assembly (the two names used to be
// lower-cased in map order: either profile, by chance).
func TestWithProfilesNamedInAnotherCaseReplaceTheDefault(t *testing.T) {
	t.Parallel()
	upstream := fu.New(fu.WithBehavior(fu.Status(http.StatusBadRequest, `{"error":{"message":"gone","type":"x","code":"my_dead_code"}}`, nil)))
	t.Cleanup(upstream.Close)
	custom := polygateway.DefaultProfiles()["qwen"]
	custom.DeadCodes = append(custom.DeadCodes, "my_dead_code")
	for i := range 20 {
		env := upstream.Env("LLM", fu.EnvSource("qwen", 1), fu.EnvField("PROFILE", "qwen"))
		env["LLM__RETRY__MAX_ATTEMPTS"] = "1"
		client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env),
			polygateway.WithProfiles(map[string]polygateway.ProviderProfile{"Qwen": custom}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Chat(t.Context(), []polygateway.Message{polygateway.User("hi")})
		client.Close()
		var dead *polygateway.SourceDeadError
		if !errors.As(err, &dead) {
			t.Fatalf("assembly %d: err = %v, want the custom profile's dead code to mark the source dead", i, err)
		}
	}
}
