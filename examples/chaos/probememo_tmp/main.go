// Temporary experiment (to be deleted): how long is a recovered source
// avoided after its half-open probe?
package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/fakeupstream"
)

func main() {
	start := time.Now()
	// A: 503 for the first 300 ms, then healthy (50 ms).
	a := fakeupstream.New(fakeupstream.WithFunc(func(r fakeupstream.RequestInfo) fakeupstream.Behavior {
		if r.Arrival.Sub(start) < 300*time.Millisecond {
			return fakeupstream.ServerError(503)
		}
		return fakeupstream.OK().WithLatency(50 * time.Millisecond)
	}))
	defer a.Close()
	b := fakeupstream.New(fakeupstream.WithBehavior(fakeupstream.OK().WithLatency(50 * time.Millisecond)))
	defer b.Close()
	env := map[string]string{
		"LLM__A__1__BASE_URL": a.URL(), "LLM__A__1__API_KEY": "k", "LLM__A__1__MODEL": "m", "LLM__A__1__TIMEOUT_S": "5",
		"LLM__B__2__BASE_URL": b.URL(), "LLM__B__2__API_KEY": "k", "LLM__B__2__MODEL": "m", "LLM__B__2__TIMEOUT_S": "5",
		"LLM__SELECTOR": "round_robin", "LLM__RETRY__MAX_ATTEMPTS": "4",
		"LLM__RETRY__BACKOFF_BASE_S": "0.01", "LLM__RETRY__BACKOFF_MAX_S": "0.05",
		"LLM__BREAKER__FAIL_THRESHOLD": "3", "LLM__BREAKER__COOLDOWN_S": "0.2",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for !stop.Load() {
				_, _ = c.Chat(context.Background(), []polygateway.Message{polygateway.User(fmt.Sprint(time.Now().UnixNano()))})
			}
		})
	}
	for range 14 {
		time.Sleep(500 * time.Millisecond)
		var st string
		for _, s := range c.Sources(context.Background()) {
			if s.Name == "a_1" {
				st = fmt.Sprintf("breaker=%s opens=%d", s.Breaker.State, s.Breaker.Opens)
			}
		}
		fmt.Printf("t=%4.1fs  a_1 requests=%4d  b_2 requests=%5d  %s\n", time.Since(start).Seconds(), a.Requests(), b.Requests(), st)
	}
	stop.Store(true)
	wg.Wait()
}
