package polygateway_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMakeFuzzRunsEveryFuzzTarget keeps the Makefile's FUZZ_TARGETS equal
// to the Fuzz functions of the module's tests.
func TestMakeFuzzRunsEveryFuzzTarget(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)FUZZ_TARGETS = \\\n(.*?)\n\n`).FindSubmatch(mk)
	if block == nil {
		t.Fatal("no FUZZ_TARGETS in the Makefile")
	}
	listed := strings.Fields(strings.ReplaceAll(string(block[1]), `\`, ""))
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	var found []string
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			found = append(found, "./"+filepath.ToSlash(filepath.Dir(path))+":"+string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range found {
		found[i] = strings.Replace(f, "./.:", ".:", 1)
	}
	slices.Sort(found)
	slices.Sort(listed)
	if !slices.Equal(found, listed) {
		t.Errorf("FUZZ_TARGETS lists\n  %v\nthe tests define\n  %v", listed, found)
	}
}
