package proxy

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

func TestParsePriority(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		def  polygateway.Priority
		want polygateway.Priority
		bad  bool
	}{
		{"", polygateway.PriorityNormal, polygateway.PriorityNormal, false},
		{"", polygateway.PriorityBatch, polygateway.PriorityBatch, false},
		{"interactive", polygateway.PriorityBatch, polygateway.PriorityInteractive, false},
		{"normal", polygateway.PriorityBatch, polygateway.PriorityNormal, false},
		{"batch", polygateway.PriorityInteractive, polygateway.PriorityBatch, false},
		{"Batch", polygateway.PriorityNormal, 0, true},
		{"high", polygateway.PriorityNormal, 0, true},
		{"0", polygateway.PriorityNormal, 0, true},
		{"batch,interactive", polygateway.PriorityNormal, 0, true},
	} {
		got, ae := parsePriority(tc.in, tc.def)
		if tc.bad {
			if ae == nil || ae.status != http.StatusBadRequest || ae.param != priorityHeader || !strings.Contains(ae.msg, priorityHeader) {
				t.Errorf("parsePriority(%q) = %v, %+v: want a 400 naming %s", tc.in, got, ae, priorityHeader)
			}
			continue
		}
		if ae != nil || got != tc.want {
			t.Errorf("parsePriority(%q, %v) = %v, %+v: want %v", tc.in, tc.def, got, ae, tc.want)
		}
	}
}

func TestParseClientID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in  string
		bad bool
	}{
		{"", false},
		{"team-a", false},
		{"job:7.run_2", false},
		{strings.Repeat("x", maxClientID), false},
		{strings.Repeat("x", maxClientID+1), true},
		{"a tenant", true},
		{"é", true},
		{"a/b", true},
	} {
		got, ae := parseClientID(tc.in)
		switch {
		case tc.bad && (ae == nil || ae.status != http.StatusBadRequest || ae.param != clientIDHeader):
			t.Errorf("parseClientID(%q) = %q, %+v: want a 400 naming %s", tc.in, got, ae, clientIDHeader)
		case !tc.bad && (ae != nil || got != tc.in):
			t.Errorf("parseClientID(%q) = %q, %+v: want it as it is", tc.in, got, ae)
		}
	}
}

// placeServer is a server of two client keys, the first of which defaults
// to batch (keyed) or none (not keyed).
func placeServer(keyed bool) *Server {
	s := &Server{}
	if keyed {
		for _, k := range []string{"sk-one", "sk-two"} {
			h := sha256.Sum256([]byte(k))
			s.keyHashes, s.keyIDs = append(s.keyHashes, h), append(s.keyIDs, keyID(h))
		}
		s.keyPriorities = []core.Priority{polygateway.PriorityBatch, polygateway.PriorityNormal}
	}
	return s
}

func TestPlaceTakesTheKeyBeforeTheClientIdAndTheHeaderBeforeTheKey(t *testing.T) {
	t.Parallel()
	keyed, open := placeServer(true), placeServer(false)
	for _, tc := range []struct {
		s            *Server
		key          int // ri.key: index + 1, 0 = none
		prio, client string
		want         core.Place
	}{
		{open, 0, "", "", core.Place{}},
		{open, 0, "batch", "team-a", core.Place{Priority: polygateway.PriorityBatch, Tenant: "team-a"}},
		{keyed, 1, "", "team-a", core.Place{Priority: polygateway.PriorityBatch, Tenant: keyed.keyIDs[0]}},
		{keyed, 1, "interactive", "", core.Place{Priority: polygateway.PriorityInteractive, Tenant: keyed.keyIDs[0]}},
		{keyed, 2, "", "", core.Place{Priority: polygateway.PriorityNormal, Tenant: keyed.keyIDs[1]}},
	} {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		r.Header.Set(priorityHeader, tc.prio)
		r.Header.Set(clientIDHeader, tc.client)
		got, ae := tc.s.place(r, &reqInfo{key: tc.key})
		if ae != nil || got != tc.want {
			t.Errorf("key %d, priority %q, client %q: %+v, %+v; want %+v", tc.key, tc.prio, tc.client, got, ae, tc.want)
		}
	}
}
