package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
)

// newcomerEnv is what a newcomer writes first: one source's BASE_URL,
// API_KEY and MODEL, nothing else.
func newcomerEnv() map[string]string {
	return map[string]string{
		"LLM__OPENAI__1__BASE_URL": "https://api.example.com/v1",
		"LLM__OPENAI__1__API_KEY":  "sk-SECRET-newcomer",
		"LLM__OPENAI__1__MODEL":    "gpt-4o-mini",
	}
}

// problems returns the keys and the problems of a configuration error, in
// order; the error must match errors.As(err, **ConfigError).
func problems(t *testing.T, err error) ([]string, string) {
	t.Helper()
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %v is not a *ConfigError", err, err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("the error shows a secret: %v", err)
	}
	var keys []string
	for _, p := range ce.Problems() {
		keys = append(keys, p.Key)
		if !strings.Contains(err.Error(), p.Key+": "+p.Problem) {
			t.Errorf("Error() does not list %s: %s\n%v", p.Key, p.Problem, err)
		}
	}
	return keys, err.Error()
}

// TestEveryProblemIsReportedAtOnce: a configuration with several missing
// and invalid keys is refused with one error naming each of them, with
// its suggestion, by LoadSettings and by FromEnv alike.
func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		set  map[string]string
		keys []string // in order
		want []string // in Error()
	}{
		{name: "only BASE_URL, API_KEY and MODEL",
			keys: []string{"PGW_LIMITER_BACKEND", "PGW_BREAKER_BACKEND", "PGW_CACHE_BACKEND", "PGW_TELEMETRY_BACKEND", "LLM__OPENAI__1__TIMEOUT_S"},
			want: []string{"missing: required; expected one of memory, redis", "required unless the flat LLM_TIMEOUT is set"}},
		{name: "typos and bad values",
			set: map[string]string{
				"LLM__OPENAI__1__TIMEOUT": "30", "PGW_LIMITER_BACKEND": "memroy", "PGW_BREAKER_BACKEND": "memory",
				"PGW_CACHE_BACKEND": "none", "PGW_TELEMTRY_BACKEND": "none", "LLM__SELECTR": "round_robin",
				"LLM__RETRY__MAX_ATTEMPTS": "0", "LLM__OPENAI__1__WEIGHT": "heavy",
			},
			keys: []string{"LLM__OPENAI__1__TIMEOUT", "LLM__SELECTR", "PGW_TELEMTRY_BACKEND", "PGW_LIMITER_BACKEND",
				"PGW_TELEMETRY_BACKEND", "LLM__RETRY__MAX_ATTEMPTS", "LLM__OPENAI__1__TIMEOUT_S", "LLM__OPENAI__1__WEIGHT"},
			want: []string{"did you mean TIMEOUT_S?", "did you mean LLM__SELECTOR?", "did you mean PGW_TELEMETRY_BACKEND?",
				`invalid value "memroy"`, `invalid value "0": must be at least 1`, `invalid value "heavy"`}},
		{name: "a provider one letter from a profile",
			set: map[string]string{
				"LLM__OPENAI__1__TIMEOUT_S": "30", "PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
				"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
				"LLM__OPNAI__2__BASE_URL": "https://b.example.com/v1", "LLM__OPNAI__2__API_KEY": "sk-SECRET-2",
				"LLM__OPNAI__2__MODEL": "m", "LLM__OPNAI__2__TIMEOUT_S": "30",
			},
			keys: []string{"LLM__OPNAI__2__PROFILE"},
			want: []string{"provider OPNAI is no known provider", "did you mean LLM__OPENAI__2__…?", "set this key to the profile"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newcomerEnv()
			for k, v := range tc.set {
				env[k] = v
			}
			_, lerr := polygateway.LoadSettings("LLM", env)
			keys, text := problems(t, lerr)
			if strings.Join(keys, " ") != strings.Join(tc.keys, " ") {
				t.Errorf("problems name\n%v\nwant\n%v\n%v", keys, tc.keys, lerr)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("error lacks %q:\n%v", w, lerr)
				}
			}
			_, ferr := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
			if ferr == nil || ferr.Error() != lerr.Error() {
				t.Errorf("FromEnv says\n%v\nLoadSettings says\n%v", ferr, lerr)
			}
		})
	}
}

// TestProviderTypoNeedsItsProfile: a provider one or two letters from a
// built-in profile (opnai) is a typo unless the source names its profile;
// named, it speaks that profile's dialect, from the environment and from
// settings made by hand.
func TestProviderTypoNeedsItsProfile(t *testing.T) {
	t.Parallel()
	env := newcomerEnv()
	for k, v := range map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
	} {
		env[k] = v
	}
	for _, provider := range []string{"OPNAI", "OPENIA", "DEEPSEK", "QWEN2"} {
		typo := map[string]string{}
		for k, v := range env {
			typo[strings.Replace(k, "__OPENAI__", "__"+provider+"__", 1)] = v
		}
		_, err := polygateway.LoadSettings("LLM", typo)
		keys, text := problems(t, err)
		if len(keys) != 1 || keys[0] != "LLM__"+provider+"__1__PROFILE" || !strings.Contains(text, "did you mean") {
			t.Errorf("%s: %v", provider, err)
		}
		typo["LLM__"+provider+"__1__PROFILE"] = "openai"
		s, err := polygateway.LoadSettings("LLM", typo)
		if err != nil {
			t.Fatalf("%s with its profile: %v", provider, err)
		}
		if got := s.Sources[0].ProfileName(); got != "openai" {
			t.Errorf("%s: profile %q", provider, got)
		}
		s.Sources[0].Profile = ""
		if _, err := polygateway.FromSettings(s); err == nil || !strings.Contains(err.Error(), "PROFILE: missing") {
			t.Errorf("FromSettings(%s without its profile) = %v", provider, err)
		}
	}
	// A name far from every profile speaks plain openai, as before.
	other := map[string]string{}
	for k, v := range env {
		other[strings.Replace(k, "__OPENAI__", "__MYPROXY__", 1)] = v
	}
	if _, err := polygateway.LoadSettings("LLM", other); err != nil {
		t.Errorf("MYPROXY: %v", err)
	}
}
