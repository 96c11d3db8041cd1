package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
)

// Bounds of a configuration file, checked before it is parsed further.
const (
	// MaxFileBytes is the largest file Load reads: 1 MiB. It also bounds
	// the text of the file's values and field names, counting an alias's
	// target each time the alias is used.
	MaxFileBytes = 1 << 20
	// MaxNodes is the largest number of YAML nodes a file may hold, counting
	// an alias's target each time the alias is used.
	MaxNodes = 100_000
)

// File is a parsed configuration file: the environment keys it stands for
// and, for each of them, its place in the file. It is immutable and safe for
// concurrent use.
type File struct {
	name    string
	env     map[string]string
	paths   map[string]string // environment key -> YAML path
	lines   map[string]int    // environment key -> line of its value
	sources map[string][]sourceRef
	scopes  []string
}

// sourceRef is one entry of a scope's sources list.
type sourceRef struct {
	provider string // upper case
	n        int
}

// Option configures Load and Parse.
type Option func(*options)

type options struct {
	lookup    func(string) (string, bool)
	unchecked bool
}

// WithoutScopeCheck leaves the settings of the file's scopes to be checked
// when a client is assembled from them (the gateway does, reporting their
// problems with every other): Parse then checks the file's shape only.
func WithoutScopeCheck() Option { return func(o *options) { o.unchecked = true } }

// WithVariables takes the ${NAME} variables from vars (copied) instead of
// the process environment.
func WithVariables(vars map[string]string) Option {
	vars = maps.Clone(vars)
	return func(o *options) {
		o.lookup = func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	}
}

// WithLookup takes the ${NAME} variables from lookup instead of the process
// environment. lookup reports whether the variable is set.
func WithLookup(lookup func(name string) (string, bool)) Option {
	return func(o *options) { o.lookup = lookup }
}

// Load reads and parses the configuration file at path (see Read). Errors
// are *polygateway.ConfigError: Key is the path of the file, or the path of
// the bad value inside it.
func Load(path string, opts ...Option) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, &config.Error{Key: path, Problem: "cannot read the configuration file: " + pathProblem(err), Err: err}
	}
	defer fh.Close()
	return Read(path, fh, opts...)
}

// Read reads a configuration file's content from r to its end and parses
// it (see Parse); name labels it in errors. A file larger than
// MaxFileBytes is refused once that much is read, before it is parsed.
func Read(name string, r io.Reader, opts ...Option) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, &config.Error{Key: label(name), Problem: "cannot read the configuration file: " + pathProblem(err), Err: err}
	}
	return Parse(name, data, opts...)
}

// pathProblem is the reason of a file error without repeating the path.
func pathProblem(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse parses a configuration file's content; name labels it in errors
// ("" for none). It checks the file's shape (unknown fields are errors,
// with a suggestion), substitutes the variables, translates the file into
// environment keys and validates every scope it configures as
// polygateway.LoadSettings does. Embedding keys are validated when an
// embeddings client is assembled (use Explain on its error), and the
// gateway's keys by the gateway.
func Parse(name string, data []byte, opts ...Option) (*File, error) {
	o := options{lookup: os.LookupEnv}
	for _, opt := range opts {
		opt(&o)
	}
	if len(data) > MaxFileBytes {
		return nil, &config.Error{Key: label(name), Problem: fmt.Sprintf("the configuration file is larger than %d bytes", MaxFileBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &config.Error{Key: label(name), Problem: "the configuration file is empty"}
		}
		return nil, &config.Error{Key: label(name), Problem: "invalid YAML: " + yamlProblem(err)}
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return nil, &config.Error{Key: label(name), Problem: "more than one YAML document (---): keep the configuration in one"}
	}
	f := &File{name: name, env: map[string]string{}, paths: map[string]string{}, lines: map[string]int{}, sources: map[string][]sourceRef{}}
	w := &walker{f: f, lookup: o.lookup}
	if err := w.top(&doc); err != nil {
		return nil, err
	}
	var errs []*config.Error
	for _, scope := range f.scopes {
		if _, err := f.Settings(scope); err != nil && !o.unchecked {
			var ce *config.Error
			if !errors.As(err, &ce) {
				return nil, err
			}
			errs = append(errs, ce)
		}
	}
	if err := config.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

func label(name string) string {
	if name == "" {
		return "configuration file"
	}
	return name
}

// yamlProblem words a YAML parse error; the parser's messages quote no
// values beyond a token, but are kept to their first line.
func yamlProblem(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg, _, _ = strings.Cut(msg, "\n")
	return msg
}

// Env returns the environment keys the file stands for (a copy): give it to
// polygateway.WithEnv to assemble any client from the file.
func (f *File) Env() map[string]string { return maps.Clone(f.env) }

// Scopes lists the file's scopes, upper-cased, in file order.
func (f *File) Scopes() []string { return slices.Clone(f.scopes) }

// Settings parses and validates the settings of scope (case-insensitive)
// from the file, as polygateway.LoadSettings does from the equivalent
// environment. An error is a *polygateway.ConfigError naming the path.
func (f *File) Settings(scope string) (core.GatewaySettings, error) {
	s, err := config.Load(scope, f.env)
	if err != nil {
		return s, f.Explain(err)
	}
	return s, nil
}

// Explain rewrites a configuration error about the file's keys in the
// file's terms: each problem of the *polygateway.ConfigError in err gets
// the path of its key (and of every key its problem names) and the line of
// the value. Other errors, and keys with no place in a file, are returned
// unchanged.
func (f *File) Explain(err error) error {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return err
	}
	if len(ce.All) == 0 {
		if _, ok := f.Path(ce.Key); !ok {
			return err
		}
	}
	var out []*config.Error
	for _, p := range ce.Problems() {
		out = append(out, f.explain(p))
	}
	return config.Join(out...)
}

// explain rewrites one problem.
func (f *File) explain(ce *config.Error) *config.Error {
	path, ok := f.Path(ce.Key)
	if !ok {
		return ce
	}
	problem := keyToken.ReplaceAllStringFunc(ce.Problem, func(tok string) string {
		if p, ok := f.Path(tok); ok {
			return p
		}
		return tok
	})
	if line := f.lines[ce.Key]; line > 0 {
		problem += fmt.Sprintf(" (line %d)", line)
	}
	return &config.Error{Key: path, Problem: problem, Err: ce.Err}
}

// Name returns the file's name, as given to Load or Parse.
func (f *File) Name() string { return f.name }

// Route returns the path and line of the value of an environment key the
// file sets or, with model, of model's entry in the routes mapping of the
// key (server.routes, server.embed_routes); ok is false when the file has
// no such value.
func (f *File) Route(key, model string) (path string, line int, ok bool) {
	if model != "" {
		key += "=" + model
	}
	path, ok = f.paths[key]
	return path, f.lines[key], ok
}

// keyToken matches environment keys inside a problem text.
var keyToken = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_{1,2}(?:[A-Z0-9]+|\{[A-Z]+\}))+\b`)

// Path returns the file path of an environment key (e.g.
// "LLM__OPENAI__2__TIMEOUT_S" is "scopes.LLM.sources[3].timeout_s" when the
// second openai source is the fourth entry), whether or not the file sets
// it. ok is false for keys that have no place in a file.
func (f *File) Path(key string) (path string, ok bool) {
	if p, ok := f.paths[key]; ok {
		return p, true
	}
	for _, sec := range []struct {
		s   *section
		top string
	}{{&shape.assembly, "assembly"}, {&shape.defaults, "defaults"}, {&shape.server, "server"}} {
		for _, fl := range sec.s.fields {
			if fl.key == key {
				return sec.top + "." + fl.name, true
			}
		}
	}
	parts := strings.Split(key, "__")
	if len(parts) < 2 || !scopeRE.MatchString(parts[0]) {
		return "", false
	}
	scope := "scopes" + segment(parts[0])
	switch len(parts) {
	case 2:
		if fl, ok := shape.scope.byName[strings.ToLower(parts[1])]; ok && fl.key == parts[1] {
			return scope + "." + fl.name, true
		}
		if strings.HasPrefix(parts[1], "X_") {
			return scope + "." + strings.ToLower(parts[1]), true
		}
	case 3:
		gn := strings.ToLower(parts[1])
		if g, ok := shape.groups.byName[gn]; ok && shape.groups.key[gn] == parts[1] {
			if fl, ok := g.byName[strings.ToLower(parts[2])]; ok {
				return scope + "." + gn + "." + fl.name, true
			}
		}
	case 4, 5:
		// A source's field, or a field of a source's group.
		tail, name := parts[3], strings.ToLower(parts[3])
		fl, ok := shape.source.byName[name]
		if len(parts) == 5 {
			tail = parts[3] + "__" + parts[4]
			fl, ok = field{}, false
			if g := shape.sourceGroups.byName[strings.ToLower(parts[3])]; g != nil {
				fl, ok = g.byName[strings.ToLower(parts[4])]
				name = strings.ToLower(parts[3]) + "." + fl.name
			}
		}
		if !ok || fl.key != tail {
			if parts[1] == "{PROVIDER}" {
				return scope + "." + fieldSources, true
			}
			return "", false
		}
		if parts[1] == "{PROVIDER}" {
			return scope + "." + fieldSources, true
		}
		n, err := strconv.Atoi(parts[2])
		if err != nil {
			return "", false
		}
		for i, ref := range f.sources[parts[0]] {
			if ref.provider == parts[1] && ref.n == n {
				return fmt.Sprintf("%s.%s[%d].%s", scope, fieldSources, i, name), true
			}
		}
	}
	return "", false
}

// scopeRE and providerRE are the settings parser's rules for scope names
// and providers (upper-cased).
var (
	scopeRE    = regexp.MustCompile(`^[A-Z](?:[A-Z0-9]|_[A-Z0-9])*$`)
	providerRE = regexp.MustCompile(`^[A-Z0-9](?:[A-Z0-9]|_[A-Z0-9])*$`)
	plainName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// segment renders one path segment: .name, or ["name"] when it needs quotes.
func segment(name string) string {
	if plainName.MatchString(name) {
		return "." + name
	}
	return "[" + strconv.Quote(name) + "]"
}
