package transport

import (
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
)

// RedactKey returns text with key removed by the library's one redaction
// rule (package internal/redact): every occurrence of the key, and every
// run of 8 or more of its consecutive bytes (a key cut at the edge of a
// window), also percent- or JSON-escaped, becomes "[REDACTED]". Keys
// shorter than 4 bytes and the "none" placeholder are not searched for
// (they would mangle ordinary text and protect nothing).
func RedactKey(text, key string) string {
	return redact.String(text, key)
}

// RedactError returns err, an error of one attempt against src, with src's
// API key removed from every text field of the class errors of package
// core (Message, Code, Raw, and the text of Err, whose chain is kept for
// errors.Is and errors.As) by the library's one redaction rule. Sibling
// protocols (embeddings, OCR) pass every error of their Do through it; the
// chat transport redacts where it builds its errors.
func RedactError(src *core.SourceConfig, err error) error {
	if src == nil || err == nil {
		return err
	}
	r := redact.New(src.APIKey)
	if r == nil {
		return err
	}
	return redactClassError(r, err)
}

// redactClassError copies err when it is itself a class error of package
// core, with its text fields redacted; any other error goes through r.Error.
func redactClassError(r *redact.Redactor, err error) error {
	//nolint:errorlint // the outermost value itself is copied: matching a wrapped class error would drop its wrapper
	switch e := err.(type) {
	case *core.TransientError:
		cp := *e
		cp.Code, cp.Message, cp.Err = r.String(e.Code), r.String(e.Message), r.Error(e.Err)
		return &cp
	case *core.SourceDeadError:
		cp := *e
		cp.Code, cp.Message, cp.Err = r.String(e.Code), r.String(e.Message), r.Error(e.Err)
		return &cp
	case *core.RequestRejectedError:
		cp := *e
		cp.Code, cp.Message, cp.Err = r.String(e.Code), r.String(e.Message), r.Error(e.Err)
		return &cp
	case *core.ResultInvalidError:
		cp := *e
		cp.Raw, cp.Message, cp.Err = r.String(e.Raw), r.String(e.Message), r.Error(e.Err)
		return &cp
	case *core.CanceledError:
		return err
	}
	return r.Error(err)
}
