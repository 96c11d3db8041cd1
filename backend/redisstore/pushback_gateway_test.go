package redisstore_test

import (
	"sync"
	"testing"
	"time"

	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// TestSharedPushback: two clients stand in for two processes. The first
// sees the primary answer 429 (Retry-After: 2) and moves to the fallback;
// the second, which never saw a 429 itself, does not ask the primary
// before the 2 s have passed: the pushback is shared through Redis.
func TestSharedPushback(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		scope := testScope(t, tg)
		primary := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.RateLimited("2")))
		fallback := fakeupstream.NewServer(t)
		env := func() *gwEnv {
			return newGWEnv(scope, tg.url, primary).set(
				"RETRY__TIER_PATIENCE_S", "0",
				"QWEN__1__BASE_URL", fallback.URL(), "QWEN__1__API_KEY", "sk-test-b",
				"QWEN__1__MODEL", "fake-model", "QWEN__1__TIMEOUT_S", "5", "QWEN__1__PRIORITY", "1")
		}
		first, second := env().client(t), env().client(t)
		resp, err := chat(first, "hello")
		if err != nil || resp.SourceName != "qwen_1" {
			t.Fatalf("first client = (%v, %v), want the fallback", resp, err)
		}
		if n := primary.Requests(); n != 1 {
			t.Fatalf("the primary saw %d requests, want 1", n)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if resp, err := chat(second, "hello"); err != nil || resp.SourceName != "qwen_1" {
					t.Errorf("second client = (%v, %v), want the fallback", resp, err)
				}
			})
		}
		wg.Wait()
		// The pushback was recorded after the 429 left the primary, so a
		// request that came less than 2 s after the first did not honour it.
		arr := primary.Arrivals()
		for _, a := range arr[1:] {
			if d := a.Sub(arr[0]); d < 2*time.Second {
				t.Errorf("the primary was asked again %v after its 429 with Retry-After: 2 (%d requests in all)", d, len(arr))
			}
		}
	})
}
