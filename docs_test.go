package polygateway_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/config"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/configuration.md from the parser's key table")

// renderKeyReference renders the configuration reference from the one key
// table the parser itself is driven by.
func renderKeyReference() string {
	var b strings.Builder
	b.WriteString("# Configuration keys\n\n")
	b.WriteString("Generated from the parser's key table (`internal/config.Keys`); `go test -run TestKeyReference -update-docs .` rewrites it, and the test fails when the two disagree.\n\n")
	b.WriteString("Every `…_S` value is in seconds and accepts decimals; booleans are `true`/`false`/`1`/`0`. ")
	b.WriteString("A missing required key or a bad value is an assembly error naming the key.\n\n")
	b.WriteString("| key | required | default | form | meaning |\n|---|---|---|---|---|\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for _, k := range config.Keys() {
		form := k.Form
		if len(k.Values) > 0 {
			form = strings.Join(k.Values, " | ")
		}
		b.WriteString("| `" + k.Pattern + "` | " + esc(k.Required) + " | " + esc(k.Default) + " | " + esc(form) + " | " + esc(k.Meaning) + " |\n")
	}
	b.WriteString(handMadeSettings)
	return b.String()
}

// handMadeSettings documents what FromSettings accepts beyond the table.
const handMadeSettings = `
## Settings made by hand

` + "`FromSettings`" + ` checks the settings it is given as ` + "`LoadSettings`" + ` checks what it parses
(` + "`internal/config.Validate`" + `): the same values are refused with the same ` + "`*ConfigError`" + `, naming the
key of the offending value (a value made by hand is named by its own key, never by a flat
` + "`LLM_*`" + ` shortcut). A source needs ` + "`Provider`" + `, ` + "`Index`" + ` (>= 1) and the ` + "`Name`" + ` the environment would
give it (` + "`lower(Provider)_Index`" + `), ` + "`BaseURL`" + `, ` + "`APIKey`" + `, ` + "`Model`" + ` and ` + "`Timeout`" + `; a ` + "`Budget`" + ` with a
` + "`Limit`" + ` needs a ` + "`Window`" + ` of whole seconds. Optional values may stay at their zero value:

| zero value | means |
|---|---|
| ` + "`Selector`, `QuotaFull`, `MissingDone`, `Continue` \"\"" + ` | the default: health_aware, wait, retry, the provider profile's choice |
| ` + "`CacheBackend`, `TelemetryBackend` \"\"" + ` | none |
| ` + "`LimiterBackend`, `BreakerBackend` \"\"" + ` | only with ` + "`WithLimiter`" + ` / ` + "`WithBreaker`" + `; refused at assembly otherwise |
| source ` + "`Weight`" + ` 0, ` + "`Backpressure.PollInterval`" + ` 0, ` + "`Breaker.HalfOpenSuccesses`" + ` 0 | the defaults: 1, 0.25 s, 1 |
| ` + "`Retry.MaxAttempts`" + ` 0 | a single attempt |
| ` + "`Retry.BackoffMax`" + ` 0 | no cap on the backoff |
| ` + "`Breaker.FailThreshold`" + ` 0; ` + "`Breaker.FailRate`" + ` or ` + "`Window`" + ` 0 | the consecutive channel off; the failure-rate channel off |
| ` + "`Breaker.MinCalls`" + ` 0 | 1 |
| ` + "`Breaker.MaxCooldown`" + ` 0 | every open period lasts ` + "`Cooldown`" + ` (no doubling) |
| ` + "`Breaker.ProbeTTL`" + ` 0 | the half-open probe's lease never expires |
| a source's ` + "`Breaker`" + ` overrides 0 | the scope's value |
| ` + "`Backpressure.StallWindow`" + ` 0 | no stall rule |
| ` + "`LeaseTTL`" + ` 0 | each concurrency permit is leased for its attempt's timeout plus a margin |
| ` + "`EstTokens`" + ` 0 | none (refused when a TPM gate is on) |
| ` + "`TTFTTimeout`" + ` and ` + "`InterTokenTimeout`" + ` both 0 | no stream watchdog |

Every other zero value is itself: ` + "`Retry.BackoffBase`" + ` and ` + "`TierPatience`" + ` 0, ` + "`StructuredMaxRetries`" + ` 0,
` + "`Quality.MinChars`" + ` 0, ` + "`Fallback.Stale`" + ` 0, limits 0 (off).
`

// TestKeyReference fails when docs/configuration.md does not list exactly
// the keys the parser knows.
func TestKeyReference(t *testing.T) {
	want := renderKeyReference()
	if *updateDocs {
		if err := os.WriteFile("docs/configuration.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/configuration.md is out of date with the parser's key table: run go test -run TestKeyReference -update-docs .")
	}
}
