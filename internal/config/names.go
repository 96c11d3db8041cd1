package config

import (
	"fmt"
	"slices"
	"strings"
)

// Families of keys without a scope that are checked by name: every key that
// starts with one of them and holds no "__" must be known to some reader
// (see KeyDoc.Reader), be an escape (PGW_X_…) or be allowed by
// PGW_ALLOW_KEYS. Keys holding "__" belong to a scope (maybe another one,
// e.g. LLM_FAST__…) and are checked by the load of that scope.
var checkedFamilies = []string{"PGW_", "LLM_"}

// allowKey is the key naming the keys of other software.
const allowKey = "PGW_ALLOW_KEYS"

// allowList is the parsed PGW_ALLOW_KEYS: exact names and prefixes.
type allowList struct {
	exact    map[string]bool
	prefixes []string
}

func (a allowList) allows(key string) bool {
	if a.exact[key] {
		return true
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// parseAllowList parses PGW_ALLOW_KEYS: comma-separated key names of
// letters, digits and underscores, each optionally ending in "*" (a
// prefix; "*" alone allows every key).
func parseAllowList(env map[string]string) (allowList, *Error) {
	a := allowList{exact: map[string]bool{}}
	v, ok := env[allowKey]
	if !ok {
		return a, nil
	}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, prefix := strings.CutSuffix(item, "*")
		if strings.IndexFunc(name, func(r rune) bool {
			return (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_'
		}) >= 0 {
			return a, errf(allowKey, fmt.Sprintf("invalid entry %s: expected a key name of letters, digits and _, optionally ending in * (a prefix)", show(item)))
		}
		if prefix {
			a.prefixes = append(a.prefixes, name)
		} else {
			a.exact[name] = true
		}
	}
	return a, nil
}

// knownName reports whether key (without "__") is known to some reader,
// and which.
func knownName(key string) (string, bool) {
	if r, ok := known.names[key]; ok {
		return r, true
	}
	for p, r := range known.prefixes {
		if strings.HasPrefix(key, p) && len(key) > len(p) {
			return r, true
		}
	}
	return "", false
}

// checkNames returns an error for every key, in sorted order, of a checked
// family (PGW_*, LLM_* without "__") that no reader knows and that is not
// allowed.
func checkNames(env map[string]string, allow allowList) []*Error {
	var unknown []string
	for k := range env {
		if strings.Contains(k, "__") || allow.allows(k) {
			continue
		}
		for _, fam := range checkedFamilies {
			if _, ok := knownName(k); strings.HasPrefix(k, fam) && !ok {
				unknown = append(unknown, k)
			}
		}
	}
	slices.Sort(unknown)
	errs := make([]*Error, len(unknown))
	for i, k := range unknown {
		errs[i] = errf(k, unknownNameProblem(k))
	}
	return errs
}

// unknownNameProblem words the error of an unknown PGW_* or LLM_* key.
func unknownNameProblem(key string) string {
	fam := "PGW_"
	if !strings.HasPrefix(key, fam) {
		fam = "LLM_"
	}
	var cands []string
	for name, r := range known.names {
		if strings.HasPrefix(name, fam) && r != ReaderTooling {
			cands = append(cands, strings.TrimPrefix(name, fam))
		}
	}
	slices.Sort(cands)
	msg := "unknown key"
	if best := Suggest(strings.TrimPrefix(key, fam), cands); best != "" {
		msg += " (did you mean " + fam + best + "?)"
	} else if s, rest, ok := splitScopeKey(key); ok {
		msg += " (did you mean " + s + "__" + rest + "? scope keys take a double underscore)"
	}
	msg += "; " + fam + "* keys are reserved for PolyGateway (see docs/configuration.md)"
	if fam == "PGW_" {
		msg += ": name another program's key PGW_X_… or list it in " + allowKey
	} else {
		msg += ": list another program's key in " + allowKey
	}
	return msg
}

// splitScopeKey splits a key such as LLM_SELECTOR, a single-part scope key
// written with one underscore, into its scope and name.
func splitScopeKey(key string) (scope, name string, ok bool) {
	for i := 1; i < len(key)-1; i++ {
		if key[i] != '_' {
			continue
		}
		s, rest := key[:i], key[i+1:]
		if scopeRE.MatchString(s) && (slices.Contains(known.singles, rest) || slices.Contains(known.extension, rest)) {
			return s, rest, true
		}
	}
	return "", "", false
}

// CheckKeys checks the names of the keys without a scope in env: every
// PGW_* and flat LLM_* key (one without "__") must be known to the settings
// parser, an embedding client, the gateway or this repository's tooling, be
// an escape (PGW_X_…) or be listed in PGW_ALLOW_KEYS. It returns a *Error
// naming every offending key in sorted order, each with a suggestion when
// one is close, or nil. Load does the same check; the gateway calls
// CheckKeys before its own keys.
func CheckKeys(env map[string]string) error {
	allow, err := parseAllowList(env)
	if err != nil {
		return err
	}
	if err := Join(checkNames(env, allow)...); err != nil {
		return err
	}
	return nil
}

// Suggest returns the candidate that name is most likely a misspelling of,
// or "" when none is close. A candidate is close when both are equal after
// folding the common slips (case, doubled letters, -ISE for -IZE, plural
// and _S endings), or when their edit distance (insertions, deletions,
// substitutions and swaps of neighbours) is small for the candidate's
// length: 1 up to 4 characters, 2 up to 10, 3 beyond, and less than half
// of it. Ties go to the earlier candidate.
func Suggest(name string, candidates []string) string {
	folded := fold(name)
	for _, c := range candidates {
		if c != name && fold(c) == folded {
			return c
		}
	}
	best, bestD := "", -1
	up := strings.ToUpper(name)
	for _, c := range candidates {
		if len(up) > len(c)+3 || len(c) > len(up)+3 {
			continue // too far apart for any limit (and bounds the work)
		}
		d := osaDistance(up, strings.ToUpper(c))
		limit := 3
		switch {
		case len(c) <= 4:
			limit = 1
		case len(c) <= 10:
			limit = 2
		}
		if d == 0 || d > limit || 2*d >= len(c) {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// fold normalises the common slips in a key name: case, -ISE/-YSE for
// -IZE/-YZE, -IES for -Y, a plural S, an _S unit suffix and doubled
// letters, word by word (words are separated by "_").
func fold(s string) string {
	words := strings.Split(strings.ToUpper(s), "_")
	out := words[:0]
	for _, w := range words {
		if w == "S" || w == "" {
			continue
		}
		w = strings.ReplaceAll(w, "ISE", "IZE")
		w = strings.ReplaceAll(w, "YSE", "YZE")
		switch {
		case strings.HasSuffix(w, "IES") && len(w) > 4:
			w = strings.TrimSuffix(w, "IES") + "Y"
		case strings.HasSuffix(w, "S") && !strings.HasSuffix(w, "SS") && len(w) > 3:
			w = strings.TrimSuffix(w, "S")
		}
		var b strings.Builder
		for i := 0; i < len(w); i++ {
			if i == 0 || w[i] != w[i-1] {
				b.WriteByte(w[i])
			}
		}
		out = append(out, b.String())
	}
	return strings.Join(out, "_")
}

// osaDistance is the optimal string alignment distance of a and b:
// Levenshtein plus swaps of two neighbouring characters, byte-wise.
func osaDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
		}
	}
	return rows[len(a)][len(b)]
}
