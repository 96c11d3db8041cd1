package transport

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/polygateway/polygateway/core"
)

// Send performs one HTTP exchange for a sibling protocol (embeddings, OCR)
// with the Client's connection pools: the caller-supplied http.Client when
// one was configured, else the pooled transport honouring src.TrustEnv.
// Redirects are never followed, whatever the caller's client would do: a
// 3xx answer is closed and returned as an error matching core.ErrRedirect,
// which ClassifyNetError makes a TransientError (network_error) of src
// with the 3xx status. The caller bounds it with the request's context and
// closes the response body.
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

// redirectError is a 3xx answer that was not followed.
type redirectError struct {
	status int
	// where says where Location pointed: "to another host" (another
	// scheme, host or port, or unreadable), "to the same host", or "" when
	// the answer had none.
	where string
}

func (e *redirectError) Error() string {
	msg := "redirect refused: the source answered http " + strconv.Itoa(e.status)
	if e.where != "" {
		msg += " " + e.where
	}
	return msg + " (redirects are never followed)"
}

// Is matches core.ErrRedirect.
func (e *redirectError) Is(target error) bool { return target == core.ErrRedirect }

// stopAtRedirect is the CheckRedirect of a caller's http.Client: the 3xx
// answer itself is returned (and refused by send) instead of a request to
// its Location.
func stopAtRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxRedirectDrain bounds what is read of a refused redirect's body so
// that its connection can be reused.
const maxRedirectDrain = 4 << 10

// refuseRedirect closes the 3xx answer resp to req and describes it.
func refuseRedirect(req *http.Request, resp *http.Response) error {
	e := &redirectError{status: resp.StatusCode, where: "to another host"}
	switch loc, err := resp.Location(); {
	case errors.Is(err, http.ErrNoLocation):
		e.where = ""
	case err == nil && sameOrigin(req.URL, loc):
		e.where = "to the same host"
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRedirectDrain))
	_ = resp.Body.Close()
	return e
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (the default port of the scheme when none is written).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}
