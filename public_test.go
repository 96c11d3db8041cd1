package polygateway_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The public types are aliases of package core's, whose go doc (and
// pkg.go.dev page) shows their fields and methods; the root's go doc names
// the type it stands for.
func TestGoDocOnTheRootShowsTheFieldsOfThePublicTypes(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	for typ, fields := range map[string][]string{
		"GatewayUnavailableError": {"Scope", "Reason", "RetryAfter", "PerSource", "Err", "func (e *GatewayUnavailableError) Is"},
		"LLMResponse":             {"Content, Thinking", "Model, Provider, SourceName", "CacheHit", "Cost", "Attempts", "DegradedBy"},
		"RequestRejectedError":    {"Source", "StatusCode", "Code", "Reason", "Message"},
		"TransientError":          {"RetryAfter", "func (e *TransientError) IsRateLimit"},
		"SourceStatus":            {"Breaker", "InFlight", "Health", "AdaptiveLimit", "Usage"},
		"Message":                 {"Role", "Content", "Parts", "ToolCallID"},
	} {
		out, err := exec.Command("go", "doc", "github.com/polygateway/polygateway", typ).CombinedOutput()
		if err != nil {
			t.Fatalf("go doc %s: %v\n%s", typ, err, out)
		}
		if !strings.Contains(string(out), "= core."+typ) {
			t.Errorf("go doc %s does not name the core type it stands for:\n%s", typ, out)
		}
		out, err = exec.Command("go", "doc", "github.com/polygateway/polygateway/core", typ).CombinedOutput()
		if err != nil {
			t.Fatalf("go doc core.%s: %v\n%s", typ, err, out)
		}
		doc := string(out)
		for _, f := range fields {
			if !strings.Contains(doc, f) {
				t.Errorf("go doc core.%s does not show %q:\n%s", typ, f, doc)
			}
		}
	}
}
