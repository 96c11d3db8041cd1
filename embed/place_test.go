package embed_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/testkit"
)

// TestEveryBatchTakesTheCallsPlaceInTheAdmissionQueue: WithPriority and
// WithTenant given to Embed reach the admission of every batch.
func TestEveryBatchTakesTheCallsPlaceInTheAdmissionQueue(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	adm := &testkit.PlaceAdmitter{Admitter: core.ComposeAdmitter(memory.NewLimiter(), memory.NewBreaker())}
	c := newClient(t, env(f.URL(), "2"), polygateway.WithAdmitter(adm))
	if _, err := c.Embed(ctxT(t), texts(5), polygateway.WithPriority(polygateway.PriorityBatch), polygateway.WithTenant("index")); err != nil {
		t.Fatalf("Embed: %v", err)
	}
	want := polygateway.Place{Priority: polygateway.PriorityBatch, Tenant: "index"}
	places := adm.Places()
	if len(places) != 3 {
		t.Fatalf("%d admissions, want one per batch (3)", len(places))
	}
	for i, p := range places {
		if p != want {
			t.Errorf("batch %d admitted with place %v, want %v", i, p, want)
		}
	}
}

// TestAnEmbedCallThatWaitedInTheQueueSaysHowLong: with the source's one
// slot held by another Embed call, a second one waits in the admission
// queue; its Response.QueueWait says how long (the gateway logs it), and
// the first, which found the slot free, waited 0.
func TestAnEmbedCallThatWaitedInTheQueueSaysHowLong(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFake(t, 4, func(f *fakeEmbed) {
		f.respond = func(req fakeReq) (int, string) {
			if req.Input[0] == "hold" {
				<-release
			}
			return http.StatusOK, string(f.answer(req))
		}
	})
	c := newClient(t, env(f.URL(), "8", "EMBED__OPENAI__1__MAX_CONCURRENCY", "1"))
	ctx := ctxT(t)
	type result struct {
		r   *embed.Response
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() { r, err := c.Embed(ctx, []string{"hold"}); first <- result{r, err} }()
	<-f.arrived
	go func() { r, err := c.Embed(ctx, []string{"waits"}); second <- result{r, err} }()
	for queued := 0; queued == 0; {
		for _, s := range c.Sources(ctx) {
			queued += s.Queued.Total()
		}
		select {
		case <-ctx.Done():
			t.Fatal("the second call never queued")
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatalf("Embed: %v, %v", a.err, b.err)
	}
	if a.r.QueueWait != 0 {
		t.Errorf("the call that found the slot free waited %v", a.r.QueueWait)
	}
	if b.r.QueueWait <= 0 {
		t.Errorf("the call that waited for the slot says it waited %v", b.r.QueueWait)
	}
}
