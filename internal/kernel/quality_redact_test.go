package kernel

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
	"github.com/polygateway/polygateway/internal/transport"
)

// TestARefusedAnswerKeepsNoKeyAndAtMost4KiBInItsError sends a chat attempt
// to an upstream whose answer echoes the API key, once refused by the
// call's check and once by the quality guard: the ResultInvalidError's Raw,
// Message and error text hold no 8 bytes of the key, Raw is cut to 4 KiB
// after redaction (a key straddling the cut leaves no piece), and the
// answer itself comes back unaltered beside the error.
func TestARefusedAnswerKeepsNoKeyAndAtMost4KiBInItsError(t *testing.T) {
	t.Parallel()
	const key = "sk-kernel-SECRET-0123456789abcdef"
	// The key at the start, and again across the 4 KiB cut.
	content := "echo " + key + " " + strings.Repeat("x", maxRawInError-len("echo  ")-len(key)-10) + key + strings.Repeat(" tail", 400)
	tc, src := answering(t, key, content)
	cases := []struct {
		name string
		up   chatUpstream
		call *core.Call
	}{
		{"check", chatUpstream{t: tc}, &core.Call{Messages: []core.Message{core.User("hi")},
			Check: func(r *core.LLMResponse) error { return errors.New("not JSON: " + r.Content[:40]) }}},
		{"quality guard", chatUpstream{t: tc, quality: core.QualitySettings{Guard: true, MinChars: 1 << 20}},
			&core.Call{Messages: []core.Message{core.User("hi")}}},
	}
	for _, c := range cases {
		resp, err := c.up.Do(context.Background(), src, c.call)
		var inv *core.ResultInvalidError
		if !errors.As(err, &inv) || resp == nil {
			t.Fatalf("%s: (%v, %v), want the answer and a ResultInvalidError", c.name, resp, err)
		}
		if resp.Content != content {
			t.Errorf("%s: the answer beside the error was altered", c.name)
		}
		for what, s := range map[string]string{"Raw": inv.Raw, "Message": inv.Message, "error text": err.Error()} {
			for i := 0; i+redact.FragmentLen <= len(key); i++ {
				if strings.Contains(s, key[i:i+redact.FragmentLen]) {
					t.Fatalf("%s: %s holds %q of the key", c.name, what, key[i:i+redact.FragmentLen])
				}
			}
		}
		if len(inv.Raw) > maxRawInError+len("…") || !strings.HasPrefix(inv.Raw, "echo "+redact.Mark) {
			t.Errorf("%s: Raw is %d bytes (%.40q…), want the redacted answer cut to %d", c.name, len(inv.Raw), inv.Raw, maxRawInError)
		}
	}
}

// TestARefusedAnswersMessageIsCutTo1KiBAfterRedaction refuses an answer
// with a check whose error lists a fault for every item of a long answer
// (as a JSON Schema validator does) and quotes the key near the cut: the
// ResultInvalidError's Message and error text are cut to 1 KiB, from text
// already redacted, so no piece of the key is left at the cut.
func TestARefusedAnswersMessageIsCutTo1KiBAfterRedaction(t *testing.T) {
	t.Parallel()
	const key = "sk-kernel-SECRET-0123456789abcdef"
	tc, src := answering(t, key, "[1]")
	faults := strings.Repeat("x", maxMessageInError-len(key)/2) + key + strings.Repeat("\n- at '/9': got string, want integer", 500)
	call := &core.Call{Messages: []core.Message{core.User("hi")},
		Check: func(*core.LLMResponse) error { return errors.New(faults) }}
	_, err := chatUpstream{t: tc}.Do(context.Background(), src, call)
	var inv *core.ResultInvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("err = %v, want a ResultInvalidError", err)
	}
	if len(inv.Message) > maxMessageInError+len("…") || !strings.HasSuffix(inv.Message, "…") {
		t.Errorf("Message is %d bytes, want the check's error cut to %d", len(inv.Message), maxMessageInError)
	}
	if n := len(err.Error()); n > maxMessageInError+100 {
		t.Errorf("the error text is %d bytes, want the bounded message", n)
	}
	for i := 0; i+redact.FragmentLen <= len(key); i++ {
		if strings.Contains(inv.Message, key[i:i+redact.FragmentLen]) {
			t.Fatalf("Message holds %q of the key", key[i:i+redact.FragmentLen])
		}
	}
}

// answering returns a transport and a source (API key key) whose upstream
// answers every chat request with content.
func answering(t *testing.T, key, content string) (*transport.Client, *core.SourceConfig) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`+content+`"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	tc := transport.New(transport.Config{})
	t.Cleanup(func() { tc.Close() })
	return tc, &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: srv.URL + "/v1", APIKey: key, Model: "m", Timeout: 10 * time.Second}
}
