package config

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestTyposAreErrorsWithSuggestions: a misspelt key of the loaded scope, a
// misspelt PGW_* key and a misspelt flat LLM_* key each fail the load,
// naming the key and the key that was meant.
func TestTyposAreErrorsWithSuggestions(t *testing.T) {
	t.Parallel()
	embedScope := map[string]string{
		"EMBED__OAI__1__BASE_URL": "https://e.example.com/v1", "EMBED__OAI__1__API_KEY": secretKey,
		"EMBED__OAI__1__MODEL": "text-embedding-3-small", "EMBED__OAI__1__TIMEOUT_S": "30", "EMBED__BATCH_SIZE": "64",
	}
	cases := []struct {
		scope, key, val string
		extra           map[string]string
		want            string // the suggestion; "" = none expected
	}{
		{key: "LLM__SELECTR", val: "round_robin", want: "did you mean LLM__SELECTOR?"},
		{key: "LLM__PREFERED_REGION", val: "cn-east", want: "did you mean LLM__PREFERRED_REGION?"},
		{key: "LLM__QUOTAFULL", val: "wait", want: "did you mean LLM__QUOTA_FULL?"},
		{key: "LLM__BATCHSIZE", val: "8", want: "did you mean LLM__BATCH_SIZE?"},
		{key: "LLM__RETRI__MAX_ATTEMPTS", val: "3", want: "did you mean LLM__RETRY__MAX_ATTEMPTS?"},
		{key: "LLM__BREAKR", val: "3", want: "did you mean LLM__BREAKER__{FIELD}?"},
		{key: "PGW_STRUCTURED_MAX_RETRY", val: "2", want: "did you mean PGW_STRUCTURED_MAX_RETRIES?"},
		{key: "PGW_LEASE_TTL", val: "1500", want: "did you mean PGW_LEASE_TTL_S?"},
		{key: "PGW_CACHE_TTL", val: "60", want: "did you mean PGW_CACHE_TTL_S?"},
		{key: "PGW_LIMITTER_BACKEND", val: "memory", want: "did you mean PGW_LIMITER_BACKEND?"},
		{key: "PGW_LISTEN_ADR", val: ":8400", want: "did you mean PGW_LISTEN_ADDR?"},      // a gateway key
		{key: "PGW_CLIENT_KYES", val: "k", want: "did you mean PGW_CLIENT_KEYS?"},         // a swap
		{key: "PGW_STREAM_COMIT", val: "buffer", want: "did you mean PGW_STREAM_COMMIT?"}, // doubled letter
		{key: "LLM_TIMEOUTS", val: "5", want: "did you mean LLM_TIMEOUT?"},
		{key: "LLM_MAX_RETRY", val: "5", want: "did you mean LLM_MAX_RETRIES?"},
		{key: "LLM_SELECTOR", val: "round_robin", want: "did you mean LLM__SELECTOR? scope keys take a double underscore"},
		{scope: "EMBED", key: "EMBED__NORMALISE", val: "true", extra: embedScope, want: "did you mean EMBED__NORMALIZE?"},
		{scope: "EMBED", key: "EMBED__BACH_SIZE", val: "1", extra: embedScope, want: "did you mean EMBED__BATCH_SIZE?"},
		{key: "PGW_FROBNICATE", val: "1"},
		{key: "LLM_API_KEY", val: secretKey},
		{key: "LLM__COLOUR", val: "blue"},
	}
	for _, c := range cases {
		scope := cmpOr(c.scope, "LLM")
		env := with(c.extra)
		env[c.key] = c.val
		_, err := Load(scope, env)
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != c.key {
			t.Errorf("%s=%s: err %v, want an error naming the key", c.key, c.val, err)
			continue
		}
		switch {
		case c.want != "" && !strings.Contains(ce.Problem, c.want):
			t.Errorf("%s: problem %q lacks %q", c.key, ce.Problem, c.want)
		case c.want == "" && strings.Contains(ce.Problem, "did you mean"):
			t.Errorf("%s: unexpected suggestion in %q", c.key, ce.Problem)
		case strings.Contains(ce.Problem, secretKey):
			t.Errorf("%s: the value is echoed: %q", c.key, ce.Problem)
		}
		// The gateway's own check agrees on the keys without a scope.
		if !strings.Contains(c.key, "__") {
			var ke *Error
			if err := CheckKeys(map[string]string{c.key: c.val}); !errors.As(err, &ke) || ke.Key != c.key || ke.Problem != ce.Problem {
				t.Errorf("CheckKeys(%s) = %v, want %q", c.key, err, ce.Problem)
			}
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestKnownKeysOfEveryReaderAreAccepted: one environment can hold the keys
// of every client, the gateway and the tests; the settings parser accepts
// them all and reads only its own.
func TestKnownKeysOfEveryReaderAreAccepted(t *testing.T) {
	t.Parallel()
	others := map[string]string{
		"PGW_ROUTES": "gpt-4o=LLM", "PGW_LISTEN_ADDR": ":8400", "PGW_CLIENT_KEYS": "a,b", "PGW_LOG_LEVEL": "debug",
		"PGW_TEST_REDIS_URL": "redis://127.0.0.1:6379/15", "PGW_REQUIRE_SERVICES": "1", "PGW_CLIENT_KEY": "a", "PGW_MODEL": "m",
		"PGW_X_OTHER": "x", "LLM_FAST__SELECTR": "x", "OCR__SELECTR": "x", "LLMX": "x", "PGW": "x",
	}
	plain := mustLoad(t, "LLM", base())
	got := mustLoad(t, "LLM", with(others))
	if !reflect.DeepEqual(plain, got) {
		t.Errorf("keys of other readers changed the settings:\n%+v\n%+v", plain, got)
	}
	if err := CheckKeys(others); err != nil {
		t.Errorf("CheckKeys: %v", err)
	}
}

// TestAllowKeysEscapesOtherSoftware: PGW_ALLOW_KEYS names keys of other
// programs, exactly or by prefix; they are then ignored.
func TestAllowKeysEscapesOtherSoftware(t *testing.T) {
	t.Parallel()
	foreign := map[string]string{
		"LLM_MODEL": "gpt-4o", "LLM_API_KEY": secretKey, "PGW_LEGACY_PORT": "80", "LLM__LEGACY": "x", "LLM__LEGACY__A__B__C": "x",
	}
	env := with(foreign)
	if _, err := Load("LLM", env); err == nil {
		t.Fatal("foreign keys accepted without PGW_ALLOW_KEYS")
	}
	env[allowKey] = " LLM_MODEL, LLM_API_KEY ,PGW_LEGACY_*,LLM__LEGACY*,"
	got := mustLoad(t, "LLM", env)
	if want := mustLoad(t, "LLM", base()); !reflect.DeepEqual(got, want) {
		t.Errorf("allowed keys changed the settings: %+v", got)
	}
	if err := CheckKeys(env); err != nil {
		t.Errorf("CheckKeys: %v", err)
	}
	// A known key stays known: the allow-list does not hide a valid one.
	env["LLM__SELECTOR"] = "round_robin"
	if s := mustLoad(t, "LLM", env); s.Selector != "round_robin" {
		t.Errorf("selector %q", s.Selector)
	}
	// Everything allowed.
	star := with(maps.Clone(foreign))
	star[allowKey] = "*"
	mustLoad(t, "LLM", star)

	for _, bad := range []string{"LLM-MODEL", "A B", "PGW_*_X"} {
		_, err := Load("LLM", with(map[string]string{allowKey: bad}))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != allowKey || !strings.Contains(ce.Problem, "invalid entry") {
			t.Errorf("PGW_ALLOW_KEYS=%q: %v", bad, err)
		}
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	cands := []string{"SELECTOR", "PREFERRED_REGION", "QUOTA_FULL", "BATCH_SIZE", "NORMALIZE", "TIMEOUT_S", "RPM", "TPM", "MAX_RETRIES"}
	for name, want := range map[string]string{
		"SELECTR": "SELECTOR", "SELECOTR": "SELECTOR", "selector": "SELECTOR", "PREFERED_REGION": "PREFERRED_REGION",
		"NORMALISE": "NORMALIZE", "TIMEOUT": "TIMEOUT_S", "TIMEOUTS": "TIMEOUT_S", "MAX_RETRY": "MAX_RETRIES", "RMP": "RPM",
		"QPS": "", "COLOUR": "", "X": "", "": "", "TIMEOUT_S": "", strings.Repeat("A", 10000): "",
	} {
		if got := Suggest(name, cands); got != want {
			t.Errorf("Suggest(%.20q) = %q, want %q", name, got, want)
		}
	}
}

// TestFoldKeepsKnownKeysApart: no two known names of one family fold to
// the same spelling, so a folded match is never ambiguous.
func TestFoldKeepsKnownKeysApart(t *testing.T) {
	t.Parallel()
	families := map[string][]string{
		"source": known.source, "single": slices.Concat(known.singles, known.extension, known.groupOrder),
	}
	for g, f := range known.groups {
		families["group "+g] = f
	}
	for g, f := range known.sourceGroups {
		families["source group "+g] = f
	}
	families["source"] = append(families["source"], known.sourceGroupOrder...)
	for name, r := range known.names {
		if r == ReaderTooling {
			continue
		}
		fam := name[:4]
		families[fam] = append(families[fam], strings.TrimPrefix(name, fam))
	}
	for fam, names := range families {
		seen := map[string]string{}
		for _, n := range names {
			if prev, dup := seen[fold(n)]; dup {
				t.Errorf("%s: %s and %s fold alike", fam, prev, n)
			}
			seen[fold(n)] = n
		}
	}
}
