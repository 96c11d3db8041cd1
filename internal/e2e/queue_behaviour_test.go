package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	"github.com/polygateway/polygateway/telemetry"
)

// servedUpstream is an in-memory upstream that answers every request after
// service and records, per request, the prompt it carried and when it
// arrived and was answered (on the bubble's clock).
type servedUpstream struct {
	service time.Duration

	mu     sync.Mutex
	served []served
}

type served struct {
	prompt     string
	start, end time.Time
}

func (u *servedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	var body struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if r.Body != nil {
		err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	prompt := ""
	if len(body.Messages) > 0 {
		prompt = body.Messages[len(body.Messages)-1].Content
	}
	start := time.Now()
	t := time.NewTimer(u.service)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return nil, r.Context().Err()
	case <-t.C:
	}
	u.mu.Lock()
	u.served = append(u.served, served{prompt: prompt, start: start, end: time.Now()})
	u.mu.Unlock()
	text := fmt.Sprintf(completionBody, "answer")
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(text)), ContentLength: int64(len(text)), Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

var _ http.RoundTripper = (*servedUpstream)(nil)

// log returns the requests answered so far, in the order they arrived.
func (u *servedUpstream) log() []served {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := append([]served(nil), u.served...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].start.Before(out[j-1].start); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// queuedClient is a client of one source with MAX_CONCURRENCY limit on
// the memory backends FromEnv assembles (whose limiter queues), on an
// in-memory upstream answering after service.
func queuedClient(t *testing.T, limit int, service time.Duration, opts ...polygateway.Option) (*polygateway.GatewayClient, *servedUpstream) {
	t.Helper()
	up := &servedUpstream{service: service}
	c := testenv.Env{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__OPENAI__1__BASE_URL": "http://queued.test/v1", "LLM__OPENAI__1__API_KEY": "sk-test-queued",
		"LLM__OPENAI__1__MODEL": "queued-model", "LLM__OPENAI__1__TIMEOUT_S": "30",
		"LLM__OPENAI__1__MAX_CONCURRENCY": strconv.Itoa(limit),
	}.Client(t, append([]polygateway.Option{polygateway.WithHTTPClient(&http.Client{Transport: up})}, opts...)...)
	return c, up
}

// chatAs makes one call whose prompt names it, with opts, within a minute.
func chatAs(c *polygateway.GatewayClient, prompt string, opts ...polygateway.CallOption) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Chat(ctx, []polygateway.Message{polygateway.User(prompt)}, opts...)
	return err
}

// background runs n calls made by call(i) in goroutines, one after the
// other in arrival order (each is queued before the next starts); their
// errors go to errs.
func background(wg *sync.WaitGroup, errs chan<- error, n int, call func(i int) error) {
	for i := range n {
		wg.Go(func() {
			if err := call(i); err != nil {
				errs <- err
			}
		})
		synctest.Wait()
	}
}

// busyFor has n callers call c back to back until window has passed since
// they started, and returns how many of up's answers ended within it.
func busyFor(t *testing.T, c *polygateway.GatewayClient, up *servedUpstream, n int, window time.Duration) int {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			for time.Since(start) < window {
				if err := chatAs(c, "caller-"+strconv.Itoa(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	noErrors(t, errs)
	done := 0
	for _, s := range up.log() {
		if !s.end.After(start.Add(window)) {
			done++
		}
	}
	return done
}

func noErrors(t *testing.T, errs chan error) {
	t.Helper()
	close(errs)
	for err := range errs {
		t.Errorf("a call failed: %v", err)
	}
}

// An interactive call made while 40 batch calls wait on MAX_CONCURRENCY=2,
// 200 ms each, takes the next slot that frees: it is answered within two
// service times, sent upstream as soon as one of the two slots frees.
func TestAnInteractiveCallOvertakesFortyWaitingBatchCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const service = 200 * time.Millisecond
		c, up := queuedClient(t, 2, service)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		background(&wg, errs, 40, func(i int) error {
			return chatAs(c, "batch-"+strconv.Itoa(i), polygateway.WithPriority(polygateway.PriorityBatch))
		})
		if q := c.Sources(t.Context())[0].Queued; q[polygateway.PriorityBatch] != 38 {
			t.Errorf("Sources().Queued = %v, want 38 batch calls waiting", q)
		}
		start := time.Now()
		if err := chatAs(c, "interactive", polygateway.WithPriority(polygateway.PriorityInteractive)); err != nil {
			t.Fatalf("interactive call: %v", err)
		}
		d := time.Since(start)
		t.Logf("the interactive call was answered %v after it was made, behind 38 waiting batch calls", d)
		if d > 2*service {
			t.Errorf("the interactive call took %v, want at most two service times (%v)", d, 2*service)
		}
		wg.Wait()
		noErrors(t, errs)
		log := up.log()
		var at time.Time
		for _, s := range log {
			if s.prompt == "interactive" {
				at = s.start
			}
		}
		before := 0
		for _, s := range log {
			if s.start.Before(at) {
				before++
			}
		}
		if len(log) != 41 || at.IsZero() || before > 2 {
			t.Errorf("%d requests, %d of them sent before the interactive one; want 41, at most the 2 in service", len(log), before)
		}
	})
}

// 60 callers that keep calling keep MAX_CONCURRENCY=4 × 100 ms at 95 % of
// its capacity or more over 3 s: a freed slot is handed on at once, never
// left idle until a poll.
func TestWaitingCallersKeepTheSourceBusy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const (
			limit   = 4
			service = 100 * time.Millisecond
			window  = 3 * time.Second
		)
		c, up := queuedClient(t, limit, service)
		done := busyFor(t, c, up, 60, window)
		capacity := int(limit * window / service)
		t.Logf("%d answers in %v of a capacity of %d", done, window, capacity)
		if done*100 < capacity*95 {
			t.Errorf("%d answers in %v, want at least 95%% of the capacity of %d", done, window, capacity)
		}
	})
}

// Three tenants with 30, 10 and 2 waiting calls of one class are served in
// turn: a, b, c, a, b, c, then a and b alternately while b has calls, then
// a's.
func TestWaitingTenantsAreServedInTurn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, up := queuedClient(t, 1, 100*time.Millisecond)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		background(&wg, errs, 1, func(int) error { return chatAs(c, "first", polygateway.WithTenant("z")) })
		for _, tn := range []struct {
			name string
			n    int
		}{{"a", 30}, {"b", 10}, {"c", 2}} {
			background(&wg, errs, tn.n, func(int) error { return chatAs(c, tn.name, polygateway.WithTenant(tn.name)) })
		}
		wg.Wait()
		noErrors(t, errs)
		var got strings.Builder
		for _, s := range up.log()[1:] {
			got.WriteString(s.prompt)
		}
		want := "abcabc" + strings.Repeat("ab", 8) + strings.Repeat("a", 20)
		if got.String() != want {
			t.Errorf("tenants served in the order\n%s\nwant\n%s", got.String(), want)
		}
	})
}

// A call whose deadline cannot be met behind the calls waiting ahead of it
// ends by its deadline — at once — with a GatewayUnavailableError of
// reason queue_deadline whose RetryAfter says when it would have been
// admitted; it never reaches the upstream.
func TestACallWhoseDeadlineTheQueueCannotMeetEndsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const service = 200 * time.Millisecond
		c, up := queuedClient(t, 1, service)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		background(&wg, errs, 12, func(i int) error {
			return chatAs(c, "batch-"+strconv.Itoa(i), polygateway.WithPriority(polygateway.PriorityBatch))
		})
		// Let the queue learn its interval between admissions.
		time.Sleep(3*service + service/2)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Chat(ctx, []polygateway.Message{polygateway.User("late")}, polygateway.WithPriority(polygateway.PriorityBatch))
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("ended after %v, past its 500ms deadline", d)
		}
		var u *polygateway.GatewayUnavailableError
		if !errors.As(err, &u) || u.Reason != core.ReasonQueueDeadline || u.RetryAfter <= 500*time.Millisecond {
			t.Fatalf("err = %v, want a GatewayUnavailableError of reason queue_deadline with a RetryAfter beyond the deadline", err)
		}
		wg.Wait()
		noErrors(t, errs)
		for _, s := range up.log() {
			if s.prompt == "late" {
				t.Error("the refused call reached the upstream")
			}
		}
	})
}

// Batch calls waiting under a steady interactive load that always has
// calls waiting all complete while the load lasts: the share rule gives
// their class a slot at least once in every 11 admissions.
func TestBatchCallsCompleteUnderSteadyInteractiveLoad(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const load = 8 * time.Second
		c, up := queuedClient(t, 2, 100*time.Millisecond)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 6 {
			wg.Go(func() {
				for time.Since(start) < load {
					if err := chatAs(c, "interactive", polygateway.WithPriority(polygateway.PriorityInteractive)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		synctest.Wait()
		background(&wg, errs, 10, func(i int) error {
			return chatAs(c, "batch", polygateway.WithPriority(polygateway.PriorityBatch))
		})
		wg.Wait()
		noErrors(t, errs)
		batch, last := 0, time.Time{}
		for _, s := range up.log() {
			if s.prompt == "batch" {
				batch++
				last = s.end
			}
		}
		t.Logf("the 10th batch call was answered %v into the interactive load", last.Sub(start))
		if batch != 10 || !last.Before(start.Add(load)) {
			t.Errorf("%d batch calls answered, the last %v after the load began; want 10, within the %v of load", batch, last.Sub(start), load)
		}
	})
}

// A waiting call whose caller goes away gives its place up: the call
// behind it takes the next slot, and the cancelled call never reaches the
// upstream.
func TestACancelledWaiterFreesItsPlace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const service = 200 * time.Millisecond
		c, up := queuedClient(t, 1, service)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		start := time.Now()
		background(&wg, errs, 1, func(int) error { return chatAs(c, "first") })
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled error
		wg.Go(func() { _, cancelled = c.Chat(ctx, []polygateway.Message{polygateway.User("gone")}) })
		synctest.Wait()
		background(&wg, errs, 1, func(int) error { return chatAs(c, "next") })
		time.Sleep(service / 4)
		cancel()
		wg.Wait()
		noErrors(t, errs)
		if !errors.Is(cancelled, context.Canceled) {
			t.Errorf("the cancelled call ended with %v, want its cancellation", cancelled)
		}
		log := up.log()
		if len(log) != 2 || log[1].prompt != "next" || !log[1].start.Equal(start.Add(service)) {
			t.Errorf("upstream saw %+v; want first, then next at once when the first slot freed", log)
		}
	})
}

// The time a call waited in the queue is its telemetry row's
// queue_wait_ms: one service time for the call behind the first, none for
// the first.
func TestTheTimeWaitedInTheQueueIsInTheTelemetryRow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sink := telemetry.NewMemory()
		c, _ := queuedClient(t, 1, 200*time.Millisecond, polygateway.WithTelemetry(sink))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		background(&wg, errs, 2, func(i int) error { return chatAs(c, "call-"+strconv.Itoa(i)) })
		wg.Wait()
		noErrors(t, errs)
		rows := sink.Records()
		waits := map[float64]int{}
		for _, r := range rows {
			waits[r.QueueWaitMS]++
		}
		if len(rows) != 2 || waits[0] != 1 || waits[200] != 1 {
			t.Errorf("queue_wait_ms of the rows: %v, want one 0 and one 200", waits)
		}
	})
}

// With two sources of one tier, 2 slots each, 40 callers that keep
// calling keep both busy: a call queued on a full source tries the other
// before it waits, and every slot either frees is handed on.
func TestWaitingCallersKeepEverySourceOfTheScopeBusy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const (
			service = 100 * time.Millisecond
			window  = 2 * time.Second
		)
		up := &servedUpstream{service: service}
		e := testenv.Env{
			"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
			"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		}
		for _, n := range []string{"1", "2"} {
			p := "LLM__OPENAI__" + n + "__"
			e.Set(p+"BASE_URL", "http://queued-"+n+".test/v1", p+"API_KEY", "sk-test-queued", p+"MODEL", "queued-model",
				p+"TIMEOUT_S", "30", p+"MAX_CONCURRENCY", "2")
		}
		c := e.Client(t, polygateway.WithHTTPClient(&http.Client{Transport: up}))
		done := busyFor(t, c, up, 40, window)
		capacity := int(4 * window / service)
		t.Logf("%d answers in %v of a capacity of %d (two sources of 2 slots)", done, window, capacity)
		if done*100 < capacity*95 {
			t.Errorf("%d answers in %v, want at least 95%% of the capacity of %d", done, window, capacity)
		}
	})
}

// A call that finds the preferred tier's only slot taken is answered by
// the next tier at once, as without a queue: it does not wait in line for
// the preferred source while another is idle.
func TestACallOverflowsToAnIdleTierInsteadOfWaiting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const service = 200 * time.Millisecond
		up := &servedUpstream{service: service}
		c := testenv.Env{
			"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
			"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		}.Set(
			"LLM__OPENAI__1__BASE_URL", "http://preferred.test/v1", "LLM__OPENAI__1__API_KEY", "sk-test-1",
			"LLM__OPENAI__1__MODEL", "m", "LLM__OPENAI__1__TIMEOUT_S", "30", "LLM__OPENAI__1__PRIORITY", "0", "LLM__OPENAI__1__MAX_CONCURRENCY", "1",
			"LLM__OPENAI__2__BASE_URL", "http://spare.test/v1", "LLM__OPENAI__2__API_KEY", "sk-test-2",
			"LLM__OPENAI__2__MODEL", "m", "LLM__OPENAI__2__TIMEOUT_S", "30", "LLM__OPENAI__2__PRIORITY", "1",
		).Client(t, polygateway.WithHTTPClient(&http.Client{Transport: up}))
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		background(&wg, errs, 1, func(int) error { return chatAs(c, "first") })
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := c.Chat(ctx, []polygateway.Message{polygateway.User("second")})
		if err != nil || resp.SourceName != "openai_2" || time.Since(start) != service {
			t.Errorf("= %v, %v after %v; want openai_2's answer after one service time", resp, err, time.Since(start))
		}
		wg.Wait()
		noErrors(t, errs)
	})
}
