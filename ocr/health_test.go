package ocr_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
)

func TestCheckHealth(t *testing.T) {
	t.Parallel()
	healthy := newFake(t)
	var slow []string
	for range 6 {
		f := newFake(t)
		f.SetFaults(ocrfake.Faults{HealthDelay: 10 * time.Second})
		slow = append(slow, f.URL)
	}
	// A slow /ocr/text must not matter: health is its own endpoint.
	busy := newFake(t)
	busy.SetFaults(ocrfake.Faults{Delay: 10 * time.Second})
	const probe = 400 * time.Millisecond
	c := newClient(t, ocr.Config{HealthTimeout: probe}, nil,
		append([]string{healthy.URL, refusedURL(t), busy.URL}, slow...))

	start := time.Now()
	got := c.CheckHealth(t.Context())
	took := time.Since(start)
	want := map[string]bool{
		"monkey_1": true, "monkey_2": false, "monkey_3": true,
		"monkey_4": false, "monkey_5": false, "monkey_6": false, "monkey_7": false, "monkey_8": false, "monkey_9": false,
	}
	if !maps.Equal(got, want) {
		t.Errorf("CheckHealth = %v, want %v", got, want)
	}
	// Six slow sources probed one after the other would take 2.4 s.
	if took < probe || took > 7*probe/2 {
		t.Errorf("CheckHealth took %v, want about one probe timeout (%v)", took, probe)
	}
	if n := healthy.Count(ocrfake.EndpointHealth); n != 1 {
		t.Errorf("healthy source got %d probes, want 1", n)
	}
	// Probes bypass the engine: no in-flight attempts, breakers untouched.
	for _, s := range c.Sources(t.Context()) {
		if s.InFlight != 0 || s.Breaker.ConsecutiveFailures != 0 {
			t.Errorf("%s: in flight %d, failures %v after health probes", s.Name, s.InFlight, s.Breaker.ConsecutiveFailures)
		}
	}
}

func TestCheckHealthProbeIsCappedByTheSourceTimeout(t *testing.T) {
	t.Parallel()
	slow := newFake(t)
	slow.SetFaults(ocrfake.Faults{HealthDelay: 10 * time.Second})
	c := newClient(t, ocr.Config{}, map[string]string{"OCR__MONKEY__1__TIMEOUT_S": "0.2"}, urls(slow))
	start := time.Now()
	got := c.CheckHealth(t.Context())
	if got["monkey_1"] {
		t.Errorf("CheckHealth = %v, want monkey_1 false", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v, want about the 0.2 s source timeout (not the 5 s default)", d)
	}
}

func TestCheckHealthCancelled(t *testing.T) {
	t.Parallel()
	slow := newFake(t)
	slow.SetFaults(ocrfake.Faults{HealthDelay: 10 * time.Second})
	c := newClient(t, ocr.Config{}, nil, urls(slow))
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if got := c.CheckHealth(ctx); got["monkey_1"] || len(got) != 1 {
		t.Errorf("CheckHealth = %v, want {monkey_1: false}", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v after the context ended", d)
	}
}

// TestCheckHealthOfANilContextOrAClosedClientProbesNothing: a nil context
// (which used to crash the process from a probe's goroutine) and a client
// after Close report every source false without a request, so that an
// "all true" start gate never passes for them.
func TestCheckHealthOfANilContextOrAClosedClientProbesNothing(t *testing.T) {
	t.Parallel()
	healthy := newFake(t)
	c := newClient(t, ocr.Config{}, nil, urls(healthy))
	want := map[string]bool{"monkey_1": false}
	var noCtx context.Context // nil
	if got := c.CheckHealth(noCtx); !maps.Equal(got, want) {
		t.Errorf("CheckHealth(nil) = %v, want %v", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := c.CheckHealth(t.Context()); !maps.Equal(got, want) {
		t.Errorf("CheckHealth after Close = %v, want %v", got, want)
	}
	if n := healthy.Count(ocrfake.EndpointHealth); n != 0 {
		t.Errorf("%d health probes sent, want none", n)
	}
}
