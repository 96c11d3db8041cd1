package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

func TestTypedCallOptionsReachTheWireWithTheProvidersFieldNames(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBodyHistory(4))
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)
	weather := polygateway.Tool{Name: "weather", Description: "the weather in a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
	_, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")},
		polygateway.WithTemperature(0.2), polygateway.WithTopP(0.9), polygateway.WithMaxTokens(64),
		polygateway.WithStop("END", "STOP"), polygateway.WithSeed(7), polygateway.WithTools(weather),
		polygateway.WithToolChoice(polygateway.ToolChoiceFunction("weather")),
		polygateway.WithResponseFormat(polygateway.ResponseFormatJSONObject),
		polygateway.WithParams(map[string]any{"user": "u-1"}))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
		t.Fatalf("%v: %s", err, srv.LastBody())
	}
	want := map[string]string{
		"temperature":     `0.2`,
		"top_p":           `0.9`,
		"max_tokens":      `64`,
		"stop":            `["END","STOP"]`,
		"seed":            `7`,
		"tools":           `[{"function":{"description":"the weather in a city","name":"weather","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}},"type":"function"}]`,
		"tool_choice":     `{"function":{"name":"weather"},"type":"function"}`,
		"response_format": `{"type":"json_object"}`,
		"user":            `"u-1"`,
	}
	for k, w := range want {
		got, _ := json.Marshal(body[k])
		if string(got) != w {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
}

func TestTypedCallOptionsArePartOfTheCacheKey(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, srv.URL()).Set("PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "t", "PGW_CACHE_TTL_S", "60").Client(t)
	msgs := []polygateway.Message{polygateway.User("same question")}
	call := func(opts ...polygateway.CallOption) bool {
		resp, err := c.Chat(context.Background(), msgs, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return resp.CacheHit
	}
	if call(polygateway.WithTemperature(0.1)) {
		t.Fatal("the first call was a hit")
	}
	if !call(polygateway.WithTemperature(0.1)) {
		t.Error("the same temperature was not a hit")
	}
	if call(polygateway.WithTemperature(0.9)) {
		t.Error("another temperature shared the cache entry")
	}
	if call(polygateway.WithTemperature(0.1), polygateway.WithSeed(3)) {
		t.Error("an added seed shared the cache entry")
	}
	if call(polygateway.WithTemperature(0.1), polygateway.WithToolChoice(polygateway.ToolChoiceNone)) {
		t.Error("an added tool choice shared the cache entry")
	}
}
