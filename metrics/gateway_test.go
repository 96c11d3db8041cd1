package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newGateway(t *testing.T) (*Gateway, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	g, err := NewGateway(reg)
	if err != nil {
		t.Fatal(err)
	}
	return g, reg
}

func TestGatewayCountsRequestsRefusalsAndReloads(t *testing.T) {
	t.Parallel()
	g, reg := newGateway(t)
	g.ObserveRequest("/v1/chat/completions", 200, "key-0123456789ab")
	g.ObserveRequest("/v1/chat/completions", 499, "")
	g.ObserveRequest("unmatched", 404, "")
	g.ObserveRefusal("auth")
	g.ObserveRefusal("made-up")
	g.ObserveReload(true)
	g.ObserveReload(false)
	g.ObserveReload(false)
	for _, c := range []struct {
		got  float64
		want float64
	}{
		{testutil.ToFloat64(g.requests.WithLabelValues("/v1/chat/completions", "2xx", "key-0123456789ab")), 1},
		{testutil.ToFloat64(g.requests.WithLabelValues("/v1/chat/completions", "4xx", "none")), 1},
		{testutil.ToFloat64(g.requests.WithLabelValues("unmatched", "4xx", "none")), 1},
		{testutil.ToFloat64(g.refusals.WithLabelValues("auth")), 1},
		{testutil.ToFloat64(g.refusals.WithLabelValues("other")), 1},
		{testutil.ToFloat64(g.refusals.WithLabelValues("in_flight")), 0},
		{testutil.ToFloat64(g.reloads.WithLabelValues(ReloadApplied)), 1},
		{testutil.ToFloat64(g.reloads.WithLabelValues(ReloadRefused)), 2},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestGatewayDocumentedNamesMatchExported(t *testing.T) {
	t.Parallel()
	g, reg := newGateway(t)
	g.ObserveRequest("/v1/models", 200, "")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	src, err := os.ReadFile("gateway.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(polygateway_[a-z_]+)\s+(counter|gauge)\s`).FindAllStringSubmatch(string(src), -1) {
		doc = append(doc, m[1])
	}
	slices.Sort(got)
	slices.Sort(doc)
	if !slices.Equal(got, doc) {
		t.Errorf("exported %v\ndocumented %v", got, doc)
	}
}

func TestGatewayStatusClasses(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{200: "2xx", 204: "2xx", 301: "3xx", 401: "4xx", 499: "4xx", 503: "5xx", 0: "other", 99: "other", 600: "other"} {
		if got := statusClass(status); got != want {
			t.Errorf("statusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestGatewayRegistersOnceAndTakesANamespace(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := NewGateway(reg, WithNamespace("edge")); err != nil {
		t.Fatal(err)
	}
	if _, err := NewGateway(reg, WithNamespace("edge")); err == nil {
		t.Error("a second registration with the same namespace succeeded")
	}
	if _, err := NewGateway(reg, WithNamespace("bad-name")); err == nil {
		t.Error("an invalid namespace was accepted")
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "edge_") {
			t.Errorf("%s lacks the namespace", mf.GetName())
		}
	}
}
