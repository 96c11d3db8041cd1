// Package memory holds the in-process backends of the governance ports:
// Limiter (core.Limiter, with its spend budgets), Breaker (core.Breaker,
// with the operator's switch and the upstream's pushback) and Cache
// (core.Cache). There is no
// native Admitter: core.ComposeAdmitter over the Limiter and the Breaker
// is one (its PushBack reaches the Breaker's).
//
// With WithQueue the Limiter keeps a fair admission queue per scope: calls
// that find the gates full wait by class, by tenant in turn and in arrival
// order, and a freed slot is handed to the next at once (see
// docs/explanation-queue.md). A waiting call costs about 220 bytes and no
// goroutine of its own.
//
// State lives in the process's memory, so limits and circuits are per
// process: several worker processes each get their own quota. Use the Redis
// backends when processes must share.
//
// All three read time only through a core.Clock (WithClock; the wall clock
// by default) and compute their state lazily from it when called: there are
// no tickers and no background goroutines, and nothing needs closing.
// Windows, cooldowns and leases advance with the clock alone.
//
// The Limiter and the Breaker are allocation-free in steady state: once a
// scope, source, budget or circuit has been seen and its buffers have grown
// to the traffic, TryAcquire, Release, Allow and Record allocate nothing. The
// Limiter locks per scope (the global gates make a scope the unit of
// atomicity); the Breaker locks per circuit. Looking a scope or circuit up
// takes no lock at all.
//
// Scopes, sources and circuits are kept for the backend's lifetime, so
// their names should come from configuration. Budget keys may come from
// callers (a tenant's budget): a budget's spend is forgotten once its
// window has ended, so the Limiter holds the budgets of current windows
// only. The Cache is bounded by WithMaxEntries.
package memory
