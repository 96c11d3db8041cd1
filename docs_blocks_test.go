package polygateway_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// compiledUnit is a stretch of Go source that the build compiles: a whole
// file under examples/ (go build ./examples/... and go vet build them), or
// one Example function of a _test.go file (go test compiles and, with an
// // Output: comment, runs it).
type compiledUnit struct {
	path  string   // slash-separated, relative to the module root
	name  string   // the Example function's name; "" for a whole file
	lines []string // trimmed, blank lines dropped
}

// docBlock is one ```go block of a Markdown file.
type docBlock struct {
	file     string
	line     int    // 1-based line of the opening fence
	fragment string // the file named by <!-- fragment: … --> before it, if any
	lines    []string
}

// fragmentMarker marks the next block as an excerpt of the named file.
var fragmentMarker = regexp.MustCompile(`^<!--\s*fragment:\s*(\S+)\s*-->$`)

// elision lines stand for omitted lines of the quoted program.
var elision = map[string]bool{"…": true, "// …": true, "...": true, "// ...": true}

// TestDocsCodeBlocksAreCompiled fails when a Go code block of the
// documentation (docs/*.md and README.md) is not compiled code: every
// ```go block must be an excerpt, copied verbatim up to indentation, of a
// program under examples/ or of an Example function in a _test.go file, so
// the documentation cannot drift from the API. Blank lines are ignored;
// the other lines must appear in order and contiguously in one such unit. A
// line "// …" marks an omission: the parts around it must each be
// contiguous, in that order, in the same unit. A block preceded by
// <!-- fragment: examples/<dir>/main.go --> must be found in that file.
// Blocks in other languages (sh, sql, yaml, json…) are not checked.
func TestDocsCodeBlocksAreCompiled(t *testing.T) {
	units := compiledUnits(t)
	if len(units) == 0 {
		t.Fatal("found no programs under examples/ and no Example functions")
	}
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	checked := 0
	for _, file := range files {
		blocks, err := goBlocks(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			checked++
			if msg := b.check(units); msg != "" {
				t.Errorf("%s:%d: %s\n%s", b.file, b.line, msg, fixHint)
			}
		}
	}
	t.Logf("checked %d Go blocks against %d compiled units", checked, len(units))
}

const fixHint = "\tEvery ```go block must be copied from a program under examples/ (built by go build ./examples/...)\n" +
	"\tor from a func Example… in a _test.go file; mark an excerpt with <!-- fragment: examples/<dir>/main.go -->\n" +
	"\ton the line before the fence, and write \"// …\" where lines are left out."

// check returns why b is not compiled code, or "".
func (b docBlock) check(units []compiledUnit) string {
	segments := splitElided(b.lines)
	if len(segments) == 0 {
		return "empty Go block"
	}
	candidates := units
	if b.fragment != "" {
		candidates = nil
		for _, u := range units {
			if u.path == b.fragment {
				candidates = append(candidates, u)
			}
		}
		if len(candidates) == 0 {
			return "the fragment marker names " + b.fragment + ", which is neither a Go file under examples/ nor a _test.go file with Example functions"
		}
	}
	for _, u := range candidates {
		if containsInOrder(u.lines, segments) {
			return ""
		}
	}
	where := "any program under examples/ or Example function"
	if b.fragment != "" {
		where = b.fragment
	}
	first := segments[0][0]
	return "this Go block is not an excerpt of " + where + " (first line: " + first + ")"
}

// splitElided splits lines at elision markers into non-empty segments.
func splitElided(lines []string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range lines {
		if elision[l] {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// containsInOrder reports whether every segment occurs contiguously in
// lines, each after the previous one.
func containsInOrder(lines []string, segments [][]string) bool {
	from := 0
	for _, seg := range segments {
		at := indexOf(lines[from:], seg)
		if at < 0 {
			return false
		}
		from += at + len(seg)
	}
	return true
}

func indexOf(lines, seg []string) int {
	for i := 0; i+len(seg) <= len(lines); i++ {
		match := true
		for j, l := range seg {
			if lines[i+j] != l {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// normalize trims every line and drops the blank ones.
func normalize(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// compiledUnits collects the Go files under examples/ and the Example
// functions of every _test.go file of the module.
func compiledUnits(t *testing.T) []compiledUnit {
	t.Helper()
	var units []compiledUnit
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel := filepath.ToSlash(path)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "examples/") {
			units = append(units, compiledUnit{path: rel, lines: normalize(string(src))})
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, perr := parser.ParseFile(fset, path, src, parser.ParseComments)
		if perr != nil {
			// Somebody's file in progress: it cannot hold a compiled Example.
			t.Logf("skipping %s: %v", rel, perr)
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			start, end := fset.Position(fn.Pos()).Offset, fset.Position(fn.End()).Offset
			units = append(units, compiledUnit{path: rel, name: fn.Name.Name, lines: normalize(string(src[start:end]))})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return units
}

// goBlocks returns the ```go blocks of a Markdown file.
func goBlocks(file string) ([]docBlock, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(raw), "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		lang := strings.Fields(strings.TrimPrefix(fence, "```"))
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if len(lang) > 0 && (lang[0] == "go" || lang[0] == "golang") {
			b := docBlock{file: file, line: i + 1, lines: normalize(strings.Join(lines[i+1:min(end, len(lines))], "\n"))}
			if i > 0 {
				if m := fragmentMarker.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
					b.fragment = m[1]
				}
			}
			blocks = append(blocks, b)
		}
		i = end
	}
	return blocks, nil
}

// markdownLink matches the target of an inline Markdown link.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve fails when a relative link of docs/*.md or README.md
// points at a file that does not exist.
func TestDocsLinksResolve(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md", "CHANGELOG.md")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for n, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				path := filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: %v", file, n+1, m[1], err)
				}
			}
		}
	}
}
