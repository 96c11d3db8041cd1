package registry

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway/core"
)

type closer struct{ closed *int }

func (c closer) Close() error { *c.closed++; return nil }

var runs atomic.Int64

func TestRegisterAndLookup(t *testing.T) {
	// The registry is process-global: a kind of its own per run keeps the
	// test true under -count=N.
	kind := Kind(fmt.Sprintf("test-%s-%d", t.Name(), runs.Add(1)))
	if _, ok := Lookup(kind, "x"); ok {
		t.Fatal("found an unregistered backend")
	}
	Register(kind, "x", func(*Assembly) (any, error) { return 42, nil })
	f, ok := Lookup(kind, "x")
	if !ok {
		t.Fatal("registered backend not found")
	}
	if v, err := f(NewAssembly(core.GatewaySettings{}, nil)); err != nil || v != 42 {
		t.Fatalf("factory = %v, %v", v, err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "registered twice") {
			t.Fatalf("duplicate registration: recover() = %v", r)
		}
	}()
	Register(kind, "x", func(*Assembly) (any, error) { return nil, nil })
}

func TestAssemblySharesOneResourceAndClosesIt(t *testing.T) {
	a := NewAssembly(core.GatewaySettings{Scope: "LLM"}, nil)
	closed, made := 0, 0
	mk := func() (any, error) { made++; return closer{&closed}, nil }
	v1, _ := a.Shared("redis", mk)
	v2, _ := a.Shared("redis", mk)
	if made != 1 || v1 != v2 {
		t.Fatalf("made %d resources, want 1 shared", made)
	}
	if _, err := a.Shared("bad", func() (any, error) { return nil, errors.New("boom") }); err == nil {
		t.Fatal("factory error not returned")
	}
	cl := a.Closers()
	if len(cl) != 1 {
		t.Fatalf("%d closers", len(cl))
	}
	_ = cl[0].Close()
	if closed != 1 {
		t.Fatal("shared resource not closed")
	}
}

func TestImportPathNamesTheOptInPackages(t *testing.T) {
	cases := map[string]string{
		"redis": "github.com/polygateway/polygateway/backend/redisstore", "sqlite": "github.com/polygateway/polygateway/telemetry/sqlitesink",
		"postgres": "github.com/polygateway/polygateway/telemetry/pgsink", "memory": "",
	}
	for name, want := range cases {
		if got := ImportPath(KindLimiter, name); got != want {
			t.Errorf("ImportPath(%q) = %q, want %q", name, got, want)
		}
	}
}
