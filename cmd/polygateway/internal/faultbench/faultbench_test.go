package main

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTheProductionProfileIsReadByTier(t *testing.T) {
	p, err := readProfile("../../../../docs/production.env")
	if err != nil {
		t.Fatal(err)
	}
	if p.scope != "LLM" || p.primary.name() != "openai_1" || p.fallback.name() != "deepseek_1" {
		t.Fatalf("scope %s, primary %s, fallback %s", p.scope, p.primary.name(), p.fallback.name())
	}
	if p.fallback.fields["CONTINUE"] != "prefill" || p.server["PGW_STREAM_COMMIT"] == "" || p.scopeKeys["RETRY__TIER_PATIENCE_S"] == "" {
		t.Fatalf("profile %+v", p)
	}
	urls := [2]string{"http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"}
	defaults := map[string]string{}
	p.gatewayEnv(defaults, "F01", false, urls, [2]map[string]string{nil, {"MODEL": "other"}})
	for k := range defaults {
		field := k[strings.LastIndex(k, "__")+2:]
		if !strings.HasPrefix(k, "F01__OPENAI__1__") && !strings.HasPrefix(k, "F01__DEEPSEEK__1__") ||
			!slices.Contains(strings.Fields("BASE_URL API_KEY MODEL TIMEOUT_S PRIORITY"), field) {
			t.Errorf("the defaults run sets %s", k)
		}
	}
	if defaults["F01__DEEPSEEK__1__MODEL"] != "other" || defaults["F01__OPENAI__1__BASE_URL"] != urls[0] {
		t.Errorf("defaults env %v", defaults)
	}
	tuned := map[string]string{}
	p.gatewayEnv(tuned, "F01", true, urls, [2]map[string]string{})
	if tuned["F01__DEEPSEEK__1__CONTINUE"] != "prefill" || tuned["F01__RETRY__TIER_PATIENCE_S"] == "" ||
		tuned["PGW_STREAM_COMMIT"] == "" || tuned["F01__OPENAI__1__API_KEY"] != "sk-faultbench-fake" {
		t.Errorf("profile env %v", tuned)
	}
	if _, ok := tuned["PGW_CLIENT_KEYS"]; ok {
		t.Error("the client keys are applied")
	}
}

func TestCallsAreClassifiedAgainstTheWholeAnswerAndTheAttempts(t *testing.T) {
	start := time.Now()
	// ok is a complete stream answered by b after a failed attempt on a.
	ok := func() *call {
		return &call{stream: true, start: start, end: start.Add(time.Second), status: http.StatusOK, done: true, text: answer,
			hdrAttempts: []string{"a", "b"}, gwFound: true, gwAttempts: []string{"a", "b"}, gwSource: "b",
			truth: []string{"a", "b"}, logFound: true, logAttempts: []string{"a", "b"}}
	}
	for name, tc := range map[string]struct {
		edit func(*call)
		want outcome
	}{
		"complete":                    {func(*call) {}, rescued},
		"truncated, ending with DONE": {func(c *call) { c.text = answer[:len(answer)/2] }, wrong},
		"cut without an error event":  {func(c *call) { c.done, c.gwFound, c.text = false, false, answer[:10] }, wrong},
		"error event, no DONE":        {func(c *call) { c.done, c.gwFound, c.lastIsError, c.errEvents = false, false, true, 1 }, cleanError},
		"error event, then DONE":      {func(c *call) { c.errEvents = 1 }, wrong},
		"a status":                    {func(c *call) { c.status, c.errCode, c.gwFound = http.StatusServiceUnavailable, "circuit_open", false }, cleanError},
		"past the budget":             {func(c *call) { c.hang, c.err = true, errStub }, wrong},
		"an attempt left out":         {func(c *call) { c.gwAttempts = []string{"b"} }, wrong},
		"the access log disagrees":    {func(c *call) { c.logAttempts = []string{"a", "a", "b"} }, wrong},
		"no access log line":          {func(c *call) { c.logFound = false }, wrong},
		"headers beyond the truth":    {func(c *call) { c.hdrAttempts = []string{"b"} }, wrong},
		"headers a prefix (stream)":   {func(c *call) { c.hdrAttempts = []string{"a"} }, rescued},
		"headers a prefix (JSON)":     {func(c *call) { c.stream, c.hdrAttempts = false, []string{"a"} }, wrong},
	} {
		c := ok()
		tc.edit(c)
		if got, why := c.judge(answer); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", name, got, why, tc.want)
		}
	}
}

var errStub = errors.New("context deadline exceeded")

func TestTheContinuerGoesOnFromThePrefill(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"tok0 tok1 tok2","prefix":true}]}`)
	text, ok := prefill(body)
	if !ok || text != "tok0 tok1 tok2" {
		t.Fatalf("prefill = %q, %v", text, ok)
	}
	if got := "tok0 tok1 tok2" + words(3, answerTokens); got != answer {
		t.Fatalf("prefill and continuation = %q, want the answer", got)
	}
	if _, ok := prefill([]byte(`{"messages":[{"role":"user","content":"hi"}]}`)); ok {
		t.Fatal("a plain request read as a continuation")
	}
}
