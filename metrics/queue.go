package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// maxTenants caps the tenant label of queue_admissions_total: the first
// maxTenants tenants seen keep their names, every later one is counted
// under tenant="other". Tenants are the callers' names (WithTenant, a
// gateway's client keys), so their number is the callers' to choose.
const maxTenants = 100

// anonymousTenant is the tenant label of calls without a tenant.
const anonymousTenant = "anonymous"

// queueMetrics holds the queue children of one scope, by class.
type queueMetrics struct {
	wait [core.NumPriorities]prometheus.Observer
}

type admitKey struct {
	scope  string
	class  polygateway.Priority
	tenant string
}

// tenantSet remembers the tenants that keep their names.
type tenantSet struct {
	mu    sync.Mutex
	named map[string]bool
}

// label returns the tenant label of tenant: its name while fewer than
// maxTenants names are taken, else "other".
func (s *tenantSet) label(tenant string) string {
	if tenant == "" {
		return anonymousTenant
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.named == nil {
		s.named = make(map[string]bool)
	}
	if !s.named[tenant] {
		if len(s.named) >= maxTenants {
			return otherLabel
		}
		s.named[tenant] = true
	}
	return cleanLabel(tenant)
}

// queue returns the queue children of scope, creating them on first use.
func (c *Collector) queue(scope string) *queueMetrics {
	if m, ok := c.queues.get(scope); ok {
		return m
	}
	return c.queues.getOrCreate(scope, func() *queueMetrics {
		l := cleanLabel(scope)
		m := &queueMetrics{}
		for p := range m.wait {
			m.wait[p] = c.queueWaits.WithLabelValues(l, polygateway.Priority(p).String())
		}
		return m
	})
}

// QueueWaited records one stay of a call in the admission queue
// (core.Observer): queue_wait_seconds by class.
func (c *Collector) QueueWaited(scope string, class polygateway.Priority, d time.Duration) {
	if d < 0 || !class.Valid() {
		return
	}
	c.queue(scope).wait[class].Observe(d.Seconds())
}

// Admitted counts an attempt admitted through the gates
// (core.Observer): queue_admissions_total by class and tenant,
// the tenant label bounded by maxTenants.
func (c *Collector) Admitted(scope string, place polygateway.Place) {
	k := admitKey{scope: scope, class: place.Priority, tenant: place.Tenant}
	if !k.class.Valid() {
		k.class = polygateway.PriorityNormal
	}
	if m, ok := c.admits.get(k); ok {
		m.Inc()
		return
	}
	label := c.tenants.label(place.Tenant)
	if label == otherLabel {
		k.tenant = "\x00other"
	}
	c.admits.getOrCreate(k, func() prometheus.Counter {
		return c.admissions.WithLabelValues(cleanLabel(scope), k.class.String(), label)
	}).Inc()
}
