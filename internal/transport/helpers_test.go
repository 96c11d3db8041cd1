package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

const testKey = "sk-test-SECRET-0123456789abcdef"

// newClient returns a Client closed at the end of the test.
func newClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c := New(cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

// newServer starts an httptest server closed at the end of the test.
func newServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// source returns a SourceConfig for srv under provider.
func source(srv *httptest.Server, provider string) *core.SourceConfig {
	return &core.SourceConfig{
		Name:     provider + "_1",
		Provider: provider,
		BaseURL:  srv.URL + "/v1",
		APIKey:   testKey,
		Model:    "test-model",
		Timeout:  10 * time.Second,
	}
}

func chatCall(stream bool) *core.Call {
	return &core.Call{Messages: []core.Message{core.User("hello")}, Stream: stream}
}

// sse writes SSE frames, flushing each; a frame is sent verbatim.
func sse(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for _, f := range frames {
			if _, err := io.WriteString(w, f); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

// data formats one "data: …\n\n" frame.
func data(s string) string { return "data: " + s + "\n\n" }

// jsonResp answers with status and a JSON body.
func jsonResp(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body) // the client side checks what arrived
	}
}

// capture records request bodies and headers.
type capture struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	paths   []string
}

func (c *capture) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.headers = append(c.headers, r.Header.Clone())
		c.paths = append(c.paths, r.URL.Path)
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (c *capture) lastBody(t *testing.T) map[string]any {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		t.Fatal("no request captured")
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(c.bodies[len(c.bodies)-1]))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, c.bodies[len(c.bodies)-1])
	}
	return m
}

// asTransient, asDead, asRejected fail the test unless err is of the class.
func asTransient(t *testing.T, err error) *core.TransientError {
	t.Helper()
	var e *core.TransientError
	if !errors.As(err, &e) {
		t.Fatalf("err = %T %v, want *core.TransientError", err, err)
	}
	return e
}

func asDead(t *testing.T, err error) *core.SourceDeadError {
	t.Helper()
	var e *core.SourceDeadError
	if !errors.As(err, &e) {
		t.Fatalf("err = %T %v, want *core.SourceDeadError", err, err)
	}
	return e
}

func asRejected(t *testing.T, err error) *core.RequestRejectedError {
	t.Helper()
	var e *core.RequestRejectedError
	if !errors.As(err, &e) {
		t.Fatalf("err = %T %v, want *core.RequestRejectedError", err, err)
	}
	return e
}

// isClass reports whether err is one of the four classes.
func isClass(err error) bool {
	var (
		t *core.TransientError
		d *core.SourceDeadError
		r *core.RequestRejectedError
		i *core.ResultInvalidError
	)
	return errors.As(err, &t) || errors.As(err, &d) || errors.As(err, &r) || errors.As(err, &i)
}

// sleepCtx waits d or until ctx ends; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
