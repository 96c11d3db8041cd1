package config

import (
	"fmt"
	"slices"
	"strings"
)

// classifyKey checks the shape of one {SCOPE}__ key and records it.
func (l *loader) classifyKey(k string, seen map[sourceID]bool) *Error {
	parts := strings.Split(k[len(l.prefix):], "__")
	if slices.Contains(parts, "") {
		return errf(k, "malformed key: empty part (check the double underscores); "+l.shapes())
	}
	switch len(parts) {
	case 1:
		name := parts[0]
		if fields, isGroup := known.groups[name]; isGroup {
			return errf(k, fmt.Sprintf("incomplete key: expected %s%s__{FIELD} with FIELD one of %s", l.prefix, name, strings.Join(fields, ", ")))
		}
		if slices.Contains(known.singles, name) {
			l.recognised = append(l.recognised, k)
			return nil
		}
		if slices.Contains(known.extension, name) || strings.HasPrefix(name, "X_") {
			// For a sibling client (embed), or the user's own code.
			l.s.Extra[name] = l.get(k).val
			return nil
		}
		if where := l.fieldHomes(name); where != nil {
			// A known FIELD without its group or source: a typo, not Extra.
			return errf(k, "incomplete key: "+name+" is a field of "+strings.Join(where, " or ")+", not a scope key")
		}
		return errf(k, l.unknownSingle(name))
	case 2:
		group, field := parts[0], parts[1]
		fields, isGroup := known.groups[group]
		if !isGroup {
			hint := ""
			if best := Suggest(group, known.groupOrder); best != "" {
				hint = " (did you mean " + l.prefix + best + "__" + field + "?)"
			}
			return errf(k, fmt.Sprintf("malformed key: %s is not one of the groups %s%s (a source key needs {PROVIDER}__{N}__{FIELD}); %s",
				show(group), strings.Join(known.groupOrder, ", "), hint, l.shapes()))
		}
		if !slices.Contains(fields, field) {
			return errf(k, unknownField(field, fields, "under "+l.prefix+group))
		}
		l.recognised = append(l.recognised, k)
	case 3, 4:
		return l.sourceKey(k, parts, seen)
	default:
		return errf(k, "malformed key: too many parts; "+l.shapes())
	}
	return nil
}

// sourceKey checks the shape of a source's key {PROVIDER}__{N}__{FIELD}
// or {PROVIDER}__{N}__{GROUP}__{FIELD} and records it.
func (l *loader) sourceKey(k string, parts []string, seen map[sourceID]bool) *Error {
	provider, n, field := parts[0], parts[1], parts[len(parts)-1]
	if err := checkSourceID(k, l.prefix, provider, n, strings.Join(parts[2:], "__")); err != nil {
		return err
	}
	src := l.prefix + provider + "__" + n + "__"
	if len(parts) == 4 {
		// A source's group.
		group := parts[2]
		fields, isGroup := known.sourceGroups[group]
		if !isGroup {
			hint := ""
			if best := Suggest(group, known.sourceGroupOrder); best != "" {
				hint = " (did you mean " + src + best + "__" + field + "?)"
			}
			return errf(k, fmt.Sprintf("malformed key: too many parts for a source field, and %s is not one of the source groups %s%s; %s",
				show(group), strings.Join(known.sourceGroupOrder, ", "), hint, l.shapes()))
		}
		if !slices.Contains(fields, field) {
			msg := unknownField(field, fields, "under "+src+group)
			if slices.Contains(known.groups[group], field) {
				msg += " (" + field + " is set for the whole scope only: " + l.prefix + group + "__" + field + ")"
			}
			return errf(k, msg)
		}
	} else if !slices.Contains(known.source, field) {
		if fields, isGroup := known.sourceGroups[field]; isGroup {
			return errf(k, fmt.Sprintf("incomplete key: expected %s%s__{FIELD} with FIELD one of %s", src, field, strings.Join(fields, ", ")))
		}
		for _, g := range known.sourceGroupOrder {
			if slices.Contains(known.sourceGroups[g], field) {
				return errf(k, "incomplete key: "+field+" is a field of "+src+g+"__"+field+", not of a source itself")
			}
		}
		return errf(k, unknownField(field, known.source, "of a source"))
	}
	return l.recognise(k, provider, n, seen)
}

// fieldHomes lists the key patterns in which name is a known FIELD, or nil.
func (l *loader) fieldHomes(name string) []string {
	var homes []string
	for _, g := range known.groupOrder {
		if slices.Contains(known.groups[g], name) {
			homes = append(homes, l.prefix+g+"__"+name)
		}
	}
	if slices.Contains(known.source, name) {
		homes = append(homes, l.prefix+"{PROVIDER}__{N}__"+name)
	}
	for _, g := range known.sourceGroupOrder {
		if slices.Contains(known.sourceGroups[g], name) {
			homes = append(homes, l.prefix+"{PROVIDER}__{N}__"+g+"__"+name)
		}
	}
	return homes
}

func (l *loader) shapes() string {
	p := l.prefix
	var srcGroups []string
	for _, g := range known.sourceGroupOrder {
		srcGroups = append(srcGroups, p+"{PROVIDER}__{N}__"+g+"__{FIELD}")
	}
	return fmt.Sprintf("expected %s{PROVIDER}__{N}__{FIELD}, %s, %s{GROUP}__{FIELD} (GROUP one of %s) or %s{NAME}",
		p, strings.Join(srcGroups, ", "), p, strings.Join(known.groupOrder, ", "), p)
}

// unknownField words an unknown-FIELD error, suggesting the closest known one.
func unknownField(field string, fields []string, where string) string {
	msg := fmt.Sprintf("unknown field %s %s", show(field), where)
	if best := Suggest(field, fields); best != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", best)
	}
	return msg + "; known fields: " + strings.Join(fields, ", ")
}

// unknownSingle words the error of an unknown single-part scope key.
func (l *loader) unknownSingle(name string) string {
	cands := slices.Concat(known.singles, known.extension, known.groupOrder)
	msg := fmt.Sprintf("unknown scope key %s", show(name))
	if best := Suggest(name, cands); best != "" {
		if _, isGroup := known.groups[best]; isGroup {
			best += "__{FIELD}"
		}
		msg += " (did you mean " + l.prefix + best + "?)"
	}
	return msg + fmt.Sprintf("; known: %s, the embedding keys %s and the groups %s; name a key for your own code %sX_…",
		strings.Join(known.singles, ", "), strings.Join(known.extension, ", "), strings.Join(known.groupOrder, ", "), l.prefix)
}
