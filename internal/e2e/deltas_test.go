package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// relay is a DeltaSink that "sends" deltas to a client: with commit, the
// first delta commits the stream (first_token policy); without, it buffers
// and drops a failed attempt's deltas (buffer policy).
type relay struct {
	mu        sync.Mutex
	commit    bool
	committed bool
	sent      strings.Builder
	resets    int
}

func (r *relay) Delta(content, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent.WriteString(content)
	if r.commit && content != "" {
		r.committed = true
	}
	return nil
}

func (r *relay) Committed() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.committed }

func (r *relay) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resets++
	if !r.committed {
		r.sent.Reset()
	}
}

func (r *relay) Delivered() (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.committed {
		return "", ""
	}
	return r.sent.String(), ""
}

func TestCommittedStreamIsNotFailedOverAndABufferedOneIs(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		cut := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(5).WithTokens(20)))
		full := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(20)))
		c := testenv.Base().Source("openai", 1, cut.URL()).Source("qwen", 2, full.URL(), "PRIORITY", "1").Client(t)
		r := &relay{commit: commit}
		k, err := kernel.Unwrap(c)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := k.Handle(context.Background(), &core.Call{
			Messages: []core.Message{core.User("x")}, Stream: true, Deltas: r,
		})
		if commit {
			var te *core.TransientError
			if !errors.As(err, &te) || resp != nil || full.Requests() != 0 {
				t.Fatalf("committed stream: err=%v resp=%v fallback requests=%d; want the cut reported, no failover", err, resp, full.Requests())
			}
			if r.sent.String() != fu.Tokens(5) {
				t.Fatalf("committed stream sent %q", r.sent.String())
			}
			continue
		}
		// Three attempts: the cut source, once more in its tier (a blip of
		// a healthy source), then the fallback.
		if err != nil || resp.Content != fu.Tokens(20) || r.sent.String() != fu.Tokens(20) || r.resets != 3 {
			t.Fatalf("buffered stream: err=%v content=%q relayed=%q resets=%d", err, resp.Content, r.sent.String(), r.resets)
		}
	}
}
