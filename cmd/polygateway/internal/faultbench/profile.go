package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/joho/godotenv"
)

// profile is the part of an env file (docs/production.env) that governs
// faults: its one chat scope's keys, its preferred source and its
// fallback, and the server keys that change how a failure reaches a
// client. Client-facing limits (client keys, rates) and the backends are
// not under test and are left out: every scenario runs on memory backends
// with one client.
type profile struct {
	scope     string
	primary   source
	fallback  source
	scopeKeys map[string]string // the tail after "{SCOPE}__", e.g. RETRY__TIER_PATIENCE_S
	server    map[string]string // applied server keys
}

// source is one source of the profile: its provider and number, as in
// its keys ({SCOPE}__{PROVIDER}__{N}__…), and its fields.
type source struct {
	provider string // upper-case
	n        string
	fields   map[string]string
}

// name is the source's name in the gateway's answers (openai_1).
func (s source) name() string { return strings.ToLower(s.provider) + "_" + s.n }

// topologyFields are the source fields both runs keep: what the source
// is (its model), the attempt's cap every source needs, and its tier. The
// defaults run has only these; the profile run adds the other fields.
var topologyFields = []string{"MODEL", "TIMEOUT_S", "PRIORITY"}

// replacedFields point at the real provider: every scenario replaces them.
var replacedFields = []string{"BASE_URL", "API_KEY"}

// serverKeys are the server keys of the profile a scenario applies.
var serverKeys = []string{"PGW_STREAM_COMMIT", "PGW_WRITE_TIMEOUT_S", "PGW_MAX_IN_FLIGHT"}

// readProfile reads the env file at path.
func readProfile(path string) (*profile, error) {
	env, err := godotenv.Read(path)
	if err != nil {
		return nil, fmt.Errorf("reading the profile: %w", err)
	}
	routes := strings.Split(env["PGW_ROUTES"], ",")
	_, scope, ok := strings.Cut(routes[0], "=")
	if scope = strings.ToUpper(strings.TrimSpace(scope)); !ok || scope == "" || len(routes) != 1 {
		return nil, fmt.Errorf("%s: want PGW_ROUTES with one route (model=SCOPE)", path)
	}
	p := &profile{scope: scope, scopeKeys: map[string]string{}, server: map[string]string{}}
	sources := map[string]*source{}
	for k, v := range env {
		if slices.Contains(serverKeys, k) {
			p.server[k] = v
		}
		tail, ok := strings.CutPrefix(k, scope+"__")
		if !ok {
			continue
		}
		parts := strings.Split(tail, "__")
		if len(parts) == 3 {
			if _, err := strconv.Atoi(parts[1]); err == nil {
				id := parts[0] + "__" + parts[1]
				s := sources[id]
				if s == nil {
					s = &source{provider: parts[0], n: parts[1], fields: map[string]string{}}
					sources[id] = s
				}
				s.fields[parts[2]] = v
				continue
			}
		}
		p.scopeKeys[tail] = v
	}
	// The preferred source is the first of the best tier, the fallback the
	// first of the next one.
	all := slices.SortedFunc(maps.Values(sources), func(a, b *source) int {
		return cmp.Or(cmp.Compare(a.tier(), b.tier()), cmp.Compare(a.provider+a.n, b.provider+b.n))
	})
	for _, s := range all {
		switch {
		case p.primary.provider == "":
			p.primary = *s
		case p.fallback.provider == "" && s.tier() > p.primary.tier():
			p.fallback = *s
		}
	}
	if p.fallback.provider == "" {
		return nil, errors.New(path + ": want a source in a fallback tier (PRIORITY above the preferred source's)")
	}
	return p, nil
}

func (s *source) tier() int {
	n, _ := strconv.Atoi(s.fields["PRIORITY"])
	return n
}

// gatewayEnv adds to env the keys of scenario scope pointing its primary
// and fallback at their fakes: with tuned, every key of the profile, else
// only the topology (the library's defaults). overrides are set last in
// both runs (the scenario's own topology, e.g. the fallback's MODEL).
func (p *profile) gatewayEnv(env map[string]string, scope string, tuned bool, urls [2]string, overrides [2]map[string]string) {
	for r, s := range []source{p.primary, p.fallback} {
		prefix := scope + "__" + s.provider + "__" + s.n + "__"
		for f, v := range s.fields {
			if slices.Contains(replacedFields, f) || !tuned && !slices.Contains(topologyFields, f) {
				continue
			}
			env[prefix+f] = v
		}
		env[prefix+"BASE_URL"], env[prefix+"API_KEY"] = urls[r], "sk-faultbench-fake"
		for f, v := range overrides[r] {
			env[prefix+f] = v
		}
	}
	if tuned {
		for k, v := range p.scopeKeys {
			env[scope+"__"+k] = v
		}
		maps.Copy(env, p.server)
	}
}

// describe lists what the profile run adds to the defaults, for the
// report.
func (p *profile) describe() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(p.server)) {
		out = append(out, "`"+k+"="+p.server[k]+"`")
	}
	for _, k := range slices.Sorted(maps.Keys(p.scopeKeys)) {
		out = append(out, "`"+p.scope+"__"+k+"="+p.scopeKeys[k]+"`")
	}
	for _, s := range []source{p.primary, p.fallback} {
		for _, f := range slices.Sorted(maps.Keys(s.fields)) {
			if !slices.Contains(replacedFields, f) && !slices.Contains(topologyFields, f) {
				out = append(out, s.name()+" `"+f+"="+s.fields[f]+"`")
			}
		}
	}
	return strings.Join(out, ", ")
}
