package metrics

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/polygateway/polygateway"
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
