package configfile

import (
	"strings"

	"github.com/polygateway/polygateway/internal/config"
)

// field is one YAML field that becomes one environment key.
type field struct {
	name string      // the YAML name (lower case)
	key  string      // the environment key, or its tail after "{SCOPE}__" or "{SCOPE}__{PROVIDER}__{N}__"
	kind config.Kind // the value's type
	doc  config.KeyDoc
}

// section is the fields of one YAML mapping, in key table order.
type section struct {
	fields []field
	byName map[string]field
}

func (s *section) add(f field) {
	if s.byName == nil {
		s.byName = map[string]field{}
	}
	s.fields = append(s.fields, f)
	s.byName[f.name] = f
}

// names lists the section's field names in table order.
func (s *section) names() []string {
	out := make([]string, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.name
	}
	return out
}

// layout is the file's shape, derived from the key table so that every key
// the environment supports has exactly one place in the file.
type layout struct {
	assembly, defaults, server, scope, source section
	// groups are the mappings inside a scope ({SCOPE}__{GROUP}__{FIELD});
	// sourceGroups those inside a source
	// ({SCOPE}__{PROVIDER}__{N}__{GROUP}__{FIELD}).
	groups, sourceGroups groupSet
}

// groupSet is the group mappings of a scope or of a source.
type groupSet struct {
	byName map[string]*section // by YAML name
	order  []string            // YAML names in table order
	key    map[string]string   // YAML name -> GROUP
}

// place adds the key d, tail after its scope's or source's prefix: to
// flat, or, when tail is GROUP__FIELD, to the group's section.
func (gs *groupSet) place(flat *section, tail string, d config.KeyDoc) {
	g, f, ok := strings.Cut(tail, "__")
	if !ok {
		flat.add(field{name: strings.ToLower(tail), key: tail, kind: d.Kind, doc: d})
		return
	}
	gn := strings.ToLower(g)
	sec := gs.byName[gn]
	if sec == nil {
		sec = &section{}
		gs.byName[gn], gs.key[gn] = sec, g
		gs.order = append(gs.order, gn)
	}
	sec.add(field{name: strings.ToLower(f), key: tail, kind: d.Kind, doc: d})
}

const (
	scopeP  = "{SCOPE}__"
	sourceP = "{SCOPE}__{PROVIDER}__{N}__"
)

// Top-level sections of a file.
var topLevel = []string{"assembly", "defaults", "scopes", "server"}

// Fields of a scope that are not keys.
const (
	fieldSources  = "sources"
	fieldProvider = "provider"
)

// keysNotInFiles are environment keys a file has no use for: a file holds
// only what it names, so there is nothing for other software to escape.
var keysNotInFiles = map[string]bool{"PGW_ALLOW_KEYS": true}

var shape = deriveLayout(config.Keys())

func deriveLayout(keys []config.KeyDoc) *layout {
	l := &layout{groups: groupSet{byName: map[string]*section{}, key: map[string]string{}},
		sourceGroups: groupSet{byName: map[string]*section{}, key: map[string]string{}}}
	for _, d := range keys {
		if d.Reader == config.ReaderTooling || d.Reader == config.ReaderNobody || keysNotInFiles[d.Pattern] {
			continue
		}
		p := d.Pattern
		switch {
		case strings.HasPrefix(p, sourceP):
			l.sourceGroups.place(&l.source, strings.TrimPrefix(p, sourceP), d)
		case strings.HasPrefix(p, scopeP):
			l.groups.place(&l.scope, strings.TrimPrefix(p, scopeP), d)
		case d.Reader == config.ReaderGateway:
			l.server.add(field{name: strings.ToLower(strings.TrimPrefix(p, "PGW_")), key: p, kind: d.Kind, doc: d})
		case strings.HasPrefix(p, "LLM_"):
			l.defaults.add(field{name: strings.ToLower(strings.TrimPrefix(p, "LLM_")), key: p, kind: d.Kind, doc: d})
		default: // PGW_* assembly keys and REDIS_URL
			l.assembly.add(field{name: strings.ToLower(strings.TrimPrefix(p, "PGW_")), key: p, kind: d.Kind, doc: d})
		}
	}
	return l
}

// scopeFieldNames lists every field a scope mapping may hold, for
// suggestions.
func (l *layout) scopeFieldNames() []string {
	out := append(l.scope.names(), l.groups.order...)
	return append(out, fieldSources)
}

// sourceFieldNames lists every field a source mapping may hold.
func (l *layout) sourceFieldNames() []string {
	out := append([]string{fieldProvider}, l.source.names()...)
	return append(out, l.sourceGroups.order...)
}
