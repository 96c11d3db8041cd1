package polygateway_test

import (
	"os/exec"
	"strings"
	"testing"
)

const modulePath = "github.com/polygateway/polygateway"

// goList returns the packages matched by pattern with their imports (or,
// with deps, their whole dependency closure).
func goList(t *testing.T, deps bool, pattern string) map[string][]string {
	t.Helper()
	args := []string{"list", "-f", "{{.ImportPath}}:{{join .Imports \",\"}}"}
	if deps {
		args = []string{"list", "-deps", "-f", "{{.ImportPath}}:"}
	}
	out, err := exec.Command("go", append(args, pattern)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pattern, err, out)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, imports, _ := strings.Cut(line, ":")
		if imports == "" {
			pkgs[name] = nil
			continue
		}
		pkgs[name] = strings.Split(imports, ",")
	}
	return pkgs
}

// TestDependencyRule enforces the layering of the architecture: core
// imports the standard library only; the internal packages (the engine,
// the onion's layers in internal/middleware, the HTTP transport in
// internal/transport, …), backends and telemetry sinks never import the
// root package (internal/testkit/testenv, which only tests import, is a front-end);
// the root never links an opt-in adapter or its driver.
//
// It is deliberately not parallel: go list is CPU-heavy, and the timing
// tests of this package run after it.
func TestDependencyRule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	pkgs := goList(t, false, modulePath+"/...")
	for pkg, imports := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, modulePath), "/")
		for _, imp := range imports {
			switch {
			case rel == "core" && strings.Contains(strings.SplitN(imp, "/", 2)[0], "."):
				t.Errorf("%s imports %s: core may import the standard library only", pkg, imp)
			case imp == modulePath && rel != "internal/testkit/testenv" && (strings.HasPrefix(rel, "internal") ||
				strings.HasPrefix(rel, "backend") || strings.HasPrefix(rel, "telemetry")):
				t.Errorf("%s imports the root package: only the root, embed, ocr, metrics, proxy, cmd, examples and the tests' internal/testkit/testenv may", pkg)
			}
		}
	}
	optIn := []string{
		modulePath + "/backend/redisstore", modulePath + "/telemetry/sqlitesink", modulePath + "/telemetry/pgsink",
		"github.com/redis/go-redis/v9", "modernc.org/sqlite", "github.com/jackc/pgx/v5",
		modulePath + "/metrics", "github.com/prometheus/client_golang",
		modulePath + "/tracing", "go.opentelemetry.io",
		modulePath + "/configfile", "go.yaml.in",
	}
	closure := goList(t, true, modulePath)
	for _, banned := range optIn {
		for dep := range closure {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("the root package links %s: opt-in adapters must stay opt-in", dep)
			}
		}
	}
}
