package backendtest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestBackendOutsideTheModule builds the backend of
// testdata/outside — a module of its own that implements the ports by
// delegating to backend/memory — and runs its tests, which run the
// conformance suites: the ports and the suites must be usable from outside
// this module, where nothing internal can be reached. It never touches the
// network: the module replaces this one by its directory, its go.sum is
// this module's, and the proxy is off.
func TestBackendOutsideTheModule(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not available (%v): cannot build the module in testdata/outside", err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "outside"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go test in %s: %v\n%s", dir, err, out.Bytes())
	}
	t.Logf("go test in %s:\n%s", dir, out.Bytes())
}
