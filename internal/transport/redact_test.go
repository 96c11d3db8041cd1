package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// fragment returns the first run of 8 consecutive bytes of key in text, ""
// when there is none.
func fragment(text, key string) string {
	for j := 0; j+8 <= len(key); j++ {
		if strings.Contains(text, key[j:j+8]) {
			return key[j : j+8]
		}
	}
	return ""
}

// A malformed SSE event that echoes the key near the 120-byte snippet cut
// used to come back with 39 of its 40 characters: the cut came first and
// redaction then matched only the whole key.
func TestMalformedEventKeyAtTheSnippetCutIsRedacted(t *testing.T) {
	t.Parallel()
	for _, at := range []int{60, 80, 100, 112, 113, 119, 130} {
		prefix := `{"choices":[{"delta":{"content":"` + strings.Repeat("x", max(0, at-34))
		event := prefix[:min(len(prefix), at)] + testKey + `"}}]` // not valid JSON: the object never closes
		var logs testkit.Buffer
		c := newClient(t, Config{Logger: logs.TextLogger()})
		srv := newServer(t, sse(data(event), data("[DONE]")))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
		te := asTransient(t, err)
		if !strings.Contains(te.Message, "malformed stream event") {
			t.Fatalf("key at %d: %v", at, err)
		}
		for what, text := range map[string]string{"error": err.Error(), "message": te.Message, "log": logs.String()} {
			if f := fragment(text, testKey); f != "" {
				t.Errorf("key at %d: the %s holds %q of the key: %s", at, what, f, text)
			}
		}
	}
}

// A 500 text body whose key straddles the 64 KiB read limit used to leak
// the part of the key before the limit.
func TestErrorBodyKeyAcrossTheReadLimitIsRedacted(t *testing.T) {
	t.Parallel()
	for _, before := range []int{3, 8, 20, 27, 31} {
		// A proxy's HTML page: the tags go, so the message is short and ends
		// in what the read limit left of the key.
		pad := DefaultMaxErrorBodyBytes - before - len("<html>")
		body := "<html>" + strings.Repeat("<br>", pad/4) + strings.Repeat(" ", pad%4) + testKey + " and more text</html>"
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, body) // the client side checks what arrived
		}))
		var logs testkit.Buffer
		c := newClient(t, Config{Logger: logs.TextLogger()})
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
		te := asTransient(t, err)
		if te.StatusCode != 500 {
			t.Fatalf("status %d", te.StatusCode)
		}
		for what, text := range map[string]string{"error": err.Error(), "log": logs.String()} {
			if f := fragment(text, testKey); f != "" {
				t.Errorf("%d bytes of the key before the limit: the %s holds %q: %q", before, what, f, text)
			}
		}
	}
}

// redirector answers every request with a 307 to target and counts them.
func redirector(target string, hits *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
	})
}

// A source that redirects to another host is a transient failure of the
// source: the other host receives nothing (no Authorization, no api-key)
// and its answer never passes for the source's, with the caller's plain
// http.Client as with the built-in transports.
func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	t.Parallel()
	var foreignHits atomic.Int64
	foreign := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreignHits.Add(1)
		jsonResp(200, `{"choices":[{"message":{"content":"foreign answer"}}]}`)(w, r)
	}))
	for _, tc := range []struct {
		name     string
		client   *http.Client
		provider string
	}{
		{"plain http.Client", &http.Client{}, "openai"},
		{"plain http.Client, azure api-key", &http.Client{}, "azure"},
		{"caller's CheckRedirect that follows everything", &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}, "azure"},
		{"built-in transports", nil, "azure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int64
			srv := newServer(t, redirector(foreign.URL, &hits))
			c := newClient(t, Config{HTTPClient: tc.client})
			src := source(srv, tc.provider)
			for _, stream := range []bool{false, true} {
				resp, err := c.Do(context.Background(), src, chatCall(stream))
				if resp != nil {
					t.Fatalf("stream=%v: the foreign host's answer was accepted: %q", stream, resp.Content)
				}
				te := asTransient(t, err)
				if te.Reason != core.ReasonNetworkError || te.Source != src.Name || te.StatusCode != http.StatusTemporaryRedirect || !errors.Is(err, core.ErrRedirect) {
					t.Fatalf("stream=%v: %#v", stream, te)
				}
				if strings.Contains(err.Error(), foreign.URL) || strings.Contains(err.Error(), strings.TrimPrefix(foreign.URL, "http://")) || !strings.Contains(err.Error(), "another host") {
					t.Fatalf("stream=%v: the error names the redirect target or not the refusal: %v", stream, err)
				}
			}
			if hits.Load() != 2 {
				t.Fatalf("source hits %d", hits.Load())
			}
		})
	}
	if n := foreignHits.Load(); n != 0 {
		t.Fatalf("the foreign host received %d requests carrying the source's credentials", n)
	}
}

// A redirect to the same host is refused too: a redirected POST would
// arrive as a GET, and no OpenAI-compatible server redirects.
func TestRedirectToTheSameHostIsRefused(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if strings.HasPrefix(r.URL.Path, "/moved") {
			jsonResp(200, `{"choices":[{"message":{"content":"moved"}}]}`)(w, r)
			return
		}
		http.Redirect(w, r, "/moved"+r.URL.Path, http.StatusPermanentRedirect)
	}))
	c := newClient(t, Config{HTTPClient: &http.Client{}})
	_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
	te := asTransient(t, err)
	if !errors.Is(err, core.ErrRedirect) || te.StatusCode != http.StatusPermanentRedirect || !strings.Contains(err.Error(), "same host") || hits.Load() != 1 {
		t.Fatalf("err %v, hits %d", err, hits.Load())
	}
}

// Send, the path of embeddings and OCR, refuses redirects the same way,
// and the caller's client is left as it was.
func TestSendRefusesRedirects(t *testing.T) {
	t.Parallel()
	var foreignHits, hits atomic.Int64
	foreign := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { foreignHits.Add(1) }))
	srv := newServer(t, redirector(foreign.URL, &hits))
	hc := &http.Client{}
	c := newClient(t, Config{HTTPClient: hc})
	src := source(srv, "azure")
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/embeddings", strings.NewReader("{}"))
	req.Header.Set("Api-Key", testKey)
	resp, err := c.Send(src, req)
	if resp != nil || !errors.Is(err, core.ErrRedirect) {
		t.Fatalf("Send = %v, %v", resp, err)
	}
	cls := ClassifyNetError(src, 0, err)
	te := asTransient(t, cls)
	if te.StatusCode != http.StatusTemporaryRedirect || te.Reason != core.ReasonNetworkError || te.Source != src.Name {
		t.Fatalf("classified: %#v", te)
	}
	if foreignHits.Load() != 0 || hc.CheckRedirect != nil {
		t.Fatalf("foreign hits %d, caller's client modified: %v", foreignHits.Load(), hc.CheckRedirect != nil)
	}
}

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"http://h/v1", "http://h/x", true},
		{"http://h/v1", "http://h:80/x", true},
		{"https://h/v1", "https://H:443/x", true},
		{"http://h/v1", "https://h/x", false},
		{"http://h:8000/v1", "http://h:8001/x", false},
		{"http://h/v1", "http://other/x", false},
	} {
		a, _ := http.NewRequest(http.MethodGet, tc.a, nil)
		b, _ := http.NewRequest(http.MethodGet, tc.b, nil)
		if got := sameOrigin(a.URL, b.URL); got != tc.want {
			t.Errorf("sameOrigin(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// RedactError removes the key from every text field of the class errors
// and keeps the cause chain.
func TestRedactErrorCoversEveryField(t *testing.T) {
	t.Parallel()
	src := &core.SourceConfig{Name: "x_1", APIKey: testKey}
	cause := errors.New("cause " + testKey)
	for _, err := range []error{
		&core.TransientError{Source: "x_1", Code: testKey, Message: "m " + testKey, Err: cause},
		&core.SourceDeadError{Source: "x_1", Code: testKey, Message: "m " + testKey[:12], Err: cause},
		&core.RequestRejectedError{Source: "x_1", Code: testKey, Message: testKey[10:], Err: cause},
		&core.ResultInvalidError{Source: "x_1", Raw: "raw " + testKey, Message: "m", Err: cause},
		errors.New("plain " + testKey),
	} {
		got := RedactError(src, err)
		text := got.Error()
		var raw string
		var ri *core.ResultInvalidError
		if errors.As(got, &ri) {
			raw = ri.Raw
		}
		inner := ""
		if _, plain := err.(interface{ Unwrap() error }); plain {
			inner = errors.Unwrap(got).Error()
		}
		if f := fragment(text+raw+inner, testKey); f != "" {
			t.Errorf("%T: %q survived: %s", err, f, text)
		}
		if errors.Unwrap(err) != nil && !errors.Is(got, cause) {
			t.Errorf("%T: the cause chain is lost", err)
		}
	}
	//nolint:errorlint // identity, not matching: the very value must come back, not a rebuilt one
	if RedactError(&core.SourceConfig{APIKey: "none"}, io.EOF) != io.EOF {
		t.Fatal("an error was rebuilt without a key to redact")
	}
}
