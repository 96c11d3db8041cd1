package polygateway_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// docTarget is where go doc shows the fields and methods of an exported
// root type: the root itself, or package core for an alias of one of its
// types.
type docTarget struct{ dir, name string }

// TestGoDocShowsTheFieldsAndMethodsOfEveryRootType: for every exported
// type of the root package, go doc (on the root, or on core for an alias
// of a core type) shows every exported field and method it has.
func TestGoDocShowsTheFieldsAndMethodsOfEveryRootType(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	root := parsePackage(t, ".")
	core := parsePackage(t, "core")
	docs := map[string]string{".": goDocAll(t, "."), "core": goDocAll(t, "./core")}
	pkgs := map[string][]*ast.File{".": root, "core": core}
	checked := 0
	for _, spec := range typeSpecs(root) {
		if !spec.Name.IsExported() {
			continue
		}
		target := docTarget{".", spec.Name.Name}
		if spec.Assign.IsValid() {
			sel, ok := spec.Type.(*ast.SelectorExpr)
			if !ok {
				continue // an alias of a type literal (a func type) has no fields
			}
			if pkg, _ := sel.X.(*ast.Ident); pkg == nil || pkg.Name != "core" {
				t.Errorf("root type %s aliases %s.%s: only core's types are shown by go doc where the alias points", spec.Name.Name, pkg, sel.Sel.Name)
				continue
			}
			target = docTarget{"core", sel.Sel.Name}
		}
		section := docSection(docs[target.dir], target.name)
		if section == "" {
			t.Errorf("go doc %s shows no type %s (for root type %s)", target.dir, target.name, spec.Name.Name)
			continue
		}
		for _, want := range members(pkgs[target.dir], target.name) {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(want) + `\b`).MatchString(section) {
				t.Errorf("go doc %s %s does not show %s (root type %s):\n%s", target.dir, target.name, want, spec.Name.Name, section)
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("checked %d types: the root's types were not found", checked)
	}
}

func parsePackage(t *testing.T, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, dir+"/"+n, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	return files
}

func typeSpecs(files []*ast.File) []*ast.TypeSpec {
	var out []*ast.TypeSpec
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					out = append(out, s.(*ast.TypeSpec))
				}
			}
		}
	}
	return out
}

// members returns the exported fields (of a struct), methods (of an
// interface) and declared methods of the type name.
func members(files []*ast.File, name string) []string {
	var out []string
	for _, spec := range typeSpecs(files) {
		if spec.Name.Name != name || spec.Assign.IsValid() {
			continue
		}
		var fields *ast.FieldList
		switch tt := spec.Type.(type) {
		case *ast.StructType:
			fields = tt.Fields
		case *ast.InterfaceType:
			fields = tt.Methods
		}
		if fields == nil {
			continue
		}
		for _, f := range fields.List {
			for _, n := range f.Names {
				if n.IsExported() {
					out = append(out, n.Name)
				}
			}
			if len(f.Names) == 0 {
				if n := embeddedName(f.Type); ast.IsExported(n) {
					out = append(out, n)
				}
			}
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv != nil && fn.Name.IsExported() && embeddedName(fn.Recv.List[0].Type) == name {
				out = append(out, fn.Name.Name)
			}
		}
	}
	return out
}

// embeddedName is the type name of an embedded field or a receiver.
func embeddedName(x ast.Expr) string {
	switch e := x.(type) {
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return embeddedName(e.X)
	}
	return ""
}

func goDocAll(t *testing.T, pkg string) string {
	t.Helper()
	out, err := exec.Command("go", "doc", "-all", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go doc -all %s: %v\n%s", pkg, err, out)
	}
	return string(out)
}

// docSection is the part of go doc -all output about the type name: its
// declaration, constructors and methods.
func docSection(doc, name string) string {
	start := regexp.MustCompile(`(?m)^type ` + regexp.QuoteMeta(name) + `\b`).FindStringIndex(doc)
	if start == nil {
		return ""
	}
	rest := doc[start[0]:]
	if end := regexp.MustCompile(`(?m)^type `).FindAllStringIndex(rest, 2); len(end) == 2 {
		rest = rest[:end[1][0]]
	}
	return rest
}

// TestTheRootKeepsTheApplicationAPI counts the root package's exported
// names (types, functions, constants and variables; methods not counted):
// at most 110. The vocabulary that only names things is core's.
func TestTheRootKeepsTheApplicationAPI(t *testing.T) {
	n := 0
	for _, f := range parsePackage(t, ".") {
		for _, d := range f.Decls {
			n += exportedNames(d)
		}
	}
	t.Logf("%d exported names in the root package", n)
	if n > 110 {
		t.Fatalf("the root package exports %d names, more than 110", n)
	}
}

// exportedNames counts the exported names d declares at package level.
func exportedNames(d ast.Decl) int {
	n := 0
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.IsExported() {
			n++
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					n++
				}
			case *ast.ValueSpec:
				for _, id := range s.Names {
					if id.IsExported() {
						n++
					}
				}
			}
		}
	}
	return n
}
