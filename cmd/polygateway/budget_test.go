package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// pricedGateway starts the gateway with one client key, a client budget of
// usd and the scope LLM's source (model one-model) on up, priced at 100
// USD per million output tokens and nothing for input.
func pricedGateway(t *testing.T, up *fakeupstream.Server, usd string) string {
	t.Helper()
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"one-model": {"input_per_1m": 0, "output_per_1m": 100}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return gatewayOn(t, up, map[string]string{
		"PGW_PRICING_PATH": prices, "PGW_CLIENT_KEYS": "key-a", "PGW_CLIENT_BUDGET_USD": usd,
	})
}

// chatAs posts body as client key-a and returns the status and the body.
func chatAs(t *testing.T, base, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer key-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestTheGatewayReservesWhatTheRequestsOutputLimitAllows: a request's
// max_tokens (or max_completion_tokens) is what its budget reservation
// prices, as in the library: at 100 USD per million output tokens a 0.099
// USD budget takes 16 reservations of 60 tokens (it took none when every
// answer was priced as 1,024 tokens).
func TestTheGatewayReservesWhatTheRequestsOutputLimitAllows(t *testing.T) {
	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		t.Run(field, func(t *testing.T) {
			up := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(60)))
			base := pricedGateway(t, up, "0.099")
			body := `{"model":"gpt-4o","stream":false,"` + field + `":60,"messages":[{"role":"user","content":"hi"}]}`
			served := 0
			for range 20 {
				status, b := chatAs(t, base, body)
				if status != http.StatusOK {
					if status != http.StatusTooManyRequests || !strings.Contains(string(b), "budget_exhausted") {
						t.Fatalf("status %d: %s", status, b)
					}
					break
				}
				served++
			}
			if served != 16 {
				t.Errorf("served %d calls of 60 tokens at 6,000 micro-USD against 99,000, want 16", served)
			}
		})
	}
}

// TestAnAbsurdUsageThroughTheGatewayKeepsTheClientsBudget: an answer that
// claims 2^63-1 or 1e300 completion tokens on a max_tokens=100 call, to a
// streaming and a non-streaming client, is reported and settled at the
// request's bound: the client's budget is not exhausted by it.
func TestAnAbsurdUsageThroughTheGatewayKeepsTheClientsBudget(t *testing.T) {
	for _, claimed := range []string{"9223372036854775807", "1e300"} {
		for _, stream := range []string{"false", "true"} {
			t.Run(claimed+" stream="+stream, func(t *testing.T) {
				absurd := fakeupstream.OK().WithTokens(3).WithUsage(`{"prompt_tokens":5,"completion_tokens":` + claimed + `}`)
				up := fakeupstream.NewServer(t, fakeupstream.WithScript(absurd, fakeupstream.OK().WithTokens(3)))
				base := pricedGateway(t, up, "0.1") // ten reservations of 100 tokens
				body := `{"model":"gpt-4o","stream":` + stream + `,"stream_options":{"include_usage":true},"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
				if stream == "false" {
					body = `{"model":"gpt-4o","stream":false,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
				}
				status, b := chatAs(t, base, body)
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, b)
				}
				if stream == "false" {
					var r struct {
						Usage struct {
							CompletionTokens int64 `json:"completion_tokens"`
						} `json:"usage"`
					}
					if err := json.Unmarshal(b, &r); err != nil || r.Usage.CompletionTokens > 100 {
						t.Errorf("usage %+v (%v), want at most max_tokens", r.Usage, err)
					}
				} else if strings.Contains(string(b), claimed) {
					t.Errorf("the stream relayed the claimed usage: %s", b)
				}
				for i := range 5 {
					if status, b := chatAs(t, base, body); status != http.StatusOK {
						t.Fatalf("call %d after the absurd answer: status %d: %s", i+1, status, b)
					}
				}
			})
		}
	}
}
