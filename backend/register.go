// Package backend is where backends of the governance ports (package core's
// Limiter, Breaker, Admitter, Cache and TelemetrySink) make themselves
// available by name: like a database/sql driver, a package registers its
// backends in init and a program links it with a blank import; the
// PGW_*_BACKEND keys then name them. The built-in ones live in the
// subpackages (memory, redisstore).
package backend

import (
	"log/slog"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/registry"
)

// Context is what a registered backend's factory is given when a client
// that names it is assembled.
type Context struct {
	a *registry.Assembly
}

// Settings returns the settings of the scope being assembled.
func (b Context) Settings() core.GatewaySettings { return b.a.Settings }

// Logger returns the client's logger.
func (b Context) Logger() *slog.Logger { return b.a.Logger }

// Shared returns the resource stored under key for this client's
// assembly, creating it with mk on first use: the backends of one client
// (its limiter, breaker and cache) share one connection pool this way. A
// resource that implements io.Closer is closed when the client closes.
func (b Context) Shared(key string, mk func() (any, error)) (any, error) {
	return b.a.Shared(key, mk)
}

// RegisterLimiter makes a Limiter backend available under name, for
// PGW_LIMITER_BACKEND=name: like a database/sql driver, a package
// registers its backends in init and a program links it with a blank
// import. Registering a name twice, an empty name, or a built-in one
// ("memory", "none") panics: it is a programming error.
func RegisterLimiter(name string, factory func(Context) (core.Limiter, error)) {
	register(registry.KindLimiter, name, factory)
}

// RegisterBreaker makes a Breaker backend available under name, for
// PGW_BREAKER_BACKEND=name (see RegisterLimiter).
func RegisterBreaker(name string, factory func(Context) (core.Breaker, error)) {
	register(registry.KindBreaker, name, factory)
}

// RegisterAdmitter makes a native admission port available under name: a
// client whose PGW_LIMITER_BACKEND and PGW_BREAKER_BACKEND both name it
// passes every attempt through it (one backend step before the attempt and
// one after) instead of composing the limiter and the breaker.
func RegisterAdmitter(name string, factory func(Context) (core.Admitter, error)) {
	register(registry.KindAdmitter, name, factory)
}

// RegisterCache makes a Cache backend available under name, for
// PGW_CACHE_BACKEND=name (see RegisterLimiter).
func RegisterCache(name string, factory func(Context) (core.Cache, error)) {
	register(registry.KindCache, name, factory)
}

// RegisterTelemetry makes a TelemetrySink available under name, for
// PGW_TELEMETRY_BACKEND=name (see RegisterLimiter). The client closes the
// sink it built when it closes.
func RegisterTelemetry(name string, factory func(Context) (core.TelemetrySink, error)) {
	register(registry.KindTelemetry, name, factory)
}

func register[T any](kind registry.Kind, name string, factory func(Context) (T, error)) {
	if name == "" || name == "memory" || name == "none" || factory == nil {
		panic("backend: Register" + string(kind) + ": an empty or built-in name, or a nil factory")
	}
	registry.Register(kind, name, func(a *registry.Assembly) (any, error) {
		return factory(Context{a: a})
	})
}
