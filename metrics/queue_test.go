package metrics

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
)

// TestQueueWaitsAreObservedByClass: each stay in the queue lands in the
// histogram of its class, and no other.
func TestQueueWaitsAreObservedByClass(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	col.QueueWaited("LLM", polygateway.PriorityInteractive, 100*time.Millisecond)
	col.QueueWaited("LLM", polygateway.PriorityBatch, 2*time.Second)
	col.QueueWaited("LLM", polygateway.PriorityBatch, 3*time.Second)
	col.QueueWaited("LLM", polygateway.Priority(9), time.Second) // not a class: ignored
	for class, n := range map[string]int{"interactive": 1, "normal": 0, "batch": 2} {
		h := histogramCount(t, col, class)
		if h != uint64(n) {
			t.Errorf("queue_wait_seconds{class=%q} count = %d, want %d", class, h, n)
		}
	}
}

func histogramCount(t *testing.T, col *Collector, class string) uint64 {
	t.Helper()
	mfs, err := col.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "polygateway_queue_wait_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "class" && lp.GetValue() == class {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestAdmissionsAreCountedByClassAndABoundedSetOfTenants: the first
// maxTenants tenants keep their names, later ones are counted together as
// "other", and calls without a tenant as "anonymous".
func TestAdmissionsAreCountedByClassAndABoundedSetOfTenants(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	for i := range maxTenants + 50 {
		col.Admitted("LLM", polygateway.Place{Priority: polygateway.PriorityBatch, Tenant: "t" + strconv.Itoa(i)})
	}
	col.Admitted("LLM", polygateway.Place{Priority: polygateway.PriorityBatch, Tenant: "t0"})
	col.Admitted("LLM", polygateway.Place{Priority: polygateway.PriorityInteractive})
	want(t, "admissions{batch,t0}", testutil.ToFloat64(col.admissions.WithLabelValues("LLM", "batch", "t0")), 2)
	want(t, "admissions{batch,other}", testutil.ToFloat64(col.admissions.WithLabelValues("LLM", "batch", otherLabel)), 50)
	want(t, "admissions{interactive,anonymous}", testutil.ToFloat64(col.admissions.WithLabelValues("LLM", "interactive", anonymousTenant)), 1)
	if n := testutil.CollectAndCount(col.admissions); n != maxTenants+2 {
		t.Errorf("%d admission series, want %d (the named tenants, other, anonymous)", n, maxTenants+2)
	}
}

// heldUpstream answers every request once release is closed.
type heldUpstream struct{ release chan struct{} }

func (u heldUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	select {
	case <-r.Context().Done():
		return nil, r.Context().Err()
	case <-u.release:
	}
	body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// TestQueueDepthIsReadFromTheWatchedClients: while one call holds the only
// slot and two batch calls and one interactive call wait, queue_depth
// says so by class; the admissions are counted by class and tenant.
func TestQueueDepthIsReadFromTheWatchedClients(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := heldUpstream{release: make(chan struct{})}
		env := testEnv()
		env["PGW_CACHE_BACKEND"] = "none"
		maps.Copy(env, map[string]string{
			"LLM__OPENAI__1__BASE_URL": "http://held.test/v1", "LLM__OPENAI__1__API_KEY": "sk-test",
			"LLM__OPENAI__1__MODEL": "m", "LLM__OPENAI__1__TIMEOUT_S": "30", "LLM__OPENAI__1__MAX_CONCURRENCY": "1",
		})
		col := newCollector(t)
		gc := newClient(t, col, env, polygateway.WithHTTPClient(&http.Client{Transport: up}),
			polygateway.WithLimiter(memory.NewLimiter(memory.WithQueue(memory.QueueConfig{}))))
		var wg sync.WaitGroup
		for i, p := range []polygateway.Priority{polygateway.PriorityNormal, polygateway.PriorityBatch, polygateway.PriorityBatch, polygateway.PriorityInteractive} {
			wg.Go(func() {
				_, _ = gc.Chat(context.Background(), []polygateway.Message{polygateway.User("q" + strconv.Itoa(i))},
					polygateway.WithPriority(p), polygateway.WithTenant("team"))
			})
			synctest.Wait()
		}
		depth := map[string]float64{}
		mfs, err := col.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "polygateway_queue_depth" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "class" {
						depth[lp.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		if depth["batch"] != 2 || depth["interactive"] != 1 || depth["normal"] != 0 {
			t.Errorf("queue_depth = %v, want batch 2, interactive 1, normal 0", depth)
		}
		close(up.release)
		wg.Wait()
		want(t, "admissions{batch,team}", testutil.ToFloat64(col.admissions.WithLabelValues("LLM", "batch", "team")), 2)
		want(t, "admissions{interactive,team}", testutil.ToFloat64(col.admissions.WithLabelValues("LLM", "interactive", "team")), 1)
	})
}
