// Package registry is the one piece of package-level state in the module:
// the table of opt-in backends (redis, sqlite, postgres). An adapter package
// registers its factories in init, like a database/sql driver; the client
// looks them up when the configuration names them.
package registry

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// Kind is the port a backend implements.
type Kind string

// Backend kinds.
const (
	KindLimiter   Kind = "limiter"
	KindBreaker   Kind = "breaker"
	KindCache     Kind = "cache"
	KindTelemetry Kind = "telemetry"
	// KindAdmitter is a native admission port: used when the limiter and
	// the breaker are configured with the same backend name.
	KindAdmitter Kind = "admitter"
)

// Assembly is the context of one client's assembly, handed to factories. It
// lets the backends of one client share a resource (one Redis pool for the
// limiter, breaker and cache) without package-level state. Not safe for
// concurrent use: assembly is sequential.
type Assembly struct {
	Settings core.GatewaySettings
	Logger   *slog.Logger
	shared   map[string]any
	closers  []io.Closer
}

// NewAssembly returns an assembly context for settings.
func NewAssembly(s core.GatewaySettings, logger *slog.Logger) *Assembly {
	return &Assembly{Settings: s, Logger: logger, shared: map[string]any{}}
}

// Shared returns the resource stored under key, creating it with mk on first
// use. A resource that implements io.Closer is closed by Close.
func (a *Assembly) Shared(key string, mk func() (any, error)) (any, error) {
	if v, ok := a.shared[key]; ok {
		return v, nil
	}
	v, err := mk()
	if err != nil {
		return nil, err
	}
	a.shared[key] = v
	if c, ok := v.(io.Closer); ok {
		a.closers = append(a.closers, c)
	}
	return v, nil
}

// Closers returns the shared resources to close when the client closes, in
// creation order.
func (a *Assembly) Closers() []io.Closer { return append([]io.Closer(nil), a.closers...) }

// Factory builds a backend for an assembly. It returns a core.Limiter,
// core.Breaker, core.Cache, core.TelemetrySink or core.Admitter according
// to its kind.
type Factory func(a *Assembly) (any, error)

var (
	mu        sync.RWMutex
	factories = map[Kind]map[string]Factory{}
)

// Register makes a backend available under name for kind. Registering the
// same kind and name twice panics: it is a programming error in init.
func Register(kind Kind, name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	m := factories[kind]
	if m == nil {
		m = map[string]Factory{}
		factories[kind] = m
	}
	if _, dup := m[name]; dup {
		panic(fmt.Sprintf("polygateway: registry: %s backend %q registered twice", kind, name))
	}
	m[name] = f
}

// Lookup returns the factory registered for kind and name.
func Lookup(kind Kind, name string) (Factory, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := factories[kind][name]
	return f, ok
}

// ImportPath returns the package a program must import to link the opt-in
// backend name, or "" when name is not an opt-in backend.
func ImportPath(kind Kind, name string) string {
	switch name {
	case "redis":
		return "github.com/polygateway/polygateway/backend/redisstore"
	case "sqlite":
		return "github.com/polygateway/polygateway/telemetry/sqlitesink"
	case "postgres":
		return "github.com/polygateway/polygateway/telemetry/pgsink"
	}
	return ""
}

// Names returns the names registered for kind, sorted and comma-separated
// ("memory" included for the kinds that have it built in).
func Names(kind Kind) string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(factories[kind])+1)
	if kind == KindLimiter || kind == KindBreaker || kind == KindCache {
		names = append(names, "memory")
	}
	for n := range factories[kind] {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Known reports whether a backend is registered for kind and name.
func Known(kind Kind, name string) bool {
	_, ok := Lookup(kind, name)
	return ok
}
