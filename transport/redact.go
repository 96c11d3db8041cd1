package transport

import (
	"errors"
	"net/url"
	"strings"
)

// redactedMark replaces an API key in any text the transport emits.
const redactedMark = "[REDACTED]"

// RedactKey returns text with every occurrence of key replaced by
// "[REDACTED]". Keys shorter than 4 bytes and the "none" placeholder are
// not searched for (they would mangle ordinary text and protect nothing).
func RedactKey(text, key string) string {
	if len(key) < 4 || strings.EqualFold(key, "none") || !strings.Contains(text, key) {
		return text
	}
	return strings.ReplaceAll(text, key, redactedMark)
}

// redactErr returns err with key removed from the text it shows: a
// *url.Error is rebuilt with a redacted URL (its cause kept for errors.Is),
// any other error whose text contains the key is replaced by a wrapper
// that shows redacted text and still unwraps to the original.
func redactErr(err error, key string) error {
	if err == nil || len(key) < 4 || strings.EqualFold(key, "none") {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) && strings.Contains(ue.URL, key) {
		err = &url.Error{Op: ue.Op, URL: RedactKey(ue.URL, key), Err: ue.Err}
	}
	if msg := err.Error(); strings.Contains(msg, key) {
		return &redacted{msg: RedactKey(msg, key), err: err}
	}
	return err
}

// redacted shows a redacted message for an error that contained a key.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
