package configfile_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/polygateway/polygateway/configfile"
	"github.com/polygateway/polygateway/internal/config"
)

var updateSchema = flag.Bool("update-schema", false, "rewrite docs/polygateway.schema.json from the key table")

const schemaPath = "../docs/polygateway.schema.json"

// TestSchemaIsCurrent fails when the committed schema is not the one the
// key table generates.
func TestSchemaIsCurrent(t *testing.T) {
	want := configfile.Schema()
	if *updateSchema {
		if err := os.WriteFile(schemaPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/polygateway.schema.json is out of date with the key table: run go test ./configfile -run TestSchemaIsCurrent -update-schema")
	}
}

// compileSchema compiles the generated schema.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(configfile.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(configfile.SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(configfile.SchemaID)
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

// instance turns YAML into the JSON value the schema validates.
func instance(t *testing.T, src []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestSchemaAcceptsTheExamplesAndRefusesTypos: the example file (and the
// one in the how-to) validate; a misspelt field or a wrong type does not.
func TestSchemaAcceptsTheExamplesAndRefusesTypos(t *testing.T) {
	t.Parallel()
	s := compileSchema(t)
	example, err := os.ReadFile("testdata/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(instance(t, example)); err != nil {
		t.Errorf("testdata/gateway.yaml: %v", err)
	}
	for _, doc := range []string{"../docs/howto-config-file.md", "../docs/server.md"} {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := yamlBlocks(string(md))
		if len(blocks) == 0 && strings.Contains(doc, "howto") {
			t.Errorf("%s has no yaml block", doc)
		}
		for i, b := range blocks {
			if !strings.Contains(b, "scopes:") && !strings.Contains(b, "server:") {
				continue // not a whole configuration file
			}
			if err := s.Validate(instance(t, []byte(b))); err != nil {
				t.Errorf("%s yaml block %d: %v", doc, i+1, err)
			}
			if _, err := configfile.Parse(doc, []byte(b), configfile.WithLookup(func(string) (string, bool) { return "redis://127.0.0.1:6379/0", true })); err != nil {
				t.Errorf("%s yaml block %d does not parse: %v", doc, i+1, err)
			}
		}
	}
	for name, bad := range map[string]string{
		"misspelt top-level":    strings.Replace(string(example), "scopes:", "scopse:", 1),
		"misspelt scope field":  strings.Replace(string(example), "    selector:", "    selectr:", 1),
		"misspelt source field": strings.Replace(string(example), "timeout_s: 60", "timeout: 60", 1),
		"wrong type":            strings.Replace(string(example), "timeout_s: 60", "timeout_s: [60]", 1),
		"zero seconds":          strings.Replace(string(example), "timeout_s: 60", "timeout_s: 0", 1),
		"bad enum":              strings.Replace(string(example), "selector: health_aware", "selector: fastest", 1),
		"source without model":  strings.Replace(string(example), "        model: deepseek-chat\n", "", 1),
	} {
		if bad == string(example) {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if err := s.Validate(instance(t, []byte(bad))); err == nil {
			t.Errorf("%s: the schema accepted it", name)
		}
	}
}

// yamlBlocks returns the ```yaml blocks of a Markdown text.
func yamlBlocks(md string) []string {
	var out []string
	for {
		i := strings.Index(md, "```yaml\n")
		if i < 0 {
			return out
		}
		md = md[i+len("```yaml\n"):]
		j := strings.Index(md, "```")
		if j < 0 {
			return out
		}
		out = append(out, md[:j])
		md = md[j:]
	}
}

// TestEveryKeyHasAPlace writes a file setting every field of every section
// to its key's example and checks each becomes its environment key with the
// example value: every key the environment supports can be written in a
// file, and the schema lists it.
func TestEveryKeyHasAPlace(t *testing.T) {
	t.Parallel()
	var asm, defs, server, scope, source []string
	groups, sourceGroups := map[string][]string{}, map[string][]string{}
	var groupOrder, sourceGroupOrder []string
	want := map[string]string{}
	quote := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	for _, d := range config.Keys() {
		if d.Reader == config.ReaderTooling || d.Reader == config.ReaderNobody || d.Pattern == "PGW_ALLOW_KEYS" {
			continue
		}
		val := quote(d.Example)
		switch d.Kind {
		case config.KindSecondsPos, config.KindSecondsNonNeg, config.KindInt, config.KindIntNonNeg, config.KindIntPos,
			config.KindDecimalPos, config.KindDecimalNonNeg, config.KindFraction, config.KindUnit, config.KindBool:
			val = d.Example // a YAML number or boolean
		case config.KindJSON:
			val = d.Example // a JSON object is YAML too
		case config.KindList:
			val = "[" + strings.Join(slices.Collect(func(yield func(string) bool) {
				for item := range strings.SplitSeq(d.Example, ",") {
					if !yield(quote(item)) {
						return
					}
				}
			}), ", ") + "]"
		case config.KindRoutes:
			var items []string
			for item := range strings.SplitSeq(d.Example, ",") {
				m, s, _ := strings.Cut(item, "=")
				items = append(items, quote(m)+": "+s)
			}
			val = "{" + strings.Join(items, ", ") + "}"
		}
		key := strings.NewReplacer("{SCOPE}", "LLM", "{PROVIDER}", "QWEN", "{N}", "1").Replace(d.Pattern)
		want[key] = d.Example
		p := d.Pattern
		switch {
		case strings.HasPrefix(p, "{SCOPE}__{PROVIDER}__{N}__"):
			tail := strings.TrimPrefix(p, "{SCOPE}__{PROVIDER}__{N}__")
			if g, f, ok := strings.Cut(tail, "__"); ok {
				// A source's group is a mapping inside the source.
				g = strings.ToLower(g)
				if sourceGroups[g] == nil {
					sourceGroupOrder = append(sourceGroupOrder, g)
				}
				sourceGroups[g] = append(sourceGroups[g], strings.ToLower(f)+": "+val)
				continue
			}
			source = append(source, strings.ToLower(tail)+": "+val)
		case strings.HasPrefix(p, "{SCOPE}__"):
			tail := strings.TrimPrefix(p, "{SCOPE}__")
			if g, f, ok := strings.Cut(tail, "__"); ok {
				g = strings.ToLower(g)
				if groups[g] == nil {
					groupOrder = append(groupOrder, g)
				}
				groups[g] = append(groups[g], strings.ToLower(f)+": "+val)
			} else {
				scope = append(scope, strings.ToLower(tail)+": "+val)
			}
		case d.Reader == config.ReaderGateway:
			server = append(server, strings.ToLower(strings.TrimPrefix(p, "PGW_"))+": "+val)
		case strings.HasPrefix(p, "LLM_"):
			defs = append(defs, strings.ToLower(strings.TrimPrefix(p, "LLM_"))+": "+val)
		default:
			asm = append(asm, strings.ToLower(strings.TrimPrefix(p, "PGW_"))+": "+val)
		}
	}
	var b strings.Builder
	block := func(indent string, lines []string) {
		for _, l := range lines {
			b.WriteString(indent + l + "\n")
		}
	}
	b.WriteString("assembly:\n")
	block("  ", asm)
	b.WriteString("defaults:\n")
	block("  ", defs)
	b.WriteString("server:\n")
	block("  ", server)
	b.WriteString("scopes:\n  LLM:\n")
	block("    ", scope)
	for _, g := range groupOrder {
		b.WriteString("    " + g + ":\n")
		block("      ", groups[g])
	}
	b.WriteString("    sources:\n      - provider: qwen\n")
	block("        ", source)
	for _, g := range sourceGroupOrder {
		b.WriteString("        " + g + ":\n")
		block("          ", sourceGroups[g])
	}
	file := b.String()

	cf, err := configfile.Parse("every-key.yaml", []byte(file))
	if err != nil {
		t.Fatalf("%v\n%s", err, file)
	}
	got := cf.Env()
	for key, v := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: no place in the file", key)
			continue
		}
		if strings.HasSuffix(key, "EXTRA_BODY") {
			continue // re-encoded JSON
		}
		if g != v {
			t.Errorf("%s = %q, want %q", key, g, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the file made %d keys, want %d", len(got), len(want))
	}
	if err := compileSchema(t).Validate(instance(t, []byte(file))); err != nil {
		t.Errorf("the schema refuses every key at its example: %v", err)
	}
}

// TestRootPackageDoesNotLinkYAML: the YAML parser is linked only by
// programs importing this package.
func TestRootPackageDoesNotLinkYAML(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	for _, pkg := range []string{"github.com/polygateway/polygateway", "github.com/polygateway/polygateway/embed", "github.com/polygateway/polygateway/ocr"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "yaml") || strings.HasSuffix(dep, "/configfile") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
