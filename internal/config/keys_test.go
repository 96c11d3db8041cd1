package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// exampleEnv sets every key of the table to its example.
func exampleEnv() map[string]string {
	r := strings.NewReplacer("{SCOPE}", "LLM", "{PROVIDER}", "QWEN", "{N}", "1", "{NAME}", "BATCH_SIZE")
	env := map[string]string{}
	for _, d := range Keys() {
		env[r.Replace(d.Pattern)] = d.Example
	}
	return env
}

func TestKeysTableIsComplete(t *testing.T) {
	t.Parallel()
	for _, d := range Keys() {
		if d.Pattern == "" || d.Form == "" || d.Meaning == "" || d.Example == "" {
			t.Errorf("%q: Pattern, Form, Meaning and Example must all be set: %+v", d.Pattern, d)
		}
		if d.Values != nil {
			if !slices.Contains(d.Values, d.Example) {
				t.Errorf("%s: example %q is not among %v", d.Pattern, d.Example, d.Values)
			}
			if d.Default != "" && !slices.Contains(d.Values, d.Default) {
				t.Errorf("%s: default %q is not among %v", d.Pattern, d.Default, d.Values)
			}
		}
		if d.Required == "yes" && d.Default != "" {
			t.Errorf("%s: required keys have no default", d.Pattern)
		}
	}
}

func TestKeysEveryExampleLoads(t *testing.T) {
	t.Parallel()
	// Every table row reaches the parser (allHandled would fail otherwise)
	// and every example is valid.
	s := mustLoad(t, "LLM", exampleEnv())
	if len(s.Sources) != 1 || s.Extra["BATCH_SIZE"] != "64" {
		t.Fatalf("unexpected settings: %+v", s)
	}
}

func TestKeysDriveKnownFields(t *testing.T) {
	t.Parallel()
	// Every FIELD the table lists is accepted by the key classifier, with a
	// value error rather than an "unknown field" one when the value is bad.
	for _, d := range Keys() {
		if !strings.HasPrefix(d.Pattern, scopeP) || d.Pattern == extraP {
			continue
		}
		key := strings.NewReplacer("{SCOPE}", "LLM", "{PROVIDER}", "QWEN", "{N}", "1").Replace(d.Pattern)
		_, err := Load("LLM", with(map[string]string{key: "\x00bad"}))
		var ce *Error
		if errors.As(err, &ce) && strings.Contains(ce.Problem, "unknown field") {
			t.Errorf("%s: table key rejected as unknown: %v", key, err)
		}
	}
	// Patterns are unique and the groups are exactly the documented ones.
	if got := known.groupOrder; !slices.Equal(got, []string{groupGlobal, groupBudget, groupRetry, groupBreaker, groupBackpressure, groupFallback, groupQuality}) {
		t.Errorf("groups = %v", got)
	}
	if !slices.Equal(known.singles, []string{"SELECTOR", "PREFERRED_REGION", "QUOTA_FULL"}) {
		t.Errorf("singles = %v", known.singles)
	}
	// A source's groups hold a subset of the scope group's fields.
	if got := known.sourceGroupOrder; !slices.Equal(got, []string{groupBreaker}) {
		t.Errorf("source groups = %v", got)
	}
	for g, fields := range known.sourceGroups {
		for _, f := range fields {
			if !slices.Contains(known.groups[g], f) {
				t.Errorf("source field %s__%s has no scope key %s__%s", g, f, g, f)
			}
		}
	}
}

func TestKeysReturnsACopy(t *testing.T) {
	t.Parallel()
	k := Keys()
	k[0].Pattern = "changed"
	for i := range k {
		if k[i].Values != nil {
			k[i].Values[0] = "changed"
		}
	}
	for _, d := range Keys() {
		if d.Pattern == "changed" || slices.Contains(d.Values, "changed") {
			t.Fatal("Keys returned the table itself")
		}
	}
}

func TestAllHandledGuard(t *testing.T) {
	t.Parallel()
	l := &loader{env: map[string]string{"LLM__SELECTOR": "x"}, used: map[string]bool{}, recognised: []string{"LLM__SELECTOR"}}
	if err := l.allHandled(); err == nil || err.Key != "LLM__SELECTOR" || !strings.Contains(err.Problem, "internal error") {
		t.Fatalf("allHandled = %v", err)
	}
}

func TestErrorMethods(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	e := &Error{Key: "K", Problem: "p", Err: cause}
	if e.Error() != "polygateway: config: K: p" {
		t.Errorf("Error() = %q", e.Error())
	}
	if !errors.Is(e, core.ErrGateway) || !errors.Is(e, cause) || errors.Is(e, core.ErrCircuitOpen) {
		t.Error("Is/Unwrap wrong")
	}
}
