// Temporary experiment (to be deleted): where do calls go when the healthy
// source is at its AIMD limit?
package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/fakeupstream"
)

func main() {
	sel := flag.String("sel", "round_robin", "")
	att := flag.String("att", "1", "")
	conc := flag.Int("c", 64, "")
	flag.Parse()
	h := fakeupstream.New(fakeupstream.WithBehavior(fakeupstream.OK().WithLatency(50 * time.Millisecond)))
	defer h.Close()
	f := fakeupstream.New(fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	defer f.Close()
	env := map[string]string{
		"LLM__H__1__BASE_URL": h.URL(), "LLM__H__1__API_KEY": "k", "LLM__H__1__MODEL": "m", "LLM__H__1__TIMEOUT_S": "2",
		"LLM__F__2__BASE_URL": f.URL(), "LLM__F__2__API_KEY": "k", "LLM__F__2__MODEL": "m", "LLM__F__2__TIMEOUT_S": "2",
		"LLM__SELECTOR": *sel, "LLM__RETRY__MAX_ATTEMPTS": *att,
		"LLM__RETRY__BACKOFF_BASE_S": "0.05", "LLM__RETRY__BACKOFF_MAX_S": "0.5",
		"LLM__BREAKER__FAIL_THRESHOLD": "1000000000", "LLM__BREAKER__MIN_CALLS": "1000000000",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range *conc {
		wg.Go(func() {
			for next.Add(1) <= 2000 {
				if _, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("x")}); err == nil {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("%s MAX_ATTEMPTS=%s conc=%d: success %d/2000, healthy requests %d, failing requests %d, wall %s\n",
		*sel, *att, *conc, ok.Load(), h.Requests(), f.Requests(), time.Since(t0).Round(time.Millisecond))
}
