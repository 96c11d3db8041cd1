package engine

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The files and declarations where error classes and reasons may be
// compared: the tables that decide what they mean.
var (
	// tableFiles are the policy table (the end of an attempt and of a
	// scope) and the admission refusals' table.
	tableFiles = []string{"policy.go", "admit_table.go"}
	// tableVars are package-level variables whose values are tables.
	tableVars = []string{"policy", "scopePolicy", "refusals"}
)

const corePath = "github.com/polygateway/polygateway/core"

// TestClassesAndReasonsAreComparedOnlyInThePolicyTables reads the engine's
// source and fails on every ==, != or switch on a core.Class or core.Reason
// outside the tables: what an error class or reason means is a row of a
// table, not a branch somewhere in the loop. Asking whether a reason is
// there at all (a comparison with "") decides nothing and is allowed.
func TestClassesAndReasonsAreComparedOnlyInThePolicyTables(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, err := parseFiles(fset, ".")
	if err != nil {
		t.Fatal(err)
	}
	info := typeCheck(t, fset, "github.com/polygateway/polygateway/internal/engine", files)
	var found []string
	for _, f := range files {
		if slices.Contains(tableFiles, filepath.Base(fset.Position(f.Pos()).Filename)) {
			continue
		}
		found = append(found, classComparisons(fset, f, info)...)
	}
	for _, c := range found {
		t.Errorf("%s: make it a column of the policy table (policy.go)", c)
	}
}

// TestTheComparisonCheckFindsEveryKindOfComparison runs the check of
// TestClassesAndReasonsAreComparedOnlyInThePolicyTables on a source that
// compares classes and reasons in each way it must catch.
func TestTheComparisonCheckFindsEveryKindOfComparison(t *testing.T) {
	t.Parallel()
	const src = `package probe

import "github.com/polygateway/polygateway/core"

func eq(c core.Classified) bool  { return c.Class == core.ClassTransient }            // want
func ne(r core.Reason) bool      { return core.ReasonTimeout != r }                   // want
func vars(a, b core.Reason) bool { return a == b }                                    // want
func named(r core.Reason) bool   { return r == "rate_limited" }                       // want
func present(r core.Reason) bool { return r != "" }
func other(n int) bool           { return n == 1 }
func tag(c core.Class) int {
	switch c { // want
	case core.ClassInvalid:
		return 1
	}
	return 0
}
func cases(c core.Classified) int {
	switch {
	case c.Reason == core.ReasonStalled: // want
		return 1
	}
	return 0
}

var refusals = map[core.Reason]func(core.Reason) bool{
	core.ReasonDisabled: func(r core.Reason) bool { return r == core.ReasonDisabled },
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "probe.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	info := typeCheck(t, fset, "probe", []*ast.File{f})
	var want []string
	for i, line := range strings.Split(src, "\n") {
		if strings.HasSuffix(line, "// want") {
			want = append(want, fmt.Sprintf("probe.go:%d", i+1))
		}
	}
	var got []string
	for _, c := range classComparisons(fset, f, info) {
		parts := strings.SplitN(c, ":", 3)
		got = append(got, parts[0]+":"+parts[1])
	}
	if !slices.Equal(got, want) {
		t.Errorf("found comparisons at %v, want %v", got, want)
	}
}

// parseFiles parses the non-test Go files of dir.
func parseFiles(fset *token.FileSet, dir string) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// exports imports packages from their export data, found once for all the
// tests of this file with go list (the engine's dependencies: core and the
// standard library). It is safe for concurrent use.
var exports = sync.OnceValues(func() (types.Importer, error) {
	out, err := exec.Command("go", "list", "-export", "-f", "{{.ImportPath}}={{.Export}}", "-deps", ".").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w", err)
	}
	files := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if path, file, ok := strings.Cut(strings.TrimSpace(line), "="); ok && file != "" {
			files[path] = file
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("%s is not a dependency of the engine", path)
		}
		return os.Open(file)
	})
	return &lockedImporter{imp: imp}, nil
})

// lockedImporter serializes the imports of imp.
type lockedImporter struct {
	mu  sync.Mutex
	imp types.Importer
}

func (l *lockedImporter) Import(path string) (*types.Package, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.imp.Import(path)
}

// typeCheck type-checks files as the package path.
func typeCheck(t *testing.T, fset *token.FileSet, path string, files []*ast.File) *types.Info {
	t.Helper()
	imp, err := exports()
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	if _, err := (&types.Config{Importer: imp}).Check(path, fset, files, info); err != nil {
		t.Fatalf("type-checking %s: %v", path, err)
	}
	return info
}

// classComparisons lists, as "file:line: what", the comparisons of a
// core.Class or core.Reason in f outside the table variables.
func classComparisons(fset *token.FileSet, f *ast.File, info *types.Info) []string {
	var found []string
	report := func(n ast.Node, what string) {
		p := fset.Position(n.Pos())
		found = append(found, fmt.Sprintf("%s:%d: %s", filepath.Base(p.Filename), p.Line, what))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok == token.VAR && declaresTable(n) {
				return false
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && comparesClass(info, n.X, n.Y) {
				report(n, fmt.Sprintf("%s compared with %s", types.ExprString(n.X), types.ExprString(n.Y)))
			}
		case *ast.SwitchStmt:
			if n.Tag != nil && isClassOrReason(info.TypeOf(n.Tag)) {
				report(n, "switch on "+types.ExprString(n.Tag))
			}
		}
		return true
	})
	return found
}

// declaresTable reports whether d declares one of tableVars.
func declaresTable(d *ast.GenDecl) bool {
	for _, spec := range d.Specs {
		for _, name := range spec.(*ast.ValueSpec).Names {
			if slices.Contains(tableVars, name.Name) {
				return true
			}
		}
	}
	return false
}

// comparesClass reports whether x == y compares classes or reasons: one
// side is of type core.Class or core.Reason, and the other is not the
// empty reason.
func comparesClass(info *types.Info, x, y ast.Expr) bool {
	if !isClassOrReason(info.TypeOf(x)) && !isClassOrReason(info.TypeOf(y)) {
		return false
	}
	return !isEmptyString(info, x) && !isEmptyString(info, y)
}

func isClassOrReason(t types.Type) bool {
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != corePath {
		return false
	}
	return n.Obj().Name() == "Class" || n.Obj().Name() == "Reason"
}

func isEmptyString(info *types.Info, e ast.Expr) bool {
	tv := info.Types[e]
	return tv.Value != nil && tv.Value.Kind() == constant.String && constant.StringVal(tv.Value) == ""
}
