package proxy

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// writeJSON sends v as a JSON body with status.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeAPIError(w, mapError(err, false))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

type modelBody struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// handleModels serves GET /v1/models: the routing table's model names.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	g := s.gen.Load()
	data := make([]modelBody, len(g.models))
	for i, m := range g.models {
		data[i] = modelBody{ID: m, Object: "model", OwnedBy: "polygateway"}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// handleModel serves GET /v1/models/{id}: OpenAI's model object for a
// routed model name, 404 model_not_found for any other (a default scope
// serves unlisted names but does not make them listed models).
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	g := s.gen.Load()
	if _, found := slices.BinarySearch(g.models, id); !found {
		s.fail(w, info(r), invalidRequest(http.StatusNotFound, "model", "model_not_found",
			"The model `"+shown(id)+"` does not exist or is not routed by this gateway."))
		return
	}
	s.writeJSON(w, http.StatusOK, modelBody{ID: id, Object: "model", OwnedBy: "polygateway"})
}

// scopeSources lists every scope's source statuses, chat and embeddings.
type scopeStatus struct {
	scope, kind string
	sources     []polygateway.SourceStatus
}

func (s *Server) statuses(r *http.Request, g *generation) []scopeStatus {
	var out []scopeStatus
	for _, scope := range slices.Sorted(maps.Keys(g.Clients)) {
		out = append(out, scopeStatus{scope, "chat", g.Clients[scope].Sources(r.Context())})
	}
	for _, scope := range slices.Sorted(maps.Keys(g.Embedders)) {
		out = append(out, scopeStatus{scope, "embeddings", g.Embedders[scope].Sources(r.Context())})
	}
	return out
}

// available reports whether a source can take calls now: its breaker is
// not open (half-open admits a probe) and its backends could be read.
func available(st *polygateway.SourceStatus) bool {
	return st.Err == nil && st.Breaker.State != core.StateOpen && !st.Breaker.Disabled
}

// handleHealth serves GET /healthz: liveness, always 200 while the
// process serves. It is open to anyone and so names no scope or source.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, map[string]any{"ok": true, "draining": s.draining.Load()})
}

// handleReady serves GET /readyz: 200 when every scope has at least one
// source whose breaker is not open and the server is not draining; 503
// otherwise. Only a request with the metrics or admin token sees why:
// draining, the scopes that are not ready and every source's
// availability; any other gets {"ready": …} alone.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	g := s.gen.Load()
	notReady := []string{}
	scopes := map[string]map[string]bool{}
	for _, st := range s.statuses(r, g) {
		m := scopes[st.scope] // a chat and an embeddings scope may share a name
		if m == nil {
			m = map[string]bool{}
			scopes[st.scope] = m
		}
		up := false
		for i := range st.sources {
			ok := available(&st.sources[i])
			m[st.sources[i].Name] = ok
			up = up || ok
		}
		if !up {
			notReady = append(notReady, st.scope)
		}
	}
	draining := s.draining.Load()
	ready := len(notReady) == 0 && !draining
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	if !s.opsAuthorized(r) {
		s.writeJSON(w, status, map[string]any{"ready": ready})
		return
	}
	s.writeJSON(w, status, map[string]any{"ready": ready, "draining": draining, "unavailable_scopes": notReady, "scopes": scopes})
}

type providerBody struct {
	Scope         string         `json:"scope"`
	Kind          string         `json:"kind"`
	Name          string         `json:"name"`
	Provider      string         `json:"provider"`
	Model         string         `json:"model"`
	BaseURL       string         `json:"base_url,omitempty"` // admin token only
	Priority      int            `json:"priority"`
	Weight        float64        `json:"weight"`
	Region        string         `json:"region,omitempty"`
	Available     bool           `json:"available"`
	Breaker       breakerBody    `json:"breaker"`
	InFlight      int            `json:"in_flight"`
	Health        float64        `json:"health"`
	AdaptiveLimit float64        `json:"adaptive_limit"`
	Limits        map[string]int `json:"limits"`
	Usage         map[string]int `json:"usage"`
	// Queued counts this process's calls waiting in the admission queue
	// of the source's scope, by priority class name (every source of a
	// scope shows the same counts).
	Queued map[string]int `json:"queued"`
	Error  string         `json:"error,omitempty"`
}

type breakerBody struct {
	State               string  `json:"state"`
	Epoch               uint64  `json:"epoch"`
	ConsecutiveFailures float64 `json:"consecutive_failures"`
	Opens               int     `json:"opens"`
	RetryAfterS         float64 `json:"retry_after_s"`
	ProbeHeld           bool    `json:"probe_held"`
	Disabled            bool    `json:"disabled"`
}

// handleProviders serves GET /v1/providers: every source's name, model,
// tier, weight, breaker, limits and load. Its upstream base URL — where a
// source lives — is shown only to a request carrying the admin token, and
// then without user info and query string, where keys sometimes hide; API
// keys are never part of a SourceStatus.
func (s *Server) handleProviders(w http.ResponseWriter, r *http.Request) {
	g := s.gen.Load()
	admin := s.adminAuthorized(r)
	out := []providerBody{}
	for _, st := range s.statuses(r, g) {
		for i := range st.sources {
			x := &st.sources[i]
			p := providerBody{
				Scope: st.scope, Kind: st.kind, Name: x.Name, Provider: x.Provider, Model: x.Model,
				Priority: x.Priority, Weight: x.Weight, Region: x.Region,
				Available: available(x),
				Breaker: breakerBody{State: x.Breaker.State.String(), Epoch: x.Breaker.Epoch, ConsecutiveFailures: x.Breaker.ConsecutiveFailures,
					Opens: x.Breaker.Opens, RetryAfterS: x.Breaker.RetryAfter.Seconds(), ProbeHeld: x.Breaker.ProbeHeld,
					Disabled: x.Breaker.Disabled},
				InFlight: x.InFlight, Health: x.Health, AdaptiveLimit: x.AdaptiveLimit,
				Limits: map[string]int{"max_concurrency": x.Limits.MaxConcurrency, "rpm": x.Limits.RPM, "tpm": x.Limits.TPM},
				Usage:  map[string]int{"in_flight": x.Usage.InFlight, "requests": x.Usage.Requests, "tokens": x.Usage.Tokens},
				Queued: queuedBody(x.Queued),
			}
			if admin {
				p.BaseURL = redactURL(x.BaseURL)
			}
			if x.Err != nil {
				p.Error = publicText(x.Err)
			}
			out = append(out, p)
		}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": out,
		"routes": g.Routes, "embedding_routes": g.EmbedRoutes,
		"default_scope": g.DefaultScope, "default_embedding_scope": g.DefaultEmbedScope,
	})
}

// queuedBody names the counts of a queue depth by their priority class:
// {"interactive": …, "normal": …, "batch": …}.
func queuedBody(d core.QueueDepth) map[string]int {
	out := make(map[string]int, len(d))
	for p, n := range d {
		out[core.Priority(p).String()] = n
	}
	return out
}

// redactURL drops user info, query and fragment from a base URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable)"
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment = nil, "", "", ""
	return u.String()
}

func scopeSuffix(scope string) string {
	if scope == "" {
		return ""
	}
	return " in scope " + strconv.Quote(scope)
}
