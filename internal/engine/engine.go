// Package engine is the governance engine: per call it runs the retry loop
// across a scope's sources, choosing a source, passing its breaker and gates
// (the Admitter) and performing the attempt on every try. What the end of an
// attempt means is decided once, in the policy table (policy.go); which
// source an attempt goes to is a Selector's choice among the eligible ones
// (select_*.go); time is read and waited on through a core.Clock.
//
// The engine is operation-agnostic: an attempt is the call's Attempt
// function (embeddings, OCR) or, without one, the chat Upstream. It is the
// innermost layer of the onion (cache → telemetry → degradation → engine).
package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/core"
)

// Config configures an Engine. The zero value of every optional field is
// valid; New copies it.
type Config struct {
	// Settings is the scope's configuration (required: at least one source).
	Settings core.GatewaySettings
	// Upstream performs the attempts of calls without an Attempt function
	// (chat). Required.
	Upstream core.Upstream
	// Limiter and Breaker are the governance backends (required): Sources
	// and Reset read them.
	Limiter core.Limiter
	Breaker core.Breaker
	// Admitter passes attempts through the breaker and the limiter.
	// Default: core.ComposeAdmitter(Limiter, Breaker).
	Admitter core.Admitter
	// InProcess is true when the admitter lives in the process and never
	// waits on I/O (the memory backends): the engine then finishes
	// attempts, shares pushback and leaves the queue without a deadline
	// of its own, sparing a timer per call. Leave it false for a backend
	// reached over the network, whose calls after an attempt must be
	// bounded.
	InProcess bool
	// Selector chooses among eligible sources. Default: the built-in named
	// by Settings.Selector.
	Selector core.Selector
	// Pricing prices answers (Cost) and candidates (cost_aware). Optional.
	Pricing core.PricingTable
	// Clock defaults to the wall clock.
	Clock core.Clock
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Observer receives attempt, refusal, wait and breaker events. Optional.
	Observer core.Observer
	// Tracer puts every attempt in a span. Optional.
	Tracer core.Tracer
}

// Engine governs the calls of one scope. It is safe for concurrent use.
type Engine struct {
	settings core.GatewaySettings
	sources  []*sourceState
	up       core.Upstream
	limiter  core.Limiter
	breaker  core.Breaker
	admitter core.Admitter
	selector core.Selector
	// healthGated is true for the built-in selectors that pick weak sources
	// only when no healthy one is eligible.
	healthGated bool
	// windows is true when a source has a CONTEXT_WINDOW.
	windows bool
	pricing core.PricingTable
	// inProcess is true when the admitter never blocks (Config.InProcess):
	// finishing needs no deadline of its own.
	inProcess bool
	// scopeBudgets holds the scope's spend budget, or is nil.
	scopeBudgets []core.Budget
	clock        core.Clock
	log          *slog.Logger
	obs          core.Observer
	tracer       core.Tracer
	// queued counts the calls waiting in the admission queue, by class.
	queued [core.NumPriorities]atomic.Int32

	// lastProgress is the unix-nano time of the last answer in the scope
	// (the stall rule reads it).
	lastProgress atomic.Int64
	// slotMu guards slotFreed, closed (and replaced) when an attempt ends
	// while calls wait for an adaptive-concurrency slot.
	slotMu      sync.Mutex
	slotFreed   chan struct{}
	slotWaiters atomic.Int32
	// warn rate-limits the warnings about backend failures after an attempt.
	warnAt atomic.Int64
}

// New builds an engine. It copies cfg.
func New(cfg Config) (*Engine, error) {
	if len(cfg.Settings.Sources) == 0 {
		return nil, errors.New("polygateway: engine: no sources")
	}
	if cfg.Upstream == nil || cfg.Limiter == nil || cfg.Breaker == nil {
		return nil, errors.New("polygateway: engine: upstream, limiter and breaker are required")
	}
	e := &Engine{
		settings:  cfg.Settings,
		up:        cfg.Upstream,
		limiter:   cfg.Limiter,
		breaker:   cfg.Breaker,
		admitter:  cfg.Admitter,
		selector:  cfg.Selector,
		pricing:   cfg.Pricing,
		clock:     cfg.Clock,
		inProcess: cfg.InProcess,
		log:       cfg.Logger,
		obs:       cfg.Observer,
		tracer:    cfg.Tracer,
	}
	if e.clock == nil {
		e.clock = core.SystemClock{}
	}
	if e.admitter == nil {
		e.admitter = core.ComposeAdmitter(e.limiter, e.breaker)
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.selector == nil {
		sel, err := Builtin(e.settings.Selector)
		if err != nil {
			return nil, err
		}
		e.selector = sel
		e.healthGated = healthGated(e.settings.Selector)
	}
	if e.settings.Retry.MaxAttempts < 1 {
		e.settings.Retry.MaxAttempts = 1
	}
	if e.settings.Backpressure.PollInterval <= 0 {
		e.settings.Backpressure.PollInterval = 250 * time.Millisecond
	}
	e.settings.Breaker.Pool = e.settings.GlobalPool
	if b := e.settings.Budget; b.Limit > 0 {
		if b.Key == "" {
			b.Key = "scope:" + e.settings.Scope
		}
		if b.Window < time.Second {
			return nil, errors.New("polygateway: engine: budget window below 1s")
		}
		e.settings.Budget = b
		e.scopeBudgets = []core.Budget{b}
	}
	e.settings.Sources = append([]core.SourceConfig(nil), cfg.Settings.Sources...)
	for _, sc := range e.settings.Sources {
		if sc.Weight <= 0 {
			sc.Weight = 1
		}
		e.sources = append(e.sources, newSourceState(sc, e.settings.Breaker, e.pricing))
		e.windows = e.windows || sc.ContextWindow > 0
	}
	e.rankGroups()
	e.lastProgress.Store(e.clock.Now().UnixNano())
	return e, nil
}

// Windows reports whether a source has a CONTEXT_WINDOW (the chat front-end
// then estimates Call.Tokens).
func (e *Engine) Windows() bool { return e.windows }

// Handle runs one governed call: core.Handler of the innermost layer. A
// call carrying Served (a cache hit) returns it without an attempt.
func (e *Engine) Handle(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
	if call.Served != nil {
		return call.Served, nil
	}
	r := run{e: e, call: call}
	return r.loop(ctx)
}

// Sources reports the state of every source. Backend read failures are
// reported in SourceStatus.Err.
func (e *Engine) Sources(ctx context.Context) []core.SourceStatus {
	out := make([]core.SourceStatus, 0, len(e.sources))
	now := e.clock.Now()
	queued := e.QueueDepth()
	for _, s := range e.sources {
		st := core.SourceStatus{
			Name: s.cfg.Name, Provider: s.cfg.Provider, Model: s.cfg.Model, BaseURL: s.cfg.BaseURL,
			Priority: s.cfg.Priority, Weight: s.cfg.Weight, Region: s.cfg.Region,
			InFlight: int(s.inflight.Load()), Health: s.health(now), AdaptiveLimit: s.aimdLimit(),
			Limits: s.cfg.Limits, Queued: queued,
		}
		snap, err := e.breaker.Snapshot(ctx, e.settings.Scope, s.cfg.Name, s.breaker)
		st.Breaker = snap
		usage, uerr := e.limiter.Usage(ctx, e.settings.Scope, s.cfg.Name)
		st.Usage = usage
		st.Err = errors.Join(err, uerr)
		out = append(out, st)
	}
	return out
}

// Reset closes the breaker of source (the operators' emergency key) and
// clears its local hold and health history. source "" resets every source
// of the scope; the first failure is returned after all were tried. A
// switched-off source stays off.
func (e *Engine) Reset(ctx context.Context, source string) error {
	var first error
	found := false
	for _, s := range e.sources {
		if source != "" && s.cfg.Name != source {
			continue
		}
		found = true
		if err := e.breaker.Reset(ctx, e.settings.Scope, s.cfg.Name, s.breaker); err != nil {
			if first == nil {
				first = &core.GovernanceBackendError{Backend: "breaker", Op: "reset", Err: err}
			}
			continue
		}
		s.reset()
		e.log.LogAttrs(ctx, slog.LevelInfo, "polygateway: breaker reset", slog.String("scope", e.settings.Scope), slog.String("source", s.cfg.Name))
	}
	if !found {
		return &core.UnknownSourceError{Scope: e.settings.Scope, Source: source}
	}
	return first
}

// SetEnabled switches source off (enabled=false) or on again, through the
// breaker backend (core.Breaker.SetEnabled), so that every process sharing the
// backend sees it: a switched-off source gets no request until it is
// switched on. This process applies it at once; others within
// disabledRecheck of their next call to the scope.
func (e *Engine) SetEnabled(ctx context.Context, source string, enabled bool) error {
	for _, s := range e.sources {
		if s.cfg.Name != source {
			continue
		}
		if err := e.breaker.SetEnabled(ctx, e.settings.Scope, source, s.breaker, enabled); err != nil {
			return &core.GovernanceBackendError{Backend: "breaker", Op: "switch", Err: err}
		}
		s.switchHold(e.clock.Now(), !enabled)
		state := "enabled"
		if !enabled {
			state = "disabled"
		}
		e.log.LogAttrs(ctx, slog.LevelWarn, "polygateway: source "+state, slog.String("scope", e.settings.Scope), slog.String("source", source))
		return nil
	}
	return &core.UnknownSourceError{Scope: e.settings.Scope, Source: source}
}
