package ocr_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/telemetry"
)

const ocrKey = "sk-ocr-proxy-SECRET-0123456789abcdefXYZ" // 40 bytes

// fragment returns the first run of 8 consecutive bytes of key in text.
func fragment(text, key string) string {
	for j := 0; j+8 <= len(key); j++ {
		if strings.Contains(text, key[j:j+8]) {
			return key[j : j+8]
		}
	}
	return ""
}

// echoServer answers every POST with status and body, where body's
// "{auth}" is replaced by the request's Authorization header value
// without "Bearer " (a proxy that echoes what it was sent).
func echoServer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, strings.ReplaceAll(body, "{auth}", key))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// keyedClient is an OCR client of one source at u whose API_KEY is ocrKey,
// with a debug log and a telemetry sink to inspect.
func keyedClient(t *testing.T, u string) (*ocr.Client, *testkit.Buffer, *telemetry.Memory) {
	t.Helper()
	logs := &testkit.Buffer{}
	sink := telemetry.NewMemory()
	c := newClient(t, ocr.Config{}, map[string]string{
		"OCR__MONKEY__1__API_KEY":  ocrKey,
		"OCR__RETRY__MAX_ATTEMPTS": "1",
	}, []string{u},
		polygateway.WithLogger(logs.TextLogger()),
		polygateway.WithTelemetry(sink))
	return c, logs, sink
}

// noKey fails the test when the key shows in err, its Raw or Message, the
// log or the telemetry rows.
func noKey(t *testing.T, err error, logs *testkit.Buffer, sink *telemetry.Memory) {
	t.Helper()
	if err == nil {
		t.Fatal("the call succeeded")
	}
	texts := map[string]string{"error": err.Error(), "log": logs.String()}
	var ri *polygateway.ResultInvalidError
	if errors.As(err, &ri) {
		texts["Raw"], texts["Message"] = ri.Raw, ri.Message
	}
	if u := errors.Unwrap(err); u != nil {
		texts["cause"] = u.Error()
	}
	for i, r := range sink.Records() {
		texts["telemetry row "+string(rune('0'+i))] = r.Error
	}
	for what, text := range texts {
		if f := fragment(text, ocrKey); f != "" {
			t.Errorf("the %s holds %q of the key: %s", what, f, text)
		}
	}
}

// An upstream that writes the Authorization header into the message of a
// "success": false answer used to put the whole key into the
// ResultInvalidError's text and Raw.
func TestTaskFailureEchoingTheKeyIsRedacted(t *testing.T) {
	t.Parallel()
	c, logs, sink := keyedClient(t, echoServer(t, 200, `{"success":false,"content":"","message":"OCR task failed: bad token {auth}"}`))
	_, err := c.RecognizeText(t.Context(), pngBytes)
	if !errors.Is(err, ocr.ErrTaskFailed) {
		t.Fatalf("err = %v, want ErrTaskFailed", err)
	}
	noKey(t, err, logs, sink)
}

// A malformed 200 body (not the protocol's JSON) echoing the key, also
// where the 256-byte quote of it is cut.
func TestMalformedAnswerEchoingTheKeyIsRedacted(t *testing.T) {
	t.Parallel()
	for _, at := range []int{10, 230, 240, 250} {
		body := strings.Repeat("x", at) + "{auth} not json"
		c, logs, sink := keyedClient(t, echoServer(t, 200, body))
		_, err := c.RecognizeText(t.Context(), pngBytes)
		var te *polygateway.TransientError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "malformed answer") {
			t.Fatalf("key at %d: err = %v, want a malformed-answer TransientError", at, err)
		}
		noKey(t, err, logs, sink)
	}
}

// The server's "Unsupported file type" message echoing the key, in an
// HTTP 500 (/parse) and in a "success": false answer (/ocr/text).
func TestUnsupportedFileTypeEchoingTheKeyIsRedacted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
		layout bool
	}{
		{500, `{"detail":"Parsing failed: 400: Unsupported file type: .png (token {auth})"}`, true},
		{200, `{"success":false,"content":"","message":"400: Unsupported file type: .png (token {auth})"}`, false},
	} {
		c, logs, sink := keyedClient(t, echoServer(t, tc.status, tc.body))
		var err error
		if tc.layout {
			_, err = c.ParseLayout(t.Context(), pngBytes)
		} else {
			_, err = c.RecognizeText(t.Context(), pngBytes)
		}
		var rj *polygateway.RequestRejectedError
		if !errors.As(err, &rj) || rj.Code != ocr.CodeUnsupportedFileType {
			t.Fatalf("status %d: err = %v, want an unsupported-file-type rejection", tc.status, err)
		}
		noKey(t, err, logs, sink)
		if f := fragment(rj.Message, ocrKey); f != "" {
			t.Errorf("status %d: Message holds %q", tc.status, f)
		}
	}
}

// A download_url that carries the key (on another host, or with a ".."
// segment) is refused, and neither the message quoting it nor Raw keeps
// the key.
func TestDownloadURLEchoingTheKeyIsRedacted(t *testing.T) {
	t.Parallel()
	for _, dl := range []string{
		"http://elsewhere.invalid/static/x.zip?token={auth}",
		"/static/{auth}/../x.zip",
		"/static/" + strings.Repeat("y", 230) + "/../{auth}.zip",
	} {
		c, logs, sink := keyedClient(t, echoServer(t, 200, `{"success":true,"message":"ok","download_url":"`+dl+`"}`))
		_, err := c.ParseLayout(t.Context(), pngBytes)
		if !errors.Is(err, ocr.ErrBadArchive) || !strings.Contains(err.Error(), "download_url") {
			t.Fatalf("%s: err = %v, want ErrBadArchive naming the download_url", dl, err)
		}
		noKey(t, err, logs, sink)
	}
}
