package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The documents whose default and example values of configuration keys are
// held to the key table.
var documented = []string{"../../README.md", "../../docs/*.md", "../../docs/production.env"}

var (
	// envLine is a KEY=VALUE line of an env file or a shell block, with an
	// optional comment.
	envLine = regexp.MustCompile(`^\s*(?:export\s+)?([A-Z][A-Z0-9_{}]*)=("[^"]*"|'[^']*'|[^\s#]*)\s*(?:#(.*))?$`)
	// ticked is a `backticked` token.
	ticked = regexp.MustCompile("`([^`]+)`")
	// defaultValue finds a value said to be a default, before or after the
	// word: "30 seconds by default", "3 (the default)", "default 2 MiB",
	// "float (default)".
	defaultValue = regexp.MustCompile(`(?i)(?:([0-9][0-9.]*(?:\s*(?:seconds|s|ms|MiB|KiB))?|` + "`?[a-z_]+`?" + `)\s*(?:by default|\(the defaults?\)|\(default\))|default(?:s)?(?: is| are| of)?:?\s+([0-9][0-9.]*(?:\s*(?:seconds|s|ms|MiB|KiB))?)\b)`)
)

// resolve returns the table rows a key name written in the docs may mean:
// a concrete key (LLM__OPENAI__1__TIMEOUT_S), a pattern, or a bare FIELD or
// GROUP__FIELD (every row ending in it).
func resolve(name string) []KeyDoc {
	if d, ok := known.byPattern[name]; ok {
		return []KeyDoc{d}
	}
	parts := strings.Split(name, "__")
	var tail string
	switch {
	case len(parts) == 1 || len(parts) == 2 && known.groups[parts[0]] != nil:
		tail = "__" + name
	case len(parts) == 2:
		tail = scopeP + parts[1]
	case len(parts) == 3:
		tail = scopeP + parts[1] + "__" + parts[2]
	default:
		tail = sourceP + strings.Join(parts[3:], "__")
	}
	var out []KeyDoc
	for _, d := range keyTable {
		if d.Pattern == tail || strings.HasPrefix(tail, "__") && strings.HasSuffix(d.Pattern, tail) {
			out = append(out, d)
		}
	}
	return out
}

// number parses a documented number with its unit: seconds as seconds,
// MiB and KiB as bytes.
func number(v string) (float64, bool) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseFloat(strings.TrimRight(f[0], "smMiBK"), 64)
	if err != nil {
		return 0, false
	}
	unit := strings.TrimLeft(f[0], "0123456789.")
	if len(f) > 1 {
		unit = strings.Trim(f[1], ",;.)")
	}
	switch unit {
	case "MiB":
		n *= 1 << 20
	case "KiB":
		n *= 1 << 10
	case "ms":
		n /= 1000
	}
	return n, true
}

// agrees reports whether v, a value the docs give as d's default, is d's
// declared default: its plain default, or a number its Default names.
func agrees(d KeyDoc, v string) bool {
	v = strings.Trim(strings.TrimSpace(v), "`")
	want, plain := known.defaults[d.Pattern]
	n, isNum := number(v)
	if !isNum && v != "" && strings.Contains(d.Default, v) {
		return true // "off" for "0 (off)"
	}
	switch w := want.(type) {
	case nil:
	case time.Duration:
		return isNum && math.Abs(w.Seconds()-n) < 1e-9
	case int:
		return isNum && float64(w) == n
	case float64:
		return isNum && w == n
	default:
		return fmt.Sprint(w) == v
	}
	if !plain && isNum {
		for _, word := range regexp.MustCompile(`[0-9][0-9.]*(?: MiB| KiB)?`).FindAllString(d.Default, -1) {
			if m, ok := number(word); ok && m == n {
				return true
			}
		}
		return false
	}
	return true // a default in words: nothing to compare
}

// nearestKey returns the backticked token of line nearest to offset at,
// when it names keys (not a KEY=VALUE example, not code).
func nearestKey(line string, at int) []KeyDoc {
	best, dist := "", math.MaxInt
	for _, m := range ticked.FindAllStringSubmatchIndex(line, -1) {
		d := min(abs(m[0]-at), abs(m[1]-at))
		if d < dist {
			best, dist = line[m[2]:m[3]], d
		}
	}
	if strings.ContainsAny(best, "=. (") {
		return nil
	}
	return resolve(best)
}

func abs(n int) int { return max(n, -n) }

// TestDocsAgreeWithTheKeyTable: every default the documentation gives for
// a configuration key ("30 seconds by default (`…COOLDOWN_S`)", a
// "default" column, "# float (default)") is the key's declared default,
// and every example value (KEY=VALUE in env files, code blocks and
// `KEY=VALUE` in the text) is a value the key accepts.
func TestDocsAgreeWithTheKeyTable(t *testing.T) {
	t.Parallel()
	var files []string
	for _, g := range documented {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v", files)
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		problems, n := docProblems(filepath.Base(f), string(raw))
		checked += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	if checked < 100 {
		t.Errorf("only %d documented values checked", checked)
	}
}

// TestDocsCheckHasTeeth: the check finds a wrong default in words, in a
// table and in a comment, and a bad example value.
func TestDocsCheckHasTeeth(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"breaker stays open for the cooldown, 30 seconds by default (`LLM__BREAKER__COOLDOWN_S`).",
		"| key | default | meaning |\n|---|---|---|\n| `PGW_WRITE_TIMEOUT_S` | 60 | bound |",
		"LLM__RETRY__MAX_ATTEMPTS=4   # default 5",
		"LLM__QWEN__1__TIMEOUT_S=soon",
		"set `LLM__SELECTOR=random` to spread the load",
		"`{SCOPE}__MAX_INPUT_BYTES` in all (default 4 MiB)",
	} {
		if problems, _ := docProblems("fixture.md", text); len(problems) != 1 {
			t.Errorf("%q: problems %q, want one", text, problems)
		}
	}
}

// examplesOf returns the examples of a line, KEY=VALUE lines and
// `KEY=VALUE` tokens, and the rows of the key of a KEY=VALUE line.
func examplesOf(line string) (examples [][2]string, lineKey []KeyDoc) {
	if m := envLine.FindStringSubmatch(line); m != nil {
		examples = append(examples, [2]string{m[1], strings.Trim(m[2], `"'`)})
		lineKey = resolve(m[1])
	}
	for _, m := range ticked.FindAllStringSubmatch(line, -1) {
		if k, v, ok := strings.Cut(m[1], "="); ok && envLine.MatchString(m[1]) {
			examples = append(examples, [2]string{k, v})
		}
	}
	return examples, lineKey
}

// docProblems checks one document and returns its problems and the count
// of values checked.
func docProblems(name, text string) (problems []string, checked int) {
	defaultCol := -1
	for i, line := range strings.Split(text, "\n") {
		fail := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%s:%d: ", name, i+1)+fmt.Sprintf(format, args...))
		}
		examples, lineKey := examplesOf(line)
		for _, ex := range examples {
			if strings.ContainsAny(ex[1], "$<.…") && !regexp.MustCompile(`^[0-9.]+$`).MatchString(ex[1]) {
				continue // a placeholder, a URL or a path
			}
			for _, d := range resolve(ex[0]) {
				if d.Reader == ReaderTooling || d.Kind == KindRoutes || d.Kind == KindBackend {
					continue // a backend may be any registered name
				}
				checked++
				if _, err := parseValue(entry{key: ex[0], val: ex[1]}, d); err != nil && ex[1] != "" {
					fail("example %s=%s is refused: %s", ex[0], ex[1], err.Problem)
				}
			}
		}
		// Defaults in a "default" column of a table.
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		switch {
		case !strings.HasPrefix(strings.TrimSpace(line), "|"):
			defaultCol = -1
		case defaultCol < 0:
			defaultCol = slices.IndexFunc(cells, func(c string) bool { return strings.TrimSpace(c) == "default" })
		case defaultCol < len(cells) && !strings.HasPrefix(strings.TrimSpace(cells[0]), "---"):
			var keys []string
			for _, m := range ticked.FindAllStringSubmatch(cells[0], -1) {
				keys = append(keys, m[1])
			}
			vals := strings.Split(cells[defaultCol], ",")
			if len(keys) == 1 {
				vals = []string{strings.Split(cells[defaultCol], " (")[0]}
			}
			for j, k := range keys {
				if j >= len(vals) || len(keys) != len(vals) && len(keys) != 1 {
					break
				}
				rows := resolve(k)
				checked++
				if len(rows) > 0 && !slices.ContainsFunc(rows, func(d KeyDoc) bool { return agrees(d, vals[j]) }) {
					fail("the default of %s is given as %q; the key table says %q", k, strings.TrimSpace(vals[j]), rows[0].Default)
				}
			}
			continue
		}
		// Defaults in words.
		for _, m := range defaultValue.FindAllStringSubmatchIndex(line, -1) {
			v := ""
			if m[2] >= 0 {
				v = line[m[2]:m[3]]
			} else {
				v = line[m[4]:m[5]]
			}
			rows := lineKey
			if rows == nil {
				rows = nearestKey(line, m[0])
			}
			if len(rows) == 0 {
				continue
			}
			checked++
			if !slices.ContainsFunc(rows, func(d KeyDoc) bool { return agrees(d, v) }) {
				fail("the default of %s is given as %q; the key table says %q", rows[0].Pattern, v, rows[0].Default)
			}
		}
	}
	return problems, checked
}
