package core_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

const (
	printKey      = "sk-print-SECRET-0123456789abcdef"
	redisPassword = "redis-PASSWORD-42"
	pgPassword    = "pg-PASSWORD-43"
	extraSecret   = "extra-TOKEN-44"
	urlToken      = "url-TOKEN-45"
)

func printSettings() core.GatewaySettings {
	return core.GatewaySettings{
		Scope: "LLM",
		Sources: []core.SourceConfig{
			{Name: "openai_1", Provider: "openai", BaseURL: "https://user:" + urlToken + "@api.example/v1?api-version=2024-02-01&key=" + urlToken, APIKey: printKey, Model: "m", Timeout: time.Second},
			{Name: "local_1", Provider: "local", BaseURL: "http://10.0.0.1:8000/v1", APIKey: "none", Model: "l"},
		},
		RedisURL:       "redis://:" + redisPassword + "@127.0.0.1:6379/0",
		TelemetryPGDSN: "postgres://app:" + pgPassword + "@db/pgw",
		Extra:          map[string]string{"EMBED__BATCH_SIZE": "16", "OCR__PROXY_TOKEN": extraSecret},
	}
}

var printSecrets = []string{printKey, redisPassword, pgPassword, extraSecret, urlToken}

// printed renders v in every way a caller may print or log it.
func printed(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x"} {
		out[verb] = fmt.Sprintf(verb, v)
	}
	out["Sprint"] = fmt.Sprint(v)
	out["Println"] = fmt.Sprintln(v)
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("config", "cfg", v)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("config", slog.Any("cfg", v))
	out["slog text"], out["slog json"] = text.String(), js.String()
	return out
}

func TestSourceConfigAndSettingsPrintMasked(t *testing.T) {
	t.Parallel()
	s := printSettings()
	src := s.Sources[0]
	for name, v := range map[string]any{
		"SourceConfig": src, "*SourceConfig": &src, "GatewaySettings": s, "*GatewaySettings": &s,
		"[]SourceConfig": s.Sources, "struct holding settings": struct{ S core.GatewaySettings }{s},
	} {
		for how, text := range printed(t, v) {
			for _, secret := range printSecrets {
				if strings.Contains(text, secret) {
					t.Errorf("%s printed with %s shows %q: %s", name, how, secret, text)
				}
			}
		}
	}
	// The rest stays readable.
	if got := fmt.Sprintf("%+v", src); !strings.Contains(got, "Name:openai_1") || !strings.Contains(got, "APIKey:***") ||
		!strings.Contains(got, "api-version=2024-02-01") || !strings.Contains(got, "Timeout:1s") {
		t.Errorf("%%+v = %s", got)
	}
	if got := fmt.Sprintf("%#v", src); !strings.HasPrefix(got, "core.SourceConfig{Name:\"openai_1\"") {
		t.Errorf("%%#v = %s", got)
	}
	if got := fmt.Sprintf("%v", s.Sources[1]); !strings.Contains(got, "none") || !strings.Contains(got, "10.0.0.1:8000") {
		t.Errorf("a source without a key: %s", got)
	}
	if got := fmt.Sprintf("%#v", s); !strings.HasPrefix(got, "core.GatewaySettings{Scope:\"LLM\"") || !strings.Contains(got, "core.SourceConfig{") {
		t.Errorf("%%#v = %s", got)
	}
	var js bytes.Buffer
	slog.New(slog.NewJSONHandler(&js, nil)).Info("x", "settings", s)
	var rec struct {
		Settings struct {
			Scope   string                    `json:"scope"`
			Sources map[string]map[string]any `json:"sources"`
			Extra   map[string]string         `json:"extra"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(js.Bytes(), &rec); err != nil || rec.Settings.Scope != "LLM" ||
		rec.Settings.Sources["openai_1"]["api_key"] != "***" || rec.Settings.Extra["EMBED__BATCH_SIZE"] != "16" {
		t.Errorf("slog JSON = %s (%v)", js.String(), err)
	}
	// Printing never modifies the value printed.
	if s.Sources[0].APIKey != printKey || s.Extra["OCR__PROXY_TOKEN"] != extraSecret {
		t.Fatal("printing modified the settings")
	}
}
