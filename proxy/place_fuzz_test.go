package proxy

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// FuzzPlaceHeaders reads X-PolyGateway-Priority and X-Client-Id as the
// server receives them (parsed by net/http from the wire, in reads of the
// sizes split gives), with or without a client key, and holds the server's
// reading to the contract: the priority is the header's when it names one
// exactly, the key's default when the header is absent, and any other
// value is a 400 naming the header; the tenant is the key's digest id, else
// the client id when it is a sane id (1–128 of [A-Za-z0-9._:-]), and any
// other client id is a 400 naming its header; a tenant is never longer than
// core.MaxTenant.
func FuzzPlaceHeaders(f *testing.F) {
	for _, s := range [][2]string{
		{"batch", "team-a"}, {"interactive", ""}, {"normal", "job:7"}, {"Batch", "x"}, {"", strings.Repeat("t", 129)},
		{" batch ", "a b"}, {"urgent", "é"}, {"", ""},
	} {
		f.Add(s[0], s[1], uint8(0), []byte{5, 0, 200})
		f.Add(s[0], s[1], uint8(1), []byte{})
	}
	keyed, open := placeServer(true), placeServer(false)
	f.Fuzz(func(t *testing.T, prio, clientID string, key uint8, split []byte) {
		raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n"
		for name, v := range map[string]string{priorityHeader: prio, clientIDHeader: clientID} {
			if v != "" {
				raw += name + ": " + v + "\r\n"
			}
		}
		r, err := http.ReadRequest(bufio.NewReader(&testkit.SplitReader{Data: []byte(raw + "\r\n"), Sizes: split, Mod: 61}))
		if err != nil {
			return // net/http refuses the header lines
		}
		s, ri := open, &reqInfo{}
		if k := int(key % 3); k > 0 {
			s, ri.key = keyed, k
		}
		p, c := strings.TrimSpace(r.Header.Get(priorityHeader)), r.Header.Get(clientIDHeader)
		got, ae := s.place(r, ri)
		wantPrio, prioOK := polygateway.PriorityNormal, true
		switch {
		case p == "" && ri.key > 0:
			wantPrio = s.keyPriorities[ri.key-1]
		case p == "":
		default:
			wantPrio, err = core.ParsePriority(p)
			prioOK = err == nil
		}
		saneID := c == "" || len(c) <= maxClientID && strings.Trim(c, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == ""
		switch {
		case !saneID:
			if ae == nil || ae.param != clientIDHeader || ae.status != http.StatusBadRequest {
				t.Fatalf("client id %q: %+v, %+v; want a 400 naming %s", c, got, ae, clientIDHeader)
			}
			return
		case !prioOK:
			if ae == nil || ae.param != priorityHeader || ae.status != http.StatusBadRequest {
				t.Fatalf("priority %q: %+v, %+v; want a 400 naming %s", p, got, ae, priorityHeader)
			}
			return
		case ae != nil:
			t.Fatalf("priority %q, client id %q: refused %+v", p, c, ae)
		}
		wantTenant := c
		if ri.key > 0 {
			wantTenant = s.keyIDs[ri.key-1]
		}
		if got.Priority != wantPrio || got.Tenant != wantTenant || len(got.Tenant) > core.MaxTenant {
			t.Fatalf("priority %q, client id %q, key %d: %+v, want %v and %q", p, c, ri.key, got, wantPrio, wantTenant)
		}
	})
}
