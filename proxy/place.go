package proxy

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// The headers that place a governed request in the admission queue.
const (
	// priorityHeader is the request's priority class: interactive, normal
	// or batch (default: its client key's ClientPriorities entry, else
	// normal).
	priorityHeader = "X-PolyGateway-Priority"
	// clientIDHeader is the client's own id: the tenant of a request that
	// carries no client key, a sub-division of the key's rate otherwise.
	clientIDHeader = "X-Client-Id"
)

// maxClientID is the longest X-Client-Id, in bytes (cleanID's bound; well
// under core.MaxTenant).
const maxClientID = 128

// parsePriority reads an X-PolyGateway-Priority value: "" (the header is
// absent) is def; otherwise one of the priority names, as written. Anything
// else is a 400 naming the header.
func parsePriority(v string, def polygateway.Priority) (polygateway.Priority, *apiError) {
	if v == "" {
		return def, nil
	}
	p, err := core.ParsePriority(v)
	if err != nil {
		return def, invalidRequest(http.StatusBadRequest, priorityHeader, "invalid_value",
			priorityHeader+" "+strconv.Quote(v)+" is not a priority (interactive, normal or batch)")
	}
	return p, nil
}

// parseClientID reads an X-Client-Id value of a governed request: "" (the
// header is absent) or an id of 1–128 characters of [A-Za-z0-9._:-].
// Anything else is a 400 naming the header, before the body is read: a
// tenant name is bounded, and never a claim the gateway cannot log.
func parseClientID(v string) (string, *apiError) {
	switch {
	case v == "":
		return "", nil
	case len(v) > maxClientID:
		return "", invalidRequest(http.StatusBadRequest, clientIDHeader, "invalid_value",
			fmt.Sprintf("%s is longer than %d bytes", clientIDHeader, maxClientID))
	case cleanID(v) == "":
		return "", invalidRequest(http.StatusBadRequest, clientIDHeader, "invalid_value",
			clientIDHeader+" "+strconv.Quote(v)+" is not an id (letters, digits, '.', '_', ':' and '-')")
	}
	return v, nil
}

// place is where a governed request stands in the admission queue: its
// priority (the header, else its client key's default, else normal) and
// its tenant (its client key's digest id, else its X-Client-Id, else the
// anonymous tenant). Both headers are read before the body; a bad one is a
// 400 naming it.
func (s *Server) place(r *http.Request, ri *reqInfo) (core.Place, *apiError) {
	id, ae := parseClientID(r.Header.Get(clientIDHeader))
	if ae != nil {
		return core.Place{}, ae
	}
	def, tenant := polygateway.PriorityNormal, id
	if k := ri.key - 1; k >= 0 && k < len(s.keyIDs) {
		tenant = s.keyIDs[k]
		if k < len(s.keyPriorities) {
			def = s.keyPriorities[k]
		}
	}
	p, ae := parsePriority(strings.TrimSpace(r.Header.Get(priorityHeader)), def)
	if ae != nil {
		return core.Place{}, ae
	}
	return core.Place{Priority: p, Tenant: tenant}, nil
}

// placeOptions are the call options that place an embeddings request's
// calls in the queue (a chat call carries its place in core.Call.Place).
func placeOptions(p core.Place) []polygateway.CallOption {
	return []polygateway.CallOption{polygateway.WithPriority(p.Priority), polygateway.WithTenant(p.Tenant)}
}

// keyPriorities returns the default priority of each client key, by key
// index, from ClientPriorities (nil when it is empty). Every entry must
// name the digest id of a configured key and a valid priority.
func (c *Config) keyPriorities(hashes [][sha256.Size]byte) ([]core.Priority, error) {
	if len(c.ClientPriorities) == 0 {
		return nil, nil
	}
	if len(hashes) == 0 {
		return nil, fmt.Errorf("proxy: ClientPriorities sets the default priority of client keys: it needs ClientKeys")
	}
	byID := make(map[string]int, len(hashes))
	for i, h := range hashes {
		byID[keyID(h)] = i
	}
	out := make([]core.Priority, len(hashes))
	var bad []string
	for _, id := range slices.Sorted(maps.Keys(c.ClientPriorities)) {
		p := c.ClientPriorities[id]
		i, ok := byID[id]
		switch {
		case !ok:
			bad = append(bad, shownKeyID(id)+" is no client key's id (key- and the first 12 hex digits of the key's SHA-256)")
		case !p.Valid():
			bad = append(bad, fmt.Sprintf("%s: %v is not a priority", shownKeyID(id), p))
		default:
			out[i] = p
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("proxy: ClientPriorities: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

// placeAttrs appends the request's place in the queue to its log line:
// priority and tenant (when it has one) for a governed request, and
// queue_wait_ms when its calls waited in an admission queue.
func (ri *reqInfo) placeAttrs(attrs []slog.Attr) []slog.Attr {
	if !ri.placed {
		return attrs
	}
	attrs = append(attrs, slog.String("priority", ri.place.Priority.String()))
	if ri.place.Tenant != "" {
		attrs = append(attrs, slog.String("tenant", ri.place.Tenant))
	}
	if ri.queueWait > 0 {
		attrs = append(attrs, slog.Float64("queue_wait_ms", ms(ri.queueWait)))
	}
	return attrs
}
