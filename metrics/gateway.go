package metrics

import (
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Gateway records what the OpenAI-compatible gateway (package proxy and
// the polygateway command) does with HTTP requests: it is a
// proxy.RequestObserver (give it to proxy.Config.Observer) and counts
// configuration reloads. Register it on the registry of the Collector
// whose Handler serves /metrics. Its methods are safe for concurrent use.
//
//	name                                   type     labels
//	-------------------------------------  -------  ---------------------------
//	polygateway_http_requests_total        counter  route, code, client
//	polygateway_http_refusals_total        counter  reason
//	polygateway_reloads_total              counter  result
//	polygateway_build_info                 gauge    version, revision, goversion
//
// What they mean:
//
//   - http_requests_total: every answered request. route is the path
//     pattern that served it (/v1/chat/completions, /v1/models/{id...},
//     unmatched for no route), code the status class (2xx, 4xx, 5xx…; 499
//     is a client that went away, counted as 4xx), client the client key's
//     digest id (key-…, never the key) or "none" without client keys and
//     for requests whose key was refused.
//   - http_refusals_total: requests refused before their governed call
//     could run, reason auth (client key), body_limit (413), client_rate,
//     in_flight (the in-flight cap), budget (a spend budget), memory_budget
//     (request bytes held in memory), draining (shutting down); every
//     reason is present from the start, at zero.
//   - reloads_total: configuration reloads, result applied or refused (an
//     invalid configuration, kept out).
//   - build_info: 1, with the binary's module version, VCS revision and Go
//     version as labels.
//
// Every label value comes from a closed vocabulary or the configuration
// (routes, client keys), so the series are bounded.
type Gateway struct {
	requests *prometheus.CounterVec
	refusals *prometheus.CounterVec
	reloads  *prometheus.CounterVec
	build    *prometheus.GaugeVec
}

// Refusal reasons (label reason of http_refusals_total); they are the
// proxy package's Refused* reasons.
var gatewayRefusals = [...]string{"auth", "body_limit", "client_rate", "in_flight", "budget", "memory_budget", "draining"}

// Reload results (label result of reloads_total).
const (
	ReloadApplied = "applied"
	ReloadRefused = "refused"
)

// clientNone is the client label without a client key.
const clientNone = "none"

// NewGateway builds the gateway metrics and registers them with reg (nil:
// prometheus.DefaultRegisterer). Of the options, only WithNamespace
// applies.
func NewGateway(reg prometheus.Registerer, opts ...Option) (*Gateway, error) {
	cfg := config{namespace: DefaultNamespace}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := validNamespace(cfg.namespace); err != nil {
		return nil, err
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	ns := cfg.namespace
	g := &Gateway{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "http_requests_total",
			Help: "Gateway HTTP requests answered, by route, status class and client key digest id."}, []string{"route", "code", "client"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "http_refusals_total",
			Help: "Gateway HTTP requests refused before their governed call, by reason."}, []string{lReason}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "reloads_total",
			Help: "Configuration reloads, by result (applied or refused)."}, []string{"result"}),
		build: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "build_info",
			Help: "Always 1; the labels tell the gateway's build."}, []string{"version", "revision", "goversion"}),
	}
	for _, r := range gatewayRefusals {
		g.refusals.WithLabelValues(r)
	}
	g.reloads.WithLabelValues(ReloadApplied)
	g.reloads.WithLabelValues(ReloadRefused)
	version, revision := buildVersion()
	g.build.WithLabelValues(version, revision, runtime.Version()).Set(1)
	if err := registerAll(reg, []prometheus.Collector{g.requests, g.refusals, g.reloads, g.build}, false); err != nil {
		return nil, err
	}
	return g, nil
}

// buildVersion returns the main module's version and VCS revision, or
// "unknown".
func buildVersion() (version, revision string) {
	version, revision = unknownLabel, unknownLabel
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, revision
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			revision = s.Value
		}
	}
	return version, revision
}

// ObserveRequest counts one answered request (proxy.RequestObserver).
func (g *Gateway) ObserveRequest(route string, status int, client string) {
	if client == "" {
		client = clientNone
	}
	g.requests.WithLabelValues(cleanLabel(route), statusClass(status), cleanLabel(client)).Inc()
}

// ObserveRefusal counts a request refused before governance
// (proxy.RequestObserver); an unknown reason is counted as "other".
func (g *Gateway) ObserveRefusal(reason string) {
	for _, r := range gatewayRefusals {
		if r == reason {
			g.refusals.WithLabelValues(r).Inc()
			return
		}
	}
	g.refusals.WithLabelValues(otherLabel).Inc()
}

// ObserveReload counts a configuration reload: applied, or refused.
func (g *Gateway) ObserveReload(applied bool) {
	if applied {
		g.reloads.WithLabelValues(ReloadApplied).Inc()
		return
	}
	g.reloads.WithLabelValues(ReloadRefused).Inc()
}

// statusClass is "2xx", "4xx"… of an HTTP status; 499 (client went away)
// is 4xx; anything outside 100..599 "other".
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return otherLabel
	}
	return strconv.Itoa(status/100) + "xx"
}
