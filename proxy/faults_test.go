package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// The fault behaviour of the library (faults_test.go and behaviour_test.go
// of the root package), seen by a client of the gateway: every case goes
// through POST /v1/chat/completions with the library's defaults, except
// the TIMEOUT_S every source needs.

// defaultsGateway serves scope LLM, routed as gpt-4o, from sources of e
// with the library's own retry backoff (source shortens it).
func defaultsGateway(t *testing.T, e env) *fixture {
	t.Helper()
	delete(e, "LLM__RETRY__BACKOFF_BASE_S")
	delete(e, "LLM__RETRY__BACKOFF_MAX_S")
	cfg := proxy.Config{}
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	return serve(t, cfg)
}

// faultAnswer is what a client of the gateway received.
type faultAnswer struct {
	status   int
	source   string
	attempts []string
	content  string
	code     string // the error code of an error answer
	latency  time.Duration
}

// askGateway sends one chat completion for gpt-4o with the user message
// msg (streamed or not) and reads the answer.
func askGateway(t *testing.T, f *fixture, stream bool, msg string) faultAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": msg}}})
	start := time.Now()
	resp, raw := f.do("POST", "/v1/chat/completions", string(body))
	a := faultAnswer{status: resp.StatusCode, source: resp.Header.Get("X-PolyGateway-Source"), latency: time.Since(start)}
	if h := resp.Header.Get("X-PolyGateway-Attempts"); h != "" {
		a.attempts = strings.Split(h, ",")
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("status %d with a body that is not an error object: %s", resp.StatusCode, raw)
		}
		a.code = e.Error.Code
		return a
	}
	if stream {
		events := sseEvents(raw)
		if lastEvent(events) != "[DONE]" || countErrorEvents(events) != 0 {
			t.Fatalf("a 200 stream that did not complete: %s", raw)
		}
		a.content = streamText(t, events)
		return a
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("body %s (%v)", raw, err)
	}
	a.content = out.Choices[0].Message.Content
	return a
}

// providerBreakers returns the breaker state of every source, by name, as
// GET /v1/providers shows it.
func providerBreakers(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	resp, body := f.do("GET", "/v1/providers", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/providers: %d %s", resp.StatusCode, body)
	}
	var prov struct {
		Data []struct {
			Name    string `json:"name"`
			Breaker struct {
				State               string  `json:"state"`
				ConsecutiveFailures float64 `json:"consecutive_failures"`
			} `json:"breaker"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &prov); err != nil {
		t.Fatalf("providers %s: %v", body, err)
	}
	out := map[string]string{}
	for _, p := range prov.Data {
		out[p.Name] = fmt.Sprintf("%s/%g", p.Breaker.State, p.Breaker.ConsecutiveFailures)
	}
	return out
}

func TestFaultA500OnceIsRetriedOnTheTierZeroPrimaryThroughTheGateway(t *testing.T) {
	t.Parallel()
	primary := fake(t, fakeupstream.WithScript(fakeupstream.ServerError(500), fakeupstream.OK()))
	fallback := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 1, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1"))
	a := askGateway(t, f, false, "hello")
	if a.status != http.StatusOK || a.source != "primary_1" || a.content != fakeupstream.Tokens(8) {
		t.Fatalf("answer %+v, want the primary's", a)
	}
	if got := strings.Join(a.attempts, ","); got != "primary_1,primary_1" || primary.Requests() != 2 || fallback.Requests() != 0 {
		t.Fatalf("X-PolyGateway-Attempts %q, primary %d requests, fallback %d; want primary_1,primary_1 and nothing on the fallback",
			got, primary.Requests(), fallback.Requests())
	}
}

func TestFaultA429WithRetryAfterOneWaitsForTheTierZeroPrimaryThroughTheGateway(t *testing.T) {
	t.Parallel()
	primary := fake(t, fakeupstream.WithScript(fakeupstream.RateLimited("1"), fakeupstream.OK()))
	fallback := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 1, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1"))
	a := askGateway(t, f, true, "hello")
	if a.status != http.StatusOK || a.source != "primary_1" || a.content != fakeupstream.Tokens(8) || fallback.Requests() != 0 {
		t.Fatalf("answer %+v, fallback %d requests; want the primary's and nothing on the fallback", a, fallback.Requests())
	}
	arr := primary.Arrivals()
	if len(arr) != 2 {
		t.Fatalf("primary got %d requests, want 2", len(arr))
	}
	gap := arr[1].Sub(arr[0])
	t.Logf("second primary attempt %v after the 429", gap)
	if gap < 900*time.Millisecond {
		t.Errorf("second primary attempt %v after the first, want >= 0.9 s (Retry-After: 1)", gap)
	}
}

func TestFaultA429WithALongRetryAfterFailsOverAtOnceThroughTheGateway(t *testing.T) {
	t.Parallel()
	primary := fake(t, fakeupstream.WithScript(fakeupstream.RateLimited("30"), fakeupstream.OK()))
	fallback := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 1, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1"))
	a := askGateway(t, f, false, "hello")
	t.Logf("answered by %s in %v", a.source, a.latency)
	if a.status != http.StatusOK || a.source != "fallback_1" || a.content != fakeupstream.Tokens(8) {
		t.Fatalf("answer %+v, want the fallback's", a)
	}
	if got := strings.Join(a.attempts, ","); got != "primary_1,fallback_1" || primary.Requests() != 1 {
		t.Fatalf("X-PolyGateway-Attempts %q, primary %d requests; want primary_1,fallback_1", got, primary.Requests())
	}
	// Retry-After: 30 is beyond the tier patience: the call does not wait
	// for it. The bound is far from 30 s and far above a loaded machine.
	if a.latency > 10*time.Second {
		t.Errorf("the call took %v, want the fallback at once (well under the 30 s Retry-After)", a.latency)
	}
}

func TestFaultA503ForeverOnThePrimaryIsServedByTheFallbackWithoutWaitingEveryCall(t *testing.T) {
	t.Parallel()
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	fallback := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 1, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1"))
	const calls = 8
	seen := make([]int, calls) // the primary's requests after each call
	for i := range calls {
		a := askGateway(t, f, i%2 == 1, "hello")
		if a.status != http.StatusOK || a.source != "fallback_1" || a.content != fakeupstream.Tokens(8) {
			t.Fatalf("call %d: %+v, want the fallback's answer", i, a)
		}
		seen[i] = primary.Requests()
		t.Logf("call %d: attempts %v in %v", i, a.attempts, a.latency)
	}
	// The first call retries the primary in its tier (a blip of a healthy
	// source); once it is known to fail, calls stop waiting for it, and
	// once its breaker is open they stop reaching it at all.
	if seen[calls-1] != seen[calls/2-1] {
		t.Errorf("primary requests after each call %v: still growing in the second half", seen)
	}
	if n := primary.Requests(); n > 6 {
		t.Errorf("primary got %d requests over %d calls, want <= 6", n, calls)
	}
}

func TestFaultContextLengthRoutesToAnotherModelThroughTheGateway(t *testing.T) {
	t.Parallel()
	a := fake(t, fakeupstream.WithBehavior(fakeupstream.ContextLength()))
	b := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "small", 1, a.URL(), secretKey1, "model-a").
		source("LLM", "large", 1, b.URL(), secretKey2, "model-b", "PRIORITY", "1"))
	ans := askGateway(t, f, true, "hello")
	if ans.status != http.StatusOK || ans.source != "large_1" || ans.content != fakeupstream.Tokens(8) {
		t.Fatalf("answer %+v, want model B's", ans)
	}
	if a.Requests() != 1 || b.Requests() != 1 {
		t.Errorf("requests A=%d B=%d, want one each", a.Requests(), b.Requests())
	}
	if got := providerBreakers(t, f)["small_1"]; got != "closed/0" {
		t.Errorf("A's breaker is %s on /v1/providers, want closed/0: a long prompt is not the source's failure", got)
	}
}

func TestFaultContextLengthWithOnlyOneModelIsA400AfterOneAttemptThroughTheGateway(t *testing.T) {
	t.Parallel()
	a1 := fake(t, fakeupstream.WithBehavior(fakeupstream.ContextLength()))
	a2 := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "one", 1, a1.URL(), secretKey1, "model-a").
		source("LLM", "two", 1, a2.URL(), secretKey2, "model-a", "PRIORITY", "1"))
	ans := askGateway(t, f, false, "hello")
	if ans.status != http.StatusBadRequest || ans.code != "context_length_exceeded" {
		t.Fatalf("answer %+v, want 400 context_length_exceeded", ans)
	}
	if n := a1.Requests() + a2.Requests(); n != 1 {
		t.Errorf("%d attempts, want exactly 1: never resent to the same model", n)
	}
}

func TestFaultASourceWhoseContextWindowIsTooSmallGetsNoRequestThroughTheGateway(t *testing.T) {
	t.Parallel()
	small := fake(t)
	large := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "small", 1, small.URL(), secretKey1, "model-a", "CONTEXT_WINDOW", "100").
		source("LLM", "large", 1, large.URL(), secretKey2, "model-b", "PRIORITY", "1", "CONTEXT_WINDOW", "128000"))
	ans := askGateway(t, f, true, strings.Repeat("words ", 2000))
	if ans.status != http.StatusOK || ans.source != "large_1" || ans.content != fakeupstream.Tokens(8) {
		t.Fatalf("answer %+v, want the large-window source's", ans)
	}
	if small.Requests() != 0 || strings.Join(ans.attempts, ",") != "large_1" {
		t.Errorf("the small-window source got %d requests (attempts %v), want none", small.Requests(), ans.attempts)
	}
}

// The recovery promise: a preferred source down for 4 s and then healthy
// gets every call back within 10 s of its recovery, and while it was down
// it saw at most one request per second. It takes 16 s of calls, so it is
// not run with -short, nor in parallel with other tests.
func TestFaultAFlappingPrimaryGetsItsTrafficBackWithinTenSecondsThroughTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("16 s of calls")
	}
	const outage = 4 * time.Second
	primary := fake(t, fakeupstream.WithFlap(outage, time.Hour, fakeupstream.ServerError(503)))
	fallback := fake(t)
	f := defaultsGateway(t, baseEnv().source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 1, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1"))
	start := primary.Started()
	var back time.Duration
	calls := 0
	for time.Since(start) < 16*time.Second {
		at := time.Since(start)
		a := askGateway(t, f, calls%2 == 0, "hello")
		calls++
		if a.status != http.StatusOK || a.content != fakeupstream.Tokens(8) {
			t.Fatalf("call at %v: %+v", at, a)
		}
		if back == 0 && at > outage && a.source == "primary_1" {
			back = at - outage
		}
		if at > outage+10*time.Second && a.source != "primary_1" {
			t.Errorf("call at %v (%v after recovery) answered by %s, want the primary", at, at-outage, a.source)
		}
		time.Sleep(250 * time.Millisecond)
	}
	during := 0
	for _, at := range primary.Arrivals() {
		if at.Sub(start) < outage {
			during++
		}
	}
	t.Logf("%d calls; primary: %d requests during the %v outage, first call back on it %v after recovery", calls, during, outage, back)
	if during > int(outage/time.Second) {
		t.Errorf("the primary got %d requests during the %v outage, want <= 1 per second", during, outage)
	}
}

// Slow start: 200 concurrent calls to one healthy source answering in
// 300 ms, with no concurrency limit configured anywhere, all complete
// within 2.5 s: the source's adaptive limit doubles from its start every
// round trip. The gateway's own bounds are off (MaxInFlight 0, no
// per-client rate: the defaults), so they cannot cap it below 200. It
// measures a time under load, so it does not run in parallel with others.
func TestFaultSlowStartServes200ConcurrentCallsWithinTwoAndAHalfSecondsThroughTheGateway(t *testing.T) {
	srv := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithLatency(300*time.Millisecond)))
	e := baseEnv().source("LLM", "primary", 1, srv.URL(), secretKey1, "primary-model")
	delete(e, "LLM__RETRY__BACKOFF_BASE_S")
	delete(e, "LLM__RETRY__BACKOFF_MAX_S")
	cfg := proxy.Config{MaxInFlight: 0, ClientRate: 0} // no cap, no per-client limit
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	f := serve(t, cfg)

	const n = 200
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	body := chatBody("gpt-4o", false, "")
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.ts.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d concurrent 300 ms calls through the gateway took %v (the upstream saw at most %d at once)", n, took, srv.MaxInFlight())
	if srv.Requests() != n {
		t.Errorf("the upstream saw %d requests, want %d", srv.Requests(), n)
	}
	if took > 2500*time.Millisecond {
		t.Errorf("%d concurrent 300 ms calls took %v, want <= 2.5 s", n, took)
	}
}
