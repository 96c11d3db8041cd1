package streamhandler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/streamhandler"
	"github.com/polygateway/polygateway/polygatewaytest"
)

// event is one SSE event the handler wrote, with when it was read.
type event struct {
	name, data string
	at         time.Time
}

// serve runs the handler in front of the fakes (one source each, in order
// of preference) and returns its URL.
func serve(t *testing.T, fakes ...*polygatewaytest.Server) string {
	t.Helper()
	env := map[string]string{}
	for i, f := range fakes {
		maps.Copy(env, f.Env("CHAT", polygatewaytest.EnvSource("openai", i+1), polygatewaytest.EnvField("PRIORITY", string(rune('0'+i)))))
	}
	client, err := polygateway.FromEnv("CHAT", polygateway.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	ts := httptest.NewServer(&streamhandler.Handler{Client: client})
	t.Cleanup(ts.Close)
	return ts.URL
}

// ask posts a question and reads the events until the stream ends.
func ask(t *testing.T, ctx context.Context, url string) (*http.Response, []event) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("why?"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []event
	sc := bufio.NewScanner(resp.Body)
	var cur event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur = event{name: strings.TrimPrefix(line, "event: ")}
		case strings.HasPrefix(line, "data: "):
			cur.data, cur.at = strings.TrimPrefix(line, "data: "), time.Now()
			out = append(out, cur)
		}
	}
	return resp, out
}

// text joins the content of the delta events.
func text(t *testing.T, evs []event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range evs {
		if e.name != "delta" {
			continue
		}
		var d struct{ Content string }
		if err := json.Unmarshal([]byte(e.data), &d); err != nil {
			t.Fatal(err)
		}
		b.WriteString(d.Content)
	}
	return b.String()
}

func TestTheFirstPieceReachesTheUserBeforeTheAnswerIsComplete(t *testing.T) {
	t.Parallel()
	paced := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.OK().WithTokens(8).WithInterTokenDelay(50*time.Millisecond)))
	resp, evs := ask(t, t.Context(), serve(t, paced))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || len(evs) < 3 {
		t.Fatalf("%d %v: %v", resp.StatusCode, resp.Header, evs)
	}
	last := evs[len(evs)-1]
	if last.name != "done" || !strings.Contains(last.data, `"source":"openai_1"`) {
		t.Fatalf("last event %+v, want done from openai_1", last)
	}
	if gap := last.at.Sub(evs[0].at); gap < 200*time.Millisecond {
		t.Fatalf("the first piece came only %v before the end: it was not relayed as it was generated", gap)
	}
	if got, want := text(t, evs), polygatewaytest.Tokens(8); got != want {
		t.Fatalf("the user got %q, want %q", got, want)
	}
}

func TestASourceThatFailsBeforeItsFirstTokenIsReplacedUnseen(t *testing.T) {
	t.Parallel()
	down := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.ServerError(503)))
	up := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.OK().WithTokens(5)))
	resp, evs := ask(t, t.Context(), serve(t, down, up))
	if resp.StatusCode != http.StatusOK || evs[len(evs)-1].name != "done" || !strings.Contains(evs[len(evs)-1].data, `"source":"openai_2"`) {
		t.Fatalf("%d: %v", resp.StatusCode, evs)
	}
	if got, want := text(t, evs), polygatewaytest.Tokens(5); got != want {
		t.Fatalf("the user got %q, want the fallback's answer once: %q", got, want)
	}
}

func TestNoSourceIsAPlainStatusWithRetryAfter(t *testing.T) {
	t.Parallel()
	dead := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.BadKey()))
	resp, _ := ask(t, t.Context(), serve(t, dead))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestAUserWhoLeavesEndsTheUpstreamCall(t *testing.T) {
	t.Parallel()
	slow := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.OK().WithTokens(100).WithInterTokenDelay(50*time.Millisecond)))
	url := serve(t, slow)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("why?"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "event: delta") {
		t.Fatalf("first line %q (%v)", line, err)
	}
	cancel()
	_ = resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for slow.InFlight() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the upstream call still runs 5 s after the user left")
		}
		time.Sleep(10 * time.Millisecond) // polling the fake's state, not timing behaviour
	}
}
