package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestAWaiterOutlivesARedisRestartThatReusesItsID: a waiter of one
// process waits in line when Redis restarts empty; before that process's
// subscriber is back, a call of another process queues and is given the
// same id (the line counts from 1 again). When the subscriber is back and
// the first process asks for its waiter's state, it must not take the
// other process's entry for its own: its waiter's place is gone, it asks
// again as a new call and is admitted, rather than waiting for messages
// that go to the other process until its deadline.
func TestAWaiterOutlivesARedisRestartThatReusesItsID(t *testing.T) {
	rs := startPrivateRedis(t)
	fw := startForwarder(t, fmt.Sprintf("127.0.0.1:%d", rs.port))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	opt, err := redis.ParseURL(fw.URL())
	if err != nil {
		t.Fatal(err)
	}
	farClient := redis.NewClient(opt)
	ran := &scriptsRan{c: make(chan struct{}, 16)}
	farClient.AddHook(ran)
	t.Cleanup(func() { _ = farClient.Close() })
	far := newQueueAdmitter(t, farClient, "qrs", redisstore.QueueConfig{})
	near := newQueueAdmitter(t, privateClient(t, rs), "qrs", redisstore.QueueConfig{})
	req := core.PermitRequest{Scope: "RS", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, err := admitOnce(ctx, near, req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("%+v %v", hold, err)
	}
	waited := make(chan error, 1)
	go func() {
		tk, _, err := queueAdmit(ctx, far, req, core.Place{Tenant: "far"})
		if err == nil {
			err = finish(ctx, far, tk)
		}
		waited <- err
	}()
	waitDepth(t, ctx, near, "RS", func(d int) bool { return d == 1 })

	// Redis restarts empty while the far process is cut off.
	fw.set(linkRefuse)
	rs.restart()
	next, err := admitOnce(ctx, near, req, core.Place{})
	if err != nil || !next.Admitted() {
		t.Fatalf("%+v %v", next, err)
	}
	queued := make(chan error, 1)
	go func() {
		tk, _, err := queueAdmit(ctx, near, req, core.Place{Tenant: "near"})
		if err == nil {
			err = finish(ctx, near, tk)
		}
		queued <- err
	}()
	waitDepth(t, ctx, near, "RS", func(d int) bool { return d == 1 })
	for len(ran.c) > 0 {
		<-ran.c
	}
	fw.set(linkPass)
	// The far process's subscriber comes back and asks for its waiter's
	// state (its first script since); then the slot frees, and goes to the
	// near process's waiter.
	select {
	case <-ran.c:
	case <-ctx.Done():
		t.Fatal("the far process never asked for its waiter's state")
	}
	if err := finish(ctx, near, next); err != nil {
		t.Fatal(err)
	}
	if err := finish(ctx, near, hold); err != nil {
		t.Fatal(err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("the near waiter: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the far waiter was never admitted (it took the other process's entry for its own): %v", err)
	}
}

// scriptsRan signals on c each script a client ran that Redis answered.
type scriptsRan struct{ c chan struct{} }

func (h *scriptsRan) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptsRan) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); err == nil && (n == "evalsha" || n == "eval") {
			select {
			case h.c <- struct{}{}:
			default:
			}
		}
		return err
	}
}

func (h *scriptsRan) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAWaiterWhoseIDIsGivenAgainLapses: a waiter waits in line when the
// queue's keys are lost (Redis restarted empty, its process's connections
// back before it noticed); a new call of the same process then queues and
// is given the waiter's id again. The waiter's place is gone: it is told
// so (it asks again as a new call and is admitted), instead of being
// forgotten by its process, which now routes every word for that id to
// the new call, and waiting until its deadline.
func TestAWaiterWhoseIDIsGivenAgainLapses(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	p := newProcess(t, prefix, redisstore.QueueConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "AGAIN", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, err := admitOnce(ctx, p.a, req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("%+v %v", hold, err)
	}
	waited := make(chan error, 1)
	inLine := make(chan struct{})
	go func() {
		tk, _, err := queueAdmitNoting(ctx, p.a, req, core.Place{Tenant: "first"}, func() { close(inLine) })
		if err == nil {
			err = finish(ctx, p.a, tk)
		}
		waited <- err
	}()
	<-inLine
	deleteKeys(t, c, prefix+":*") // what a restart without persistence leaves
	next, err := admitOnce(ctx, p.a, req, core.Place{})
	if err != nil || !next.Admitted() {
		t.Fatalf("%+v %v", next, err)
	}
	queued := make(chan error, 1)
	go func() {
		tk, _, err := queueAdmit(ctx, p.a, req, core.Place{Tenant: "second"})
		if err == nil {
			err = finish(ctx, p.a, tk)
		}
		queued <- err
	}()
	waitDepth(t, ctx, p.a, "AGAIN", func(d int) bool { return d == 2 })
	if err := finish(ctx, p.a, next); err != nil {
		t.Fatal(err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("the second waiter: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the first waiter was never admitted: %v", err)
	}
}
