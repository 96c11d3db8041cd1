package ocr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
	"github.com/polygateway/polygateway/internal/transport"
)

// maxErrorBody bounds the part of an error answer read for classification.
const maxErrorBody = 64 << 10

// userAgent is sent with every request.
const userAgent = "polygateway-go (ocr)"

// errAttemptTimeout is the cancel cause of an attempt that ran past its
// source's TIMEOUT_S.
var errAttemptTimeout = errors.New("ocr: attempt timeout")

// errTooLarge reports a body beyond its limit.
var errTooLarge = errors.New("ocr: body too large")

// upstream speaks the MonkeyOCR protocol for one source per attempt. The
// engine calls do once per attempt; everything it returns is classified.
type upstream struct {
	tc  *transport.Client
	cfg Config
}

// result is what one successful attempt read: the transcription or the
// layout, by the request's operation.
type result struct {
	text   *textPayload
	layout *layoutPayload
}

// do performs one attempt of an OCR request against src.
func (u *upstream) do(ctx context.Context, src *core.SourceConfig, req *request) (result, *core.LLMResponse, error) {
	var out result
	if src == nil || req == nil {
		return out, nil, &core.RequestRejectedError{Message: "nil source or request"}
	}
	if err := ctx.Err(); err != nil {
		return out, nil, &core.CanceledError{Err: err}
	}
	resp, err := u.attempt(ctx, src, req, &out)
	// Every error text is redacted where it is built; this is the net under
	// them (a cause's text, a message added later).
	return out, resp, transport.RedactError(src, err)
}

// attempt is do after the checks of its arguments; what it reads goes to out.
func (u *upstream) attempt(ctx context.Context, src *core.SourceConfig, req *request, out *result) (*core.LLMResponse, error) {
	rd := redact.New(src.APIKey)
	base, err := baseURL(src.BaseURL)
	if err != nil {
		// A source that can never be reached: open its breaker at once.
		err = rd.Error(err)
		return nil, &core.SourceDeadError{Source: src.Name, Message: "invalid base url: " + err.Error(), Err: err}
	}
	actx := ctx
	if src.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeoutCause(ctx, src.Timeout, errAttemptTimeout)
		defer cancel()
	}
	a := &attempt{u: u, src: src, rd: rd, ctx: ctx, actx: actx, base: base, out: out}
	if req.op == OpLayout {
		return a.layout(req)
	}
	return a.text(req)
}

// attempt is the state of one Do.
type attempt struct {
	u    *upstream
	src  *core.SourceConfig
	rd   *redact.Redactor // the source's key
	ctx  context.Context  // the caller's
	actx context.Context  // bounded by src.Timeout
	base *url.URL
	out  *result // what a successful attempt read
}

// baseURL parses a source's BASE_URL, the server root.
func baseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("the base url needs an http(s) scheme and a host")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// endpoint returns base + p (p starts with "/" and is already escaped).
func (a *attempt) endpoint(p string) string {
	return a.base.Scheme + "://" + a.base.Host + a.base.EscapedPath() + p
}

// fail translates an I/O failure: the caller's cancellation is a
// CanceledError, the attempt's own deadline a timeout, anything else a
// network failure.
func (a *attempt) fail(status int, err error) error {
	if cerr := a.ctx.Err(); cerr != nil {
		return &core.CanceledError{Err: cerr}
	}
	if a.actx.Err() != nil && errors.Is(context.Cause(a.actx), errAttemptTimeout) {
		return &core.TransientError{Source: a.src.Name, Reason: core.ReasonTimeout, StatusCode: status,
			Message: "attempt exceeded its timeout of " + a.src.Timeout.String(), Err: a.rd.Error(err)}
	}
	return transport.ClassifyNetError(a.src, status, err)
}

// send performs one HTTP exchange with the source.
func (a *attempt) send(method, target string, body []byte, contentType string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(a.actx, method, target, rd)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if key := strings.TrimSpace(a.src.APIKey); key != "" && !strings.EqualFold(key, "none") {
		// MonkeyOCR has no auth; a real key is meant for a proxy in front.
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return a.u.tc.Send(a.src, req)
}

// readAnswer reads a whole body of at most limit bytes; a length
// announced beyond limit is refused before anything is read.
func readAnswer(r io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength > limit {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// httpError classifies a non-2xx answer. The server's "Unsupported file
// type" (a 500 from /parse) is the caller's fault: rejected.
func (a *attempt) httpError(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && a.actx.Err() != nil {
		return a.fail(resp.StatusCode, err)
	}
	if msg := detail(body); unsupportedType(msg) {
		return &core.RequestRejectedError{Source: a.src.Name, StatusCode: resp.StatusCode,
			Code: CodeUnsupportedFileType, Message: a.rd.Cut(msg, 512)}
	}
	return transport.ClassifyResponse(a.src, a.u.tc.Profile(a.src.ProfileName()), resp.StatusCode, resp.Header, body)
}

// detail returns the "detail" (or "message") text of a FastAPI error body.
func detail(body []byte) string {
	var v struct {
		Detail  any    `json:"detail"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if s, ok := v.Detail.(string); ok {
		return s
	}
	return v.Message
}

func unsupportedType(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "unsupported file type")
}

// malformed is the error of a 2xx answer that does not follow the
// protocol: a transient failure (another source may answer properly), as
// the chat transport treats a malformed body.
func (a *attempt) malformed(status int, what string) error {
	return &core.TransientError{Source: a.src.Name, Reason: core.ReasonNetworkError, StatusCode: status, Message: a.rd.String(what)}
}

// businessFailure classifies "success": false inside HTTP 200, as the
// protocol says (the MonkeyOCR server's api/main.py): an unsupported file
// type is the caller's fault (rejected); any other message (e.g. "OCR task
// failed: CUDA out of memory") is transient, the failure of this server at
// this moment: a TransientError of Reason task_failed wrapping
// ErrTaskFailed, retried on another source like a 5xx, while the HTTP
// exchange proves the server alive for the breaker (the engine's policy
// records a success, never a failure).
func (a *attempt) businessFailure(status int, msg string) error {
	if unsupportedType(msg) {
		return &core.RequestRejectedError{Source: a.src.Name, StatusCode: status, Code: CodeUnsupportedFileType,
			Message: a.rd.Cut(msg, 512)}
	}
	if msg == "" {
		msg = "the server reported success: false without a message"
	}
	msg = a.rd.Cut(msg, 1024)
	return &core.TransientError{Source: a.src.Name, Reason: core.ReasonTaskFailed, StatusCode: status, Message: msg,
		Err: fmt.Errorf("%w: %s", ErrTaskFailed, msg)}
}

// post sends the upload and reads the JSON answer of a 2xx.
func (a *attempt) post(req *request) (int, []byte, error) {
	resp, err := a.send(http.MethodPost, a.endpoint(req.path), req.body, req.contentType)
	if err != nil {
		return 0, nil, a.fail(0, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, nil, a.httpError(resp)
	}
	body, err := readAnswer(resp.Body, resp.ContentLength, a.u.cfg.MaxResponseBytes)
	switch {
	case errors.Is(err, errTooLarge):
		// Every source would send the same answer: a result that cannot be
		// accepted under this Config.
		return resp.StatusCode, nil, invalid(a.rd, a.src.Name, ErrTooLarge, nil, "the answer of %s is larger than %d bytes", req.path, a.u.cfg.MaxResponseBytes)
	case err != nil:
		return resp.StatusCode, nil, a.fail(resp.StatusCode, err)
	}
	return resp.StatusCode, body, nil
}

// text performs POST /ocr/text.
func (a *attempt) text(req *request) (*core.LLMResponse, error) {
	status, body, err := a.post(req)
	if err != nil {
		return nil, err
	}
	ans, ok := decodeAnswer[textAnswer](body)
	if !ok {
		return nil, a.malformed(status, "malformed answer from "+req.path+": "+a.rd.CutBytes(body, 256))
	}
	msg := deref(ans.Message)
	if !*ans.Success {
		return nil, a.businessFailure(status, msg)
	}
	text := deref(ans.Content)
	a.out.text = &textPayload{text: text, message: msg, raw: body}
	return &core.LLMResponse{
		Content:      text,
		UsageSource:  core.UsageMeasured,
		FinishReason: "stop",
	}, nil
}

// textAnswer and parseAnswer are the JSON answers of /ocr/text and
// /parse (MONKEYOCR.md): the fields this package reads, as json.Unmarshal
// reads them.
type textAnswer struct {
	Success *bool   `json:"success"`
	Content *string `json:"content"`
	Message *string `json:"message"`
}

type parseAnswer struct {
	Success     *bool   `json:"success"`
	Message     *string `json:"message"`
	DownloadURL *string `json:"download_url"`
}

// decodeAnswer reads the JSON answer body into ans; false when it is not
// one (not JSON, the wrong types, or no "success").
func decodeAnswer[A textAnswer | parseAnswer](body []byte) (*A, bool) {
	var ans A
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, false
	}
	switch v := any(&ans).(type) {
	case *textAnswer:
		return &ans, v.Success != nil
	case *parseAnswer:
		return &ans, v.Success != nil
	}
	return nil, false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// layout performs POST /parse, downloads the result ZIP and reads its
// *_middle.json.
func (a *attempt) layout(req *request) (*core.LLMResponse, error) {
	status, body, err := a.post(req)
	if err != nil {
		return nil, err
	}
	ans, ok := decodeAnswer[parseAnswer](body)
	if !ok {
		return nil, a.malformed(status, "malformed answer from "+req.path+": "+a.rd.CutBytes(body, 256))
	}
	if !*ans.Success {
		return nil, a.businessFailure(status, deref(ans.Message))
	}
	dl := strings.TrimSpace(deref(ans.DownloadURL))
	if dl == "" {
		return nil, invalid(a.rd, a.src.Name, ErrBadArchive, body, "the answer of /parse has no download_url")
	}
	target, err := a.download(dl)
	if err != nil {
		return nil, invalid(a.rd, a.src.Name, ErrBadArchive, body, "unusable download_url %q: %v", a.rd.Cut(dl, 256), err)
	}
	archive, err := a.fetch(target)
	if err != nil {
		return nil, err
	}
	elements, sizes, middle, err := readLayout(archive, a.u.cfg)
	if err != nil {
		return nil, asInvalid(a.rd, a.src.Name, middle, err)
	}
	a.out.layout = &layoutPayload{elements: elements, pageSizes: sizes, raw: middle}
	return &core.LLMResponse{
		Content:      layoutJSON(len(sizes), len(elements)),
		UsageSource:  core.UsageMeasured,
		FinishReason: "stop",
	}, nil
}

// download resolves download_url against the source's base URL
// (resolveDownload).
func (a *attempt) download(dl string) (string, error) { return resolveDownload(a.base, dl) }

// resolveDownload resolves download_url against base, the source's base
// URL (base path included): a path on the same server, every segment
// escaped. Absolute URLs are accepted only for base's scheme and host;
// "." and ".." segments, empty segments and backslashes are refused.
func resolveDownload(base *url.URL, dl string) (string, error) {
	if strings.Contains(dl, "\\") {
		return "", errors.New("backslash in path")
	}
	p, prefix := dl, base.EscapedPath()
	if !strings.HasPrefix(dl, "/") {
		u, err := url.Parse(dl)
		if err != nil || !u.IsAbs() {
			return "", errors.New("neither an absolute path nor a URL of the source")
		}
		if !strings.EqualFold(u.Scheme, base.Scheme) || !strings.EqualFold(u.Host, base.Host) {
			return "", errors.New("points to another host")
		}
		// An absolute URL names the whole path: no base path prefix.
		p, prefix = u.Path, ""
	} else if strings.HasPrefix(dl, "//") {
		return "", errors.New("points to another host")
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	var sb strings.Builder
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", errors.New("empty, . or .. path segment")
		}
		sb.WriteByte('/')
		sb.WriteString(url.PathEscape(s))
	}
	return base.Scheme + "://" + base.Host + prefix + sb.String(), nil
}

// fetch downloads the result ZIP, bounded by MaxArchiveBytes. A 404 (or
// 410) is transient: the archive is gone (e.g. the server restarted) and
// the next attempt posts the document again. A bigger archive than allowed
// is a result that can never be read: ResultInvalid.
func (a *attempt) fetch(target string) ([]byte, error) {
	resp, err := a.send(http.MethodGet, target, nil, "")
	if err != nil {
		return nil, a.fail(0, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil, &core.TransientError{Source: a.src.Name, Reason: core.ReasonNetworkError, StatusCode: resp.StatusCode,
			Code: CodeArchiveNotFound, Message: "the result archive of /parse is gone; the document will be posted again"}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, a.httpError(resp)
	}
	limit := a.u.cfg.MaxArchiveBytes
	if resp.ContentLength > limit {
		return nil, invalid(a.rd, a.src.Name, errArchiveTooLarge, nil, "result archive of %d bytes exceeds the limit of %d bytes", resp.ContentLength, limit)
	}
	b, err := readAnswer(resp.Body, -1, limit)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, invalid(a.rd, a.src.Name, errArchiveTooLarge, nil, "result archive exceeds the limit of %d bytes", limit)
	case err != nil:
		return nil, a.fail(resp.StatusCode, err)
	}
	return b, nil
}
