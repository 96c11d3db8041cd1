package transport

import (
	"net/http"

	"github.com/polygateway/polygateway/internal/core"
)

// Send performs one HTTP exchange for a sibling protocol (embeddings, OCR)
// with the Client's connection pools: the caller-supplied http.Client when
// one was configured, else the pooled transport honouring src.TrustEnv.
// Redirects are not followed. The caller bounds it with the request's
// context and closes the response body.
func (c *Client) Send(src *core.SourceConfig, req *http.Request) (*http.Response, error) {
	return c.send(src, req)
}

// ClassifyNetError classifies a failure to talk to src (dial, TLS, reset,
// EOF before headers, body read errors) as a TransientError: timeouts get
// ReasonTimeout, everything else ReasonNetworkError. status is the HTTP
// status when headers had already arrived, else 0. The API key is redacted
// from the message.
func ClassifyNetError(src *core.SourceConfig, status int, err error) error {
	return classifyNetError(src, status, err)
}

// AppendJSONString appends s to b as a JSON string literal, as the request
// encoder writes strings: control characters, quotes, backslashes and
// U+2028/U+2029 escaped, invalid UTF-8 as U+FFFD, no HTML escaping. The
// gateway writes its relayed chunks with it.
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }
