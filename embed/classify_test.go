package embed_test

import (
	"errors"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// TestEmbedBadAnswers: answers that fail the checks are ResultInvalid (no
// retry, breaker untouched); broken bodies are transient; error bodies are
// classified like chat.
func TestEmbedBadAnswers(t *testing.T) {
	t.Parallel()
	type class int
	const (
		invalid class = iota
		transient
		rejected
		dead
	)
	cases := []struct {
		name  string
		code  int
		body  string
		class class
	}{
		{"too few", 200, `{"data":[{"index":0,"embedding":[1,2]}]}`, invalid},
		{"too many", 200, `{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]},{"index":2,"embedding":[1,2]}]}`, invalid},
		{"duplicate index", 200, `{"data":[{"index":0,"embedding":[1,2]},{"index":0,"embedding":[1,2]}]}`, invalid},
		{"index out of range", 200, `{"data":[{"index":0,"embedding":[1,2]},{"index":5,"embedding":[1,2]}]}`, invalid},
		{"mixed dims", 200, `{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2,3]}]}`, invalid},
		{"mixed dims shorter", 200, `{"data":[{"index":0,"embedding":[1,2,3]},{"index":1,"embedding":[1,2]}]}`, invalid},
		{"empty vectors", 200, `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[]}]}`, invalid},
		{"null embedding", 200, `{"data":[{"index":0,"embedding":null},{"index":1,"embedding":[1]}]}`, invalid},
		{"string in array", 200, `{"data":[{"index":0,"embedding":[1,"x"]},{"index":1,"embedding":[1,2]}]}`, invalid},
		{"overflow to inf", 200, `{"data":[{"index":0,"embedding":[1,1e39]},{"index":1,"embedding":[1,2]}]}`, invalid},
		{"base64 NaN", 200, `{"data":[{"index":0,"embedding":"AADAfwAAgD8="},{"index":1,"embedding":"AACAPwAAgD8="}]}`, invalid},
		{"base64 odd bytes", 200, `{"data":[{"index":0,"embedding":"AACA"},{"index":1,"embedding":"AACA"}]}`, invalid},
		{"no data", 200, `{"object":"list"}`, invalid},
		{"data not an array", 200, `{"data":{"a":1}}`, invalid},
		{"index not a number", 200, `{"data":[{"index":"0","embedding":[1]},{"index":1,"embedding":[1]}]}`, invalid},
		{"not json", 200, `<html>bad gateway</html>`, transient},
		{"cut short", 200, `{"data":[{"index":0,"embedding":[1,2`, transient},
		{"json array", 200, `[1,2]`, transient},
		{"empty body", 200, ``, transient},
		{"error in 200", 200, `{"error":{"message":"model overloaded","type":"server_error"}}`, transient},
		{"error in 200 after data", 200, `{"data":[],"error":{"message":"Incorrect API key","type":"authentication_error"}}`, dead},
		{"400", 400, `{"error":{"message":"bad dimensions","type":"invalid_request_error","code":"bad_dims"}}`, rejected},
		{"401", 401, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`, dead},
		{"503", 503, `{"error":{"message":"overloaded"}}`, transient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, 2, func(f *fakeEmbed) {
				f.respond = func(fakeReq) (int, string) { return tc.code, tc.body }
			})
			c := newClient(t, env(f.URL(), "8", "EMBED__RETRY__MAX_ATTEMPTS", "1"))
			_, err := c.Embed(ctxT(t), []string{"a", "b"})
			if err == nil {
				t.Fatal("Embed succeeded")
			}
			var (
				ie *polygateway.ResultInvalidError
				te *polygateway.TransientError
				re *polygateway.RequestRejectedError
				de *polygateway.SourceDeadError
			)
			ok := false
			switch tc.class {
			case invalid:
				ok = errors.As(err, &ie) && ie.Source == "openai_1"
			case transient:
				ok = errors.As(err, &te) && te.Source == "openai_1"
			case rejected:
				ok = errors.As(err, &re) && re.Code == "bad_dims"
			case dead:
				ok = errors.As(err, &de)
			}
			if !ok {
				t.Fatalf("err = %v (%T), want class %d", err, errors.Unwrap(err), tc.class)
			}
			if !errors.Is(err, polygateway.ErrGateway) {
				t.Error("errors.Is(err, ErrGateway) is false")
			}
			if tc.class == invalid {
				breakerClosed(t, c)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// TestEmbedInvalidAnswerNotRetried: with a retry budget, a ResultInvalid
// answer still ends the batch at once.
func TestEmbedInvalidAnswerNotRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t, 2, func(f *fakeEmbed) {
		f.respond = func(fakeReq) (int, string) { return 200, `{"data":[{"index":0,"embedding":[1,2]}]}` }
	})
	c := newClient(t, env(f.URL(), "8", "EMBED__RETRY__MAX_ATTEMPTS", "5"))
	_, err := c.Embed(ctxT(t), []string{"a", "b"})
	var ie *polygateway.ResultInvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	breakerClosed(t, c)
}

// TestEmbedErrorAnswersAreClassifiedInTheSourcesProfile: a source's
// PROFILE names its dialect whatever its provider name, so its error
// answers are read in that dialect: DashScope's throttle uses the
// insufficient_quota wording (DIALECTS.md), which under the qwen profile
// is a rate limit, not a dead account — in a non-2xx answer and in an
// "error" member of a 200 alike.
func TestEmbedErrorAnswersAreClassifiedInTheSourcesProfile(t *testing.T) {
	t.Parallel()
	const throttle = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"},"request_id":"r1"}`
	for _, code := range []int{429, 200} {
		t.Run(itoa(code), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, 2, func(f *fakeEmbed) {
				f.respond = func(fakeReq) (int, string) { return code, throttle }
			})
			c := newClient(t, env(f.URL(), "8", "EMBED__OPENAI__1__PROFILE", "qwen", "EMBED__RETRY__MAX_ATTEMPTS", "1"))
			_, err := c.Embed(ctxT(t), []string{"a", "b"}, polygateway.WithoutPushbackWait())
			var (
				te *polygateway.TransientError
				de *polygateway.SourceDeadError
			)
			if errors.As(err, &de) || !errors.As(err, &te) || code == 429 && te.Reason != core.ReasonRateLimited {
				t.Fatalf("err = %v (%T), want a TransientError (rate-limited for a 429): the qwen profile's throttle", err, errors.Unwrap(err))
			}
		})
	}
}

// TestEmbedAnErrorEnvelopeInA200IsClassifiedLikeChat: the error envelopes
// that arrive with HTTP 200 without an "error" member (DIALECTS.md: an
// older vLLM's flat {"object":"error",…}, MiniMax's base_resp with a
// status_code other than 0) are classified as a chat attempt classifies
// them — a dead key is a dead source, an overloaded server transient —
// and never taken for an answer that failed its checks. A base_resp of
// status_code 0 is MiniMax's success.
func TestEmbedAnErrorEnvelopeInA200IsClassifiedLikeChat(t *testing.T) {
	t.Parallel()
	const ok = `{"object":"list","data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[3,4]}]`
	cases := []struct {
		name string
		body string
		want string // "transient", "dead" or "" (a success)
	}{
		{"flat overloaded", `{"object":"error","message":"The model is overloaded","type":"ServiceUnavailableError","param":null,"code":503}`, "transient"},
		{"flat bad key", `{"object":"error","message":"Incorrect API key provided","type":"AuthenticationError","param":null,"code":401}`, "dead"},
		{"type error", `{"type":"error","message":"Too many requests","code":429}`, "transient"},
		{"base_resp login fail", `{"vectors":null,"total_tokens":0,"base_resp":{"status_code":1004,"status_msg":"login fail: Please carry the API secret key in the Authorization field"}}`, "dead"},
		{"base_resp rate limit", `{"base_resp":{"status_code":1002,"status_msg":"rate limit exceeded"}}`, "transient"},
		{"base_resp after data", ok + `,"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}`, "dead"},
		{"base_resp success", ok + `,"base_resp":{"status_code":0,"status_msg":"success"}}`, ""},
		{"object list", ok + `,"type":"embeddings"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, 2, func(f *fakeEmbed) {
				f.respond = func(fakeReq) (int, string) { return 200, tc.body }
			})
			c := newClient(t, env(f.URL(), "8", "EMBED__RETRY__MAX_ATTEMPTS", "1"))
			resp, err := c.Embed(ctxT(t), []string{"a", "b"}, polygateway.WithoutPushbackWait())
			var (
				te *polygateway.TransientError
				de *polygateway.SourceDeadError
			)
			switch tc.want {
			case "":
				if err != nil || len(resp.Vectors) != 2 {
					t.Fatalf("err = %v, want the two vectors", err)
				}
			case "transient":
				if !errors.As(err, &te) || errors.As(err, &de) {
					t.Fatalf("err = %v (%T), want a TransientError", err, errors.Unwrap(err))
				}
			case "dead":
				if !errors.As(err, &de) {
					t.Fatalf("err = %v (%T), want a SourceDeadError", err, errors.Unwrap(err))
				}
			}
		})
	}
}
