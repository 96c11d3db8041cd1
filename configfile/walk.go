package configfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/polygateway/polygateway/internal/config"
)

// walker translates the YAML tree into environment keys.
type walker struct {
	f      *File
	lookup func(string) (string, bool)
	nodes  int
	bytes  int             // the scalars' text taken, aliases counted each time
	errs   []*config.Error // the problems kept, in file order
}

// keep records err, a problem of one field, and returns nil, so that the
// walk goes on to report the others; past the file's limits, or for an
// error of another kind, it returns err.
func (w *walker) keep(err error) error {
	var ce *config.Error
	if err == nil || w.nodes > MaxNodes || w.bytes > MaxFileBytes || !errors.As(err, &ce) {
		return err
	}
	w.errs = append(w.errs, ce)
	return nil
}

// errAt is an error about the value at path (line when known).
func errAt(path string, n *yaml.Node, problem string) *config.Error {
	if n != nil && n.Line > 0 {
		problem += fmt.Sprintf(" (line %d)", n.Line)
	}
	return &config.Error{Key: path, Problem: problem}
}

// resolve follows aliases and counts the node against MaxNodes and a
// scalar's text against MaxFileBytes, so that aliases cannot make the walk
// build values larger than a file can hold.
func (w *walker) resolve(n *yaml.Node, path string) (*yaml.Node, error) {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode; depth++ {
		if depth > 100 {
			return nil, errAt(path, n, "alias chain too long")
		}
		n = n.Alias
	}
	w.nodes++
	if w.nodes > MaxNodes {
		return nil, errAt(path, n, fmt.Sprintf("the file has more than %d YAML nodes (aliases count each time they are used)", MaxNodes))
	}
	if n != nil && n.Kind == yaml.ScalarNode {
		w.bytes += len(n.Value)
		if w.bytes > MaxFileBytes {
			return nil, errAt(path, n, fmt.Sprintf("the file's values hold more than %d bytes (aliases count each time they are used)", MaxFileBytes))
		}
	}
	return n, nil
}

// entry is one key/value pair of a mapping.
type entry struct {
	name string
	key  *yaml.Node
	val  *yaml.Node
}

// mapping returns the entries of the mapping at path, checking the keys
// are plain, unique strings and that there are no merge keys. A null value
// is an empty mapping.
func (w *walker) mapping(n *yaml.Node, path string) ([]entry, error) {
	n, err := w.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, errAt(path, n, "expected a mapping (name: value lines), not "+kindName(n))
	}
	seen := map[string]bool{}
	out := make([]entry, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := w.resolve(n.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, errAt(path, k, "a mapping key must be a plain name, not "+kindName(k))
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			return nil, errAt(path, k, "merge keys (<<) are not supported: write the fields out")
		}
		if seen[k.Value] {
			return nil, errAt(path+segment(k.Value), k, "duplicate field")
		}
		seen[k.Value] = true
		out = append(out, entry{name: k.Value, key: k, val: n.Content[i+1]})
	}
	return out, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "an empty document"
}

// unknown is the error of an unknown field, with a suggestion.
func unknown(path string, e entry, known []string) error {
	msg := "unknown field"
	if best := config.Suggest(e.name, known); best != "" {
		msg += " (did you mean " + best + "?)"
	}
	return errAt(path+segment(e.name), e.key, msg+"; known fields: "+strings.Join(known, ", "))
}

// set records one environment key and its place in the file.
func (w *walker) set(key, val, path string, n *yaml.Node) {
	w.f.env[key] = val
	w.f.paths[key] = path
	if n != nil {
		w.f.lines[key] = n.Line
	}
}

func (w *walker) top(doc *yaml.Node) error {
	root := doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return &config.Error{Key: label(w.f.name), Problem: "the configuration file is empty"}
		}
		root = doc.Content[0]
	}
	entries, err := w.mapping(root, "")
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) && ce.Key == "" {
			ce.Key = label(w.f.name)
		}
		return err
	}
	for _, e := range entries {
		var err error
		switch e.name {
		case "assembly":
			err = w.section(e.val, "assembly", &shape.assembly, "")
		case "defaults":
			err = w.section(e.val, "defaults", &shape.defaults, "")
		case "server":
			err = w.section(e.val, "server", &shape.server, "")
		case "scopes":
			err = w.scopes(e.val)
		default:
			err = unknown("", e, topLevel)
			var ce *config.Error
			if errors.As(err, &ce) && strings.HasPrefix(ce.Key, ".") {
				ce.Key = ce.Key[1:]
			}
		}
		if err := w.keep(err); err != nil {
			return err
		}
	}
	if err := config.Join(w.errs...); err != nil {
		return err
	}
	return nil
}

// section translates a mapping of fields; keyPrefix is prepended to each
// field's key (a scope's or a source's prefix).
func (w *walker) section(n *yaml.Node, path string, sec *section, keyPrefix string) error {
	entries, err := w.mapping(n, path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		fl, ok := sec.byName[e.name]
		err := unknown(path, e, sec.names())
		if ok {
			err = w.value(e.val, path+segment(e.name), keyPrefix+fl.key, fl.kind)
		}
		if err := w.keep(err); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) scopes(n *yaml.Node) error {
	entries, err := w.mapping(n, "scopes")
	if err != nil {
		return err
	}
	seen := map[string]string{}
	for _, e := range entries {
		scope := strings.ToUpper(e.name)
		path := "scopes" + segment(e.name)
		prev, dup := seen[scope]
		var err error
		switch {
		case !scopeRE.MatchString(scope):
			err = errAt(path, e.key, fmt.Sprintf("invalid scope name %q: expected letters, digits and single underscores, starting with a letter (e.g. LLM, EMBED, OCR_FAST)", e.name))
		case dup:
			err = errAt(path, e.key, fmt.Sprintf("scope %s is also configured as %q", scope, prev))
		default:
			seen[scope] = e.name
			w.f.scopes = append(w.f.scopes, scope)
			err = w.scope(e.val, scope, "scopes"+segment(scope))
		}
		if err := w.keep(err); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) scope(n *yaml.Node, scope, path string) error {
	entries, err := w.mapping(n, path)
	if err != nil {
		return err
	}
	prefix := scope + "__"
	own := map[string]string{} // the user's keys, upper-cased -> as written
	for _, e := range entries {
		fp := path + segment(e.name)
		err := unknown(path, e, shape.scopeFieldNames())
		switch fl := shape.scope.byName[e.name]; {
		case e.name == fieldSources:
			err = w.sources(e.val, scope, fp)
		case shape.groups.byName[e.name] != nil:
			err = w.section(e.val, fp, shape.groups.byName[e.name], prefix)
		case fl.key != "":
			err = w.value(e.val, fp, prefix+fl.key, fl.kind)
		case ownKey.MatchString(e.name) && own[strings.ToUpper(e.name)] != "":
			err = errAt(fp, e.key, fmt.Sprintf("duplicate field (also written %s: the keys are upper-cased)", own[strings.ToUpper(e.name)]))
		case ownKey.MatchString(e.name):
			own[strings.ToUpper(e.name)] = e.name
			err = w.value(e.val, fp, prefix+strings.ToUpper(e.name), config.KindString)
		}
		if err := w.keep(err); err != nil {
			return err
		}
	}
	return nil
}

// ownKey is a scope field for the user's own code ({SCOPE}__X_…).
var ownKey = regexp.MustCompile(`^[xX]_[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*$`)

func (w *walker) sources(n *yaml.Node, scope, path string) error {
	n, err := w.resolve(n, path)
	if err != nil {
		return err
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return errAt(path, n, "expected a list of sources (- provider: …), not "+kindName(n))
	}
	count := map[string]int{}
	for i, item := range n.Content {
		if err := w.keep(w.source(item, scope, fmt.Sprintf("%s[%d]", path, i), count)); err != nil {
			return err
		}
	}
	return nil
}

// source translates one entry of a scope's sources list, at path ip;
// count numbers the sources of each provider.
func (w *walker) source(item *yaml.Node, scope, ip string, count map[string]int) error {
	entries, err := w.mapping(item, ip)
	if err != nil {
		return err
	}
	provider := ""
	for _, e := range entries {
		if e.name == fieldProvider {
			v, err := w.resolve(e.val, ip+".provider")
			if err != nil {
				return err
			}
			if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
				return errAt(ip+".provider", v, "expected the provider's name")
			}
			provider = strings.ToUpper(strings.TrimSpace(v.Value))
			if !providerRE.MatchString(provider) {
				return errAt(ip+".provider", v, fmt.Sprintf("invalid provider %q: expected letters, digits and single underscores", v.Value))
			}
		}
	}
	if provider == "" {
		return errAt(ip, item, "missing field provider (e.g. provider: openai)")
	}
	count[provider]++
	ref := sourceRef{provider: provider, n: count[provider]}
	w.f.sources[scope] = append(w.f.sources[scope], ref)
	prefix := fmt.Sprintf("%s__%s__%d__", scope, provider, ref.n)
	for _, e := range entries {
		fl, ok := shape.source.byName[e.name]
		err := unknown(ip, e, shape.sourceFieldNames())
		switch g := shape.sourceGroups.byName[e.name]; {
		case e.name == fieldProvider:
			err = nil
		case g != nil:
			err = w.section(e.val, ip+segment(e.name), g, prefix)
		case ok:
			err = w.value(e.val, ip+segment(e.name), prefix+fl.key, fl.kind)
		}
		if err := w.keep(err); err != nil {
			return err
		}
	}
	return nil
}

// value translates one field's value into the environment key key.
func (w *walker) value(n *yaml.Node, path, key string, kind config.Kind) error {
	n, err := w.resolve(n, path)
	if err != nil {
		return err
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // absent
	}
	switch {
	case n.Kind == yaml.ScalarNode:
		v, err := w.expand(n.Value, path, n)
		if err != nil {
			return err
		}
		w.set(key, v, path, n)
		return nil
	case kind == config.KindList && n.Kind == yaml.SequenceNode:
		items := make([]string, 0, len(n.Content))
		for i, c := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			c, err := w.resolve(c, ip)
			if err != nil {
				return err
			}
			if c.Kind != yaml.ScalarNode {
				return errAt(ip, c, "expected a single value, not "+kindName(c))
			}
			v, err := w.expand(c.Value, ip, c)
			if err != nil {
				return err
			}
			items = append(items, v)
		}
		w.set(key, strings.Join(items, ","), path, n)
		return nil
	case kind == config.KindRoutes && n.Kind == yaml.MappingNode:
		return w.routes(n, path, key)
	case kind == config.KindJSON:
		var b strings.Builder
		if err := w.json(&b, n, path); err != nil {
			return err
		}
		w.set(key, b.String(), path, n)
		return nil
	}
	want := "a single value (a string, number or boolean)"
	switch kind {
	case config.KindList:
		want = "a list of strings"
	case config.KindRoutes:
		want = "a mapping of model: SCOPE"
	}
	return errAt(path, n, "expected "+want+", not "+kindName(n))
}

// routes translates the mapping n of model: SCOPE into the key key
// (model=SCOPE,…).
func (w *walker) routes(n *yaml.Node, path, key string) error {
	entries, err := w.mapping(n, path)
	if err != nil {
		return err
	}
	items := make([]string, 0, len(entries))
	for _, e := range entries {
		ip := path + segment(e.name)
		if e.name == "" || strings.ContainsAny(e.name, ",=") {
			return errAt(ip, e.key, "a routed model name must be non-empty and contain no ',' or '='")
		}
		v, err := w.resolve(e.val, ip)
		if err != nil {
			return err
		}
		if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
			return errAt(ip, v, "expected the scope the model goes to")
		}
		scope, err := w.expand(v.Value, ip, v)
		if err != nil {
			return err
		}
		if strings.ContainsAny(scope, ",=") {
			return errAt(ip, v, "a route's scope must contain no ',' or '='")
		}
		items = append(items, e.name+"="+scope)
		w.f.paths[key+"="+e.name], w.f.lines[key+"="+e.name] = ip, e.key.Line
	}
	w.set(key, strings.Join(items, ","), path, n)
	return nil
}

// jsonNumber is a number JSON takes as written.
var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

// leadingZero is a YAML number whose meaning YAML versions disagree on:
// 010 is 8 in YAML 1.1 (and to the parser), 10 in YAML 1.2.
var leadingZero = regexp.MustCompile(`^[-+]?0[0-9_]`)

// jsonNumberOf is the YAML number n written as JSON: as written when JSON
// takes it, an integer exact, another number as its float64.
func jsonNumberOf(n *yaml.Node, path string) (string, error) {
	if jsonNumber.MatchString(n.Value) {
		return n.Value, nil
	}
	if leadingZero.MatchString(n.Value) {
		return "", errAt(path, n, "a number with a leading zero is ambiguous, octal or decimal (write it as a plain decimal, or 0o… for octal)")
	}
	var i int64
	if n.ShortTag() == "!!int" && n.Decode(&i) == nil {
		return strconv.FormatInt(i, 10), nil
	}
	var u uint64
	if n.ShortTag() == "!!int" && n.Decode(&u) == nil {
		return strconv.FormatUint(u, 10), nil
	}
	var f float64
	if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", errAt(path, n, "a number JSON cannot hold (write it as a plain decimal)")
	}
	return strconv.FormatFloat(f, 'g', -1, 64), nil
}

// json writes the YAML value n as JSON, numbers exact as written.
func (w *walker) json(b *strings.Builder, n *yaml.Node, path string) error {
	n, err := w.resolve(n, path)
	if err != nil {
		return err
	}
	switch n.Kind {
	case yaml.MappingNode:
		entries, err := w.mapping(n, path)
		if err != nil {
			return err
		}
		b.WriteByte('{')
		for i, e := range entries {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(e.name)
			b.Write(k)
			b.WriteByte(':')
			if err := w.json(b, e.val, path+segment(e.name)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := w.json(b, c, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return errAt(path, n, "invalid boolean")
			}
			b.WriteString(strconv.FormatBool(v))
		case "!!int", "!!float":
			num, err := jsonNumberOf(n, path)
			if err != nil {
				return err
			}
			b.WriteString(num)
		default:
			v, err := w.expand(n.Value, path, n)
			if err != nil {
				return err
			}
			s, _ := json.Marshal(v)
			b.Write(s)
		}
	default:
		return errAt(path, n, "unexpected YAML node")
	}
	return nil
}

// expand substitutes ${NAME} variables; $$ is a literal $.
func (w *walker) expand(s, path string, n *yaml.Node) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
		case i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errAt(path, n, "unterminated ${ (write ${NAME}, or $$ for a literal $)")
			}
			name := s[i+2 : i+2+end]
			if !varName.MatchString(name) {
				return "", errAt(path, n, fmt.Sprintf("invalid variable name %q in ${…}: expected letters, digits and _, not starting with a digit", name))
			}
			v, ok := w.lookup(name)
			if !ok {
				return "", errAt(path, n, "environment variable "+name+" is not set")
			}
			b.WriteString(v)
			i += 2 + end
		default:
			return "", errAt(path, n, "a lone $ (write ${NAME} for a variable, or $$ for a literal $)")
		}
	}
	return b.String(), nil
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
