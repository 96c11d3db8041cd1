package ocr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
)

// Operation names of the governed calls this package makes; the telemetry
// row of each call (its messages column) starts with one, so rows and
// middleware can tell OCR calls apart.
const (
	OpText   = "ocr_text"
	OpLayout = "ocr_layout"
)

// TextResult is the transcription of one image or PDF.
type TextResult struct {
	// Text is the raw transcription; pages of a PDF are joined by "\n\n".
	// An empty Text is a valid result: the document has no text.
	Text string
	// Message is the server's message.
	Message string
	// SourceName, Provider and Model say which source answered.
	SourceName, Provider, Model string
	// Latency is the wall time of the whole governed call.
	Latency time.Duration
	// CallID is the telemetry primary key of the call.
	CallID string
	// Attempts lists the source names tried, in order.
	Attempts []string
	// Raw is the server's JSON answer.
	Raw []byte
}

// LayoutElement is one block of a parsed page, in the page's reading order.
type LayoutElement struct {
	// Type is the block type as the server names it, an open set: text,
	// title, interline_equation, image, table, list, index, …
	Type string
	// BBox is (x1, y1, x2, y2) in page coordinates: the units of the page's
	// entry in LayoutResult.PageSizes (PDF points for a PDF; for an image,
	// pixels × 72 / dpi, so 0.75 × pixels without dpi metadata), origin at
	// the top left, x1 < x2 and y1 < y2. Boxes may overhang the page.
	BBox [4]float64
	// PageIndex is the 0-based page the block is on.
	PageIndex int
}

// LayoutResult is the layout of one image or PDF.
type LayoutResult struct {
	// Elements are the blocks of every page (the middle.json's
	// para_blocks), page by page in reading order. Discarded blocks
	// (headers, footers) are not included.
	Elements []LayoutElement
	// PageSizes holds each page's [width, height], indexed by PageIndex.
	PageSizes [][2]float64
	// SourceName, Provider and Model say which source answered.
	SourceName, Provider, Model string
	// Latency is the wall time of the whole governed call (both phases).
	Latency time.Duration
	// CallID is the telemetry primary key of the call.
	CallID string
	// Attempts lists the source names tried, in order.
	Attempts []string
	// Raw is the *_middle.json the layout was read from (it also carries
	// the spans, text and nested blocks this package does not extract).
	Raw []byte
}

// request is the input of one governed OCR call: the multipart body,
// built once and sent by every attempt.
type request struct {
	op          string
	path        string
	body        []byte
	contentType string
}

// textPayload and layoutPayload are what the two operations read.
type textPayload struct {
	text, message string
	raw           []byte
}

type layoutPayload struct {
	elements  []LayoutElement
	pageSizes [][2]float64
	raw       []byte
}

// RecognizeText transcribes image (PDF, PNG or JPEG bytes) with POST
// /ocr/text as one governed call.
//
// Errors: *polygateway.RequestRejectedError for empty or unsupported bytes
// (checked locally, no call is made) and for a server that refuses the
// file type; a cancelled or expired ctx returns an error for which
// errors.Is(err, ctx.Err()) holds; transient failures (timeouts, 5xx,
// refused connections, malformed answers, and a "success": false answer,
// which is alive for the breaker: Reason task_failed, wrapping
// ErrTaskFailed) are retried on other sources and end as
// *polygateway.GatewayUnavailableError when the budget is spent.
//
// The call options used are WithPriority and WithTenant (the call's place
// in the admission queue when the gates are full), WithSessionID,
// WithParentCallID, WithBudget and WithoutPushbackWait; the others do not
// apply to OCR.
func (c *Client) RecognizeText(ctx context.Context, image []byte, opts ...polygateway.CallOption) (*TextResult, error) {
	out, resp, err := c.invoke(ctx, OpText, "/ocr/text", image, opts)
	if err != nil {
		return nil, err
	}
	p := out.text
	if p == nil {
		return nil, ErrNoResult
	}
	return &TextResult{
		Text: p.text, Message: p.message,
		SourceName: resp.SourceName, Provider: resp.Provider, Model: resp.Model,
		Latency: resp.Latency, CallID: resp.CallID, Attempts: resp.Attempts, Raw: p.raw,
	}, nil
}

// ParseLayout parses the layout of image (PDF, PNG or JPEG bytes) as one
// governed call: POST /parse, then GET of the result ZIP it names, then
// the page sizes and the para_blocks of the ZIP's *_middle.json. One
// attempt covers both phases; a retry posts the document again.
//
// Errors are those of RecognizeText, plus *polygateway.ResultInvalidError
// wrapping ErrBadArchive, ErrBadLayout or ErrBadGeometry for a result that
// cannot be read (never charged to the breaker, not retried). A 404 on the
// ZIP is transient (code CodeArchiveNotFound): the next attempt posts
// again. The call options are those of RecognizeText.
func (c *Client) ParseLayout(ctx context.Context, image []byte, opts ...polygateway.CallOption) (*LayoutResult, error) {
	out, resp, err := c.invoke(ctx, OpLayout, "/parse", image, opts)
	if err != nil {
		return nil, err
	}
	p := out.layout
	if p == nil {
		return nil, ErrNoResult
	}
	return &LayoutResult{
		Elements: p.elements, PageSizes: p.pageSizes,
		SourceName: resp.SourceName, Provider: resp.Provider, Model: resp.Model,
		Latency: resp.Latency, CallID: resp.CallID, Attempts: resp.Attempts, Raw: p.raw,
	}, nil
}

// invoke validates image, builds the upload and runs one governed call.
func (c *Client) invoke(ctx context.Context, op, path string, image []byte, opts []polygateway.CallOption) (result, *core.LLMResponse, error) {
	if len(image) == 0 {
		return result{}, nil, &polygateway.RequestRejectedError{Code: CodeEmptyImage, Message: "no image bytes"}
	}
	ext, mimeType, ok := sniff(image)
	if !ok {
		return result{}, nil, &polygateway.RequestRejectedError{Code: CodeUnsupportedFileType,
			Message: "the image is neither PDF, PNG nor JPEG (the formats MonkeyOCR accepts)"}
	}
	req, err := newRequest(op, path, ext, mimeType, image)
	if err != nil {
		return result{}, nil, &polygateway.RequestRejectedError{Code: "invalid_request", Message: err.Error(), Err: err}
	}
	sum := sha256.Sum256(image)
	co := kernel.ResolveCall(opts)
	call := &core.Call{
		Operation:      op,
		SessionID:      co.SessionID,
		ParentCallID:   co.ParentCallID,
		Budgets:        co.Budgets,
		NoPushbackWait: co.NoPushbackWait,
		Place:          co.Place,
		// The telemetry row describes the upload; the bytes never enter it.
		Messages: []core.Message{core.User(fmt.Sprintf("%s %s %d bytes sha256:%s",
			op, mimeType, len(image), hex.EncodeToString(sum[:])))},
	}
	out, resp, err := kernel.Do(ctx, c.k, call, func(ctx context.Context, src *core.SourceConfig) (result, *core.LLMResponse, error) {
		return c.up.do(ctx, src, req)
	})
	return out, resp, err
}

// sniff recognises the formats the server accepts and returns the
// extension the upload is named with (the server decides the type by it).
func sniff(b []byte) (ext, mimeType string, ok bool) {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return ".png", "image/png", true
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return ".jpg", "image/jpeg", true
	case bytes.Contains(b[:min(len(b), 1024)], []byte("%PDF-")):
		// The header may follow up to 1 KiB of junk (PDF 1.7, 7.5.2 note).
		return ".pdf", "application/pdf", true
	}
	return "", "", false
}

// newRequest builds the multipart body: one part named "file" with a
// filename, as the server requires.
func newRequest(op, path, ext, mimeType string, data []byte) (*request, error) {
	var buf bytes.Buffer
	buf.Grow(len(data) + 512)
	w := multipart.NewWriter(&buf)
	name := "image" + ext
	if ext == ".pdf" {
		name = "document" + ext
	}
	h := make(textproto.MIMEHeader, 2)
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+name+`"`)
	h.Set("Content-Type", mimeType)
	part, err := w.CreatePart(h)
	if err != nil {
		return nil, err
	}
	if _, err := part.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &request{op: op, path: path, body: buf.Bytes(), contentType: w.FormDataContentType()}, nil
}
