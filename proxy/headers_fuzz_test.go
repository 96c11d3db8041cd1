package proxy

import (
	"bufio"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/testkit"
)

// FuzzClientHeaders reads a request's client key (Authorization: Bearer),
// X-Client-Id and X-Request-ID as the server receives them — parsed by
// net/http from the wire, in reads of the sizes split gives — and holds
// the server's reading to the header values: a request id or client id is
// the value itself when it is a sane id (1–128 of [A-Za-z0-9._:-]), else
// none; the bearer token is the value after "Bearer " (any case), trimmed;
// a request passes the key check exactly when its token is a configured
// key, and then carries the key's place, never the key, in its client
// name.
func FuzzClientHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"Bearer sk-one", "team-a", "req-1"}, {"bearer   sk-two  ", "", "x.y:z-1"}, {"Basic abc", "bad id", ""}, {"Bearer", "a", strings.Repeat("r", 129)},
		{"BEARER sk-one", "id\x7f", "é"}, {"Bearer sk-one\tx", "___", "-"}, {"", "", ""},
	} {
		f.Add(s[0], s[1], s[2], []byte{7, 0, 130})
	}
	keys := []string{"sk-one", "sk-two"}
	s := &Server{}
	for _, k := range keys {
		s.keyHashes = append(s.keyHashes, sha256.Sum256([]byte(k)))
	}
	f.Fuzz(func(t *testing.T, auth, clientID, requestID string, split []byte) {
		raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n"
		for name, v := range map[string]string{"Authorization": auth, "X-Client-Id": clientID, "X-Request-ID": requestID} {
			if v != "" {
				raw += name + ": " + v + "\r\n"
			}
		}
		r, err := http.ReadRequest(bufio.NewReader(&testkit.SplitReader{Data: []byte(raw + "\r\n"), Sizes: split, Mod: 61}))
		if err != nil {
			return // net/http refuses the header lines
		}
		for name, id := range map[string]string{"X-Client-Id": r.Header.Get("X-Client-Id"), "X-Request-ID": r.Header.Get("X-Request-ID")} {
			got := cleanID(id)
			sane := len(id) >= 1 && len(id) <= 128 && strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == ""
			if sane && got != id || !sane && got != "" {
				t.Fatalf("%s %q read as %q (sane: %v)", name, id, got, sane)
			}
		}
		h := r.Header.Get("Authorization")
		tok, ok := bearer(r)
		if wantOK := len(h) > 7 && strings.EqualFold(h[:7], "bearer "); ok != wantOK || ok && tok != strings.TrimSpace(h[7:]) {
			t.Fatalf("Authorization %q: bearer (%q, %v)", h, tok, ok)
		}
		idx, matched := s.clientKeyIndex(r)
		want := -1
		for i, k := range keys {
			if ok && tok == k {
				want = i
			}
		}
		if matched != (want >= 0) || idx != want {
			t.Fatalf("token %q: key %d (%v), want %d", tok, idx, matched, want)
		}
		passed := false
		rec := httptest.NewRecorder()
		s.api(func(http.ResponseWriter, *http.Request) { passed = true }).ServeHTTP(rec, r)
		if passed != matched || !passed && rec.Code != http.StatusUnauthorized {
			t.Fatalf("token %q: passed %v, status %d, want passed %v", tok, passed, rec.Code, matched)
		}
		if matched {
			id := cleanID(r.Header.Get("X-Client-Id"))
			want := "key:" + strconv.Itoa(idx+1)
			if id != "" {
				want += "/id:" + id
			}
			if name := clientName(idx, id, r); name != want {
				t.Fatalf("client name %q for key %d and id %q, want %q", name, idx, id, want)
			}
		}
	})
}
