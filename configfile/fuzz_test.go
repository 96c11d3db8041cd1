package configfile_test

import (
	"errors"
	"os"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/configfile"
)

// FuzzParse: Parse never panics; it fails with a ConfigError naming a
// place, or returns a file whose every scope loads and whose every key has
// a path.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/gateway.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(example), minimal, "", "~", "[]", "scopes: ~", "scopes: {LLM: ~}", "a: &a [*a]",
		"scopes: {LLM: {sources: [{provider: x, extra_body: {a: [1, .5, 0x1F, ~, true, \"${V}\"]}}]}}",
		"server: {routes: {a: b, 'c=d': e}, client_keys: [a, [b]]}", "assembly: {redis_url: $$${V}$}",
		"scopes: {LLM: {<<: {selector: x}}}", "---\n---\n", "scopes: {\"\": {}}", "\t- x",
	} {
		f.Add([]byte(s))
	}
	vars := configfile.WithVariables(map[string]string{"V": "v", "OPENAI_API_KEY": "k", "REDIS_URL": "redis://h:1/0",
		"DEEPSEEK_API_KEY": "k", "GROQ_API_KEY": "k", "CLIENT_KEY_A": "a", "CLIENT_KEY_B": "b"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := configfile.Parse("fuzz.yaml", data, vars)
		if err != nil {
			var ce *polygateway.ConfigError
			if !errors.As(err, &ce) || ce.Key == "" {
				t.Fatalf("error %v is not a ConfigError naming a place", err)
			}
			return
		}
		for _, scope := range cf.Scopes() {
			if _, err := cf.Settings(scope); err != nil {
				t.Fatalf("a parsed file's scope %s does not load: %v", scope, err)
			}
		}
		for key := range cf.Env() {
			if _, ok := cf.Path(key); !ok {
				t.Fatalf("key %s has no path", key)
			}
		}
	})
}
