// Command taskqueue is the program of docs/howto-migrate.md: a task-queue
// worker after its hand-written retry loop and circuit breaker were
// deleted. The handler makes one governed call per task and maps the
// library's errors to the queue's three outcomes — done, retry later, dead
// letter — using GatewayUnavailableError.RetryAfter as the delay.
//
// The provider (a fake on localhost) is down for the first second, so the
// first tasks are rescheduled and finish once it is back.
//
//	go run ./examples/taskqueue
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
)

// Task is one unit of work of the queue.
type Task struct {
	ID       string
	Prompt   string
	Attempts int       // deliveries so far
	NotAfter time.Time // not delivered before this time
}

// Outcome is what the worker tells the queue about a delivery.
type Outcome int

const (
	Done       Outcome = iota // acknowledge
	RetryLater                // re-deliver after Delay, without counting a business failure
	DeadLetter                // the task itself is bad: retrying cannot help
)

// handle processes one delivery of a task. It contains no retry loop, no
// sleep and no breaker: the governed call already retried, failed over and
// waited as far as its budget allowed.
func handle(ctx context.Context, client *polygateway.GatewayClient, t Task) (Outcome, time.Duration, error) {
	resp, err := client.Chat(ctx, []polygateway.Message{polygateway.User(t.Prompt)},
		polygateway.WithSessionID(t.ID)) // one session per task in telemetry

	var (
		unavailable *polygateway.GatewayUnavailableError
		backend     *polygateway.GovernanceBackendError
		rejected    *polygateway.RequestRejectedError
		invalid     *polygateway.ResultInvalidError
	)
	switch {
	case err == nil:
		fmt.Printf("  %s: done by %s after attempts %v\n", t.ID, resp.SourceName, resp.Attempts)
		return Done, 0, nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The worker is shutting down: hand the task back untouched.
		return RetryLater, 0, err
	case errors.As(err, &unavailable):
		// No usable source now. RetryAfter is the breaker's estimate; it is
		// 0 when the library has none (retry budget spent): use a floor.
		return RetryLater, max(unavailable.RetryAfter, 200*time.Millisecond), err
	case errors.As(err, &backend):
		// Redis (limiter or breaker backend) is down: nothing was sent.
		return RetryLater, 5 * time.Second, err
	case errors.As(err, &rejected), errors.As(err, &invalid):
		// The request or its answer is wrong: the same task fails the same way.
		return DeadLetter, 0, err
	default:
		// With MAX_ATTEMPTS=1 a TransientError or SourceDeadError arrives
		// here as it is; with a larger budget they never do.
		return RetryLater, time.Second, err
	}
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	provider := fakellm.New(func(r fakellm.Request) string { return "done: " + r.LastUser() })
	defer provider.Close()
	provider.Fail(http.StatusServiceUnavailable, "", "maintenance", nil)
	time.AfterFunc(time.Second, provider.Recover)

	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(map[string]string{
		"LLM__OPENAI__1__BASE_URL":     provider.BaseURL(),
		"LLM__OPENAI__1__API_KEY":      "sk-example",
		"LLM__OPENAI__1__MODEL":        "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S":    "30",
		"LLM__RETRY__MAX_ATTEMPTS":     "2",    // was: the hand-written loop over attempts
		"LLM__RETRY__BACKOFF_BASE_S":   "0.05", // was: the sleep between attempts
		"LLM__BREAKER__FAIL_THRESHOLD": "2",    // was: the hand-written breaker's threshold
		"LLM__BREAKER__COOLDOWN_S":     "0.4",  // was: its open period
		"LLM__BREAKER__MAX_COOLDOWN_S": "0.4",
		"PGW_LIMITER_BACKEND":          "memory",
		"PGW_BREAKER_BACKEND":          "memory",
		"PGW_CACHE_BACKEND":            "none",
		"PGW_TELEMETRY_BACKEND":        "none",
	}))
	if err != nil {
		return err
	}
	defer client.Close()

	queue := []Task{
		{ID: "task-1", Prompt: "Translate report 1"},
		{ID: "task-2", Prompt: "Translate report 2"},
		{ID: "task-3", Prompt: "Translate report 3"},
	}
	ctx := context.Background()
	start := time.Now()
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		if wait := time.Until(t.NotAfter); wait > 0 {
			time.Sleep(wait) // a real queue schedules instead of sleeping
		}
		t.Attempts++
		fmt.Printf("%5dms deliver %s (delivery %d)\n", time.Since(start).Milliseconds(), t.ID, t.Attempts)
		outcome, delay, err := handle(ctx, client, t)
		switch outcome {
		case RetryLater:
			fmt.Printf("  %s: retry in %v: %v\n", t.ID, delay.Round(time.Millisecond), err)
			t.NotAfter = time.Now().Add(delay)
			queue = append(queue, t)
		case DeadLetter:
			fmt.Printf("  %s: dead letter: %v\n", t.ID, err)
		}
	}
	return nil
}
