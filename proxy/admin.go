package proxy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// The admin endpoints need "Authorization: Bearer <AdminToken>" and are 404
// when no admin token is configured:
//
//	POST /admin/breakers/{source}/reset   close one source's breaker
//	POST /admin/breakers/reset            close every source's breaker
//	POST /admin/sources/{source}/disable  switch a source off (shared through the breaker backend)
//	POST /admin/sources/{source}/enable   switch it on again
//	GET  /admin/budgets                   every scope's and client key's budget
//
// A source is found in the scope named by the "scope" query parameter, or
// in the only scope that has a source of that name.

// switchable is what an embeddings client offers for DisableSource and
// EnableSource (embed.Client does).
type switchable interface {
	DisableSource(ctx context.Context, source string) error
	EnableSource(ctx context.Context, source string) error
}

// sourceOps are the operations on one source of one scope.
type sourceOps struct {
	scope     string
	reset     func(ctx context.Context) error
	setEnable func(ctx context.Context, on bool) error
}

// admin checks the admin token and holds the current generation for h.
func (s *Server) admin(h func(w http.ResponseWriter, r *http.Request, ri *reqInfo, g *generation)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri := info(r)
		if !s.adminOn {
			s.fail(w, ri, invalidRequest(http.StatusNotFound, "", "not_found", "admin endpoints are disabled (no admin token configured)"))
			return
		}
		if !s.adminAuthorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="polygateway-admin"`)
			s.fail(w, ri, invalidRequest(http.StatusUnauthorized, "", "invalid_admin_token", "missing or invalid admin token"))
			return
		}
		g := s.acquire()
		if g == nil {
			s.fail(w, ri, mapError(errShuttingDown, false))
			return
		}
		defer g.release()
		h(w, r, ri, g)
	}
}

// findSource returns the operations on source in the scope the request
// names, or the error to answer.
func (s *Server) findSource(r *http.Request, g *generation, source string) (sourceOps, *apiError) {
	want := r.URL.Query().Get("scope")
	var found []sourceOps
	for _, st := range s.statuses(r, g) {
		if want != "" && st.scope != want {
			continue
		}
		if !slices.ContainsFunc(st.sources, func(x polygateway.SourceStatus) bool { return x.Name == source }) {
			continue
		}
		if c, ok := g.Clients[st.scope]; ok && st.kind == "chat" {
			found = append(found, sourceOps{scope: st.scope,
				reset: func(ctx context.Context) error { return c.ResetSource(ctx, source) },
				setEnable: func(ctx context.Context, on bool) error {
					if on {
						return c.EnableSource(ctx, source)
					}
					return c.DisableSource(ctx, source)
				}})
		} else if e, ok := g.Embedders[st.scope]; ok {
			ops := sourceOps{scope: st.scope, reset: func(ctx context.Context) error { return e.ResetSource(ctx, source) }}
			if sw, ok := e.(switchable); ok {
				ops.setEnable = func(ctx context.Context, on bool) error {
					if on {
						return sw.EnableSource(ctx, source)
					}
					return sw.DisableSource(ctx, source)
				}
			}
			found = append(found, ops)
		}
	}
	switch {
	case len(found) == 0:
		return sourceOps{}, invalidRequest(http.StatusNotFound, "source", "source_not_found", "no source "+strconv.Quote(source)+scopeSuffix(want))
	case slices.ContainsFunc(found, func(o sourceOps) bool { return o.scope != found[0].scope }):
		return sourceOps{}, invalidRequest(http.StatusConflict, "scope", "ambiguous_source", "source "+strconv.Quote(source)+" exists in several scopes: add ?scope=<SCOPE>")
	}
	return joinOps(found), nil
}

// joinOps returns the operations on a source of one scope through each of
// found, its clients: a scope that serves chat and embeddings has a
// client of each, and both hold the source. It switches the source only
// when every client can.
func joinOps(found []sourceOps) sourceOps {
	if len(found) == 1 {
		return found[0]
	}
	each := func(op func(sourceOps) error) error {
		var errs []error
		for _, o := range found {
			errs = append(errs, op(o))
		}
		return errors.Join(errs...)
	}
	ops := sourceOps{scope: found[0].scope, reset: func(ctx context.Context) error {
		return each(func(o sourceOps) error { return o.reset(ctx) })
	}}
	if !slices.ContainsFunc(found, func(o sourceOps) bool { return o.setEnable == nil }) {
		ops.setEnable = func(ctx context.Context, on bool) error {
			return each(func(o sourceOps) error { return o.setEnable(ctx, on) })
		}
	}
	return ops
}

// handleResetBreaker serves POST /admin/breakers/{source}/reset: it closes
// a source's breaker at once.
func (s *Server) handleResetBreaker(w http.ResponseWriter, r *http.Request, ri *reqInfo, g *generation) {
	source := r.PathValue("source")
	ops, ae := s.findSource(r, g, source)
	if ae != nil {
		s.fail(w, ri, ae)
		return
	}
	if err := ops.reset(r.Context()); err != nil {
		s.fail(w, ri, mapError(err, r.Context().Err() != nil))
		return
	}
	ri.scope, ri.source = ops.scope, source
	s.log.Info("breaker reset by admin", "request_id", ri.id, "scope", ops.scope, "source", source)
	s.writeJSON(w, http.StatusOK, map[string]any{"reset": true, "scope": ops.scope, "source": source})
}

// resetResult is one source's line in the answer to a reset of all.
type resetResult struct {
	Scope  string `json:"scope"`
	Source string `json:"source"`
	Reset  bool   `json:"reset"`
	Error  string `json:"error,omitempty"`
}

// handleResetAll serves POST /admin/breakers/reset: it closes every
// source's breaker in every scope (a switched-off source stays off). It
// answers 200 when every reset landed, else 502 with each source's result.
func (s *Server) handleResetAll(w http.ResponseWriter, r *http.Request, ri *reqInfo, g *generation) {
	var out []resetResult
	failed := 0
	for _, st := range s.statuses(r, g) {
		for _, x := range st.sources {
			var err error
			if c, ok := g.Clients[st.scope]; ok && st.kind == "chat" {
				err = c.ResetSource(r.Context(), x.Name)
			} else if e, ok := g.Embedders[st.scope]; ok {
				err = e.ResetSource(r.Context(), x.Name)
			}
			res := resetResult{Scope: st.scope, Source: x.Name, Reset: err == nil}
			if err != nil {
				res.Error, failed = publicText(err), failed+1
			}
			out = append(out, res)
		}
	}
	s.log.Info("every breaker reset by admin", "request_id", ri.id, "sources", len(out), "failed", failed)
	status := http.StatusOK
	if failed > 0 {
		status, ri.code = http.StatusBadGateway, "reset_failed"
	}
	s.writeJSON(w, status, map[string]any{"object": "list", "data": out})
}

// handleSwitch serves POST /admin/sources/{source}/disable and /enable.
// With a Redis breaker backend the switch is shared: every gateway and
// worker on that Redis stops (or resumes) sending to the source within a
// second.
func (s *Server) handleSwitch(on bool) func(w http.ResponseWriter, r *http.Request, ri *reqInfo, g *generation) {
	return func(w http.ResponseWriter, r *http.Request, ri *reqInfo, g *generation) {
		source := r.PathValue("source")
		ops, ae := s.findSource(r, g, source)
		if ae != nil {
			s.fail(w, ri, ae)
			return
		}
		if ops.setEnable == nil {
			s.fail(w, ri, invalidRequest(http.StatusNotImplemented, "", "not_supported", "the embeddings client of scope "+ops.scope+" cannot switch sources"))
			return
		}
		if err := ops.setEnable(r.Context(), on); err != nil {
			s.fail(w, ri, mapError(err, r.Context().Err() != nil))
			return
		}
		ri.scope, ri.source = ops.scope, source
		verb := "disabled"
		if on {
			verb = "enabled"
		}
		s.log.Warn("source "+verb+" by admin", "request_id", ri.id, "scope", ops.scope, "source", source)
		s.writeJSON(w, http.StatusOK, map[string]any{"scope": ops.scope, "source": source, "enabled": on})
	}
}

// budgetBody is one budget in GET /admin/budgets.
type budgetBody struct {
	// Kind is "scope" or "client".
	Kind  string `json:"kind"`
	Scope string `json:"scope,omitempty"`
	// Key is the budget's key: scope:LLM, client:key-<digest>.
	Key          string    `json:"key"`
	LimitUSD     float64   `json:"limit_usd"`
	SpentUSD     float64   `json:"spent_usd"`
	RemainingUSD float64   `json:"remaining_usd"`
	WindowS      int64     `json:"window_s"`
	WindowStart  time.Time `json:"window_start"`
	WindowEnd    time.Time `json:"window_end"`
}

func newBudgetBody(kind, scope string, u core.BudgetUsage) budgetBody {
	return budgetBody{Kind: kind, Scope: scope, Key: u.Key, LimitUSD: float64(u.Limit) / 1e6, SpentUSD: float64(u.Spent) / 1e6,
		RemainingUSD: float64(u.Remaining()) / 1e6, WindowS: int64(u.Window / time.Second),
		WindowStart: u.WindowStart.UTC(), WindowEnd: u.WindowEnd.UTC()}
}

// handleBudgets serves GET /admin/budgets: the current window of every
// chat scope's budget and, with client budgets, of every client key's.
func (s *Server) handleBudgets(w http.ResponseWriter, r *http.Request, ri *reqInfo, g *generation) {
	out, err := s.budgets(r.Context(), g)
	if err != nil {
		s.fail(w, ri, mapError(err, r.Context().Err() != nil))
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// budgets reads every budget of g: the scopes' through their clients, then
// the client keys' (ClientBudgets).
func (s *Server) budgets(ctx context.Context, g *generation) ([]budgetBody, error) {
	out := []budgetBody{}
	var errs []error
	for _, scope := range g.chatScopes() {
		cs := g.chat[scope]
		us, err := cs.k.Budgets(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, u := range us {
			out = append(out, newBudgetBody("scope", scope, u))
		}
	}
	us, err := s.ClientBudgets(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, u := range us {
		out = append(out, newBudgetBody("client", "", u))
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
