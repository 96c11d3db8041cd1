package ocr

import (
	"fmt"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/redact"
)

// Codes set on the errors of this package (RequestRejectedError.Code,
// TransientError.Code).
const (
	// CodeEmptyImage: RecognizeText or ParseLayout got no bytes (local
	// validation, no network call).
	CodeEmptyImage = "empty_image"
	// CodeUnsupportedFileType: the bytes are neither PDF, PNG nor JPEG (local
	// validation), or the server said "Unsupported file type".
	CodeUnsupportedFileType = "unsupported_file_type"
	// CodeArchiveNotFound: the result ZIP of /parse answered 404 (e.g. the
	// server restarted between the two phases). Transient: the next attempt
	// posts the document again.
	CodeArchiveNotFound = "archive_not_found"
)

// Sentinel causes of the errors this package returns; match them with
// errors.Is. ErrTaskFailed is the cause of a *polygateway.TransientError, the
// others of a *polygateway.ResultInvalidError.
var (
	// ErrTaskFailed: the server answered HTTP 200 with "success": false
	// (any message except an unsupported file type, e.g. "OCR task failed:
	// CUDA out of memory"). The attempt's error is a TransientError of
	// Reason task_failed (core.ReasonTaskFailed) wrapping it: the
	// call is retried on another source, and the server, alive, is not
	// charged to its breaker. When every attempt failed so, the call's
	// GatewayUnavailableError wraps the last one: errors.Is(err,
	// ErrTaskFailed) holds.
	ErrTaskFailed = fmt.Errorf("%w: ocr: the server reported a failed task", polygateway.ErrGateway)
	// ErrBadArchive: the result of /parse cannot be read: no download_url,
	// an unsafe download_url, a body that is not a ZIP, a ZIP beyond the
	// size or member limits, or no *_middle.json in it.
	ErrBadArchive = fmt.Errorf("%w: ocr: unusable result archive", polygateway.ErrGateway)
	// ErrBadLayout: the *_middle.json is not the expected JSON (not an
	// object with a pdf_info array of pages, no pages, or page_idx out of
	// sequence).
	ErrBadLayout = fmt.Errorf("%w: ocr: malformed middle.json", polygateway.ErrGateway)
	// ErrBadGeometry: a page size or a box is broken: wrong arity, not a
	// finite number, a non-positive page size, a degenerate box (x2 <= x1 or
	// y2 <= y1), or a box far outside its page (see Config.MaxOutsidePages).
	ErrBadGeometry = fmt.Errorf("%w: ocr: broken geometry", polygateway.ErrGateway)
	// ErrTooLarge: a result beyond a limit of Config: the JSON answer
	// (MaxResponseBytes), the archive (MaxArchiveBytes, MaxMembers), its
	// middle.json (MaxMemberBytes) or the layout in it (MaxLayoutPages,
	// MaxLayoutBlocks). The archive cases match ErrBadArchive too, the
	// layout cases ErrBadLayout.
	ErrTooLarge = fmt.Errorf("%w: ocr: result beyond a size limit", polygateway.ErrGateway)
	// ErrNoResult: the governed call answered without an OCR result: a
	// fallback (polygateway.WithFallback) stood in after every source
	// failed. Fallbacks cannot produce transcriptions or layouts.
	ErrNoResult = fmt.Errorf("%w: ocr: the answer carries no OCR result (a fallback cannot stand in for OCR)", polygateway.ErrGateway)
)

// errArchiveTooLarge matches both ErrBadArchive and ErrTooLarge;
// errLayoutTooLarge both ErrBadLayout and ErrTooLarge.
var (
	errArchiveTooLarge = fmt.Errorf("%w (%w)", ErrBadArchive, ErrTooLarge)
	errLayoutTooLarge  = fmt.Errorf("%w (%w)", ErrBadLayout, ErrTooLarge)
)

// invalid returns the ResultInvalidError of source with cause kind. The
// source's key is redacted (rd) from the message and, before it is cut,
// from the raw answer kept in Raw. Pieces of upstream text that were cut
// before they got here (clip in the layout checks) lose what is left of a
// key by the same rule.
func invalid(rd *redact.Redactor, source string, kind error, raw []byte, format string, args ...any) error {
	msg := rd.String(fmt.Sprintf(format, args...))
	return &polygateway.ResultInvalidError{
		Source:  source,
		Raw:     rd.CutBytes(raw, maxRawInError),
		Message: msg,
		Err:     fmt.Errorf("%w: %s", kind, msg),
	}
}

// maxRawInError bounds the raw text kept in an error.
const maxRawInError = 4 << 10

// clip returns at most n bytes of b as a string.
func clip(b []byte, n int) string {
	if len(b) > n {
		return strings.ToValidUTF8(string(b[:n]), "") + "…"
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
