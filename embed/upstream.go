package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/transport"
)

// Bounds of the response bodies read.
const (
	// maxBodyBytes bounds a successful answer. Large batches of large
	// vectors as JSON text are big (2048 × 3072 numbers ≈ 100 MB); the
	// decoder streams entry by entry, so the bound is about the wire: what
	// is held is the vectors (see decodeAnswer).
	maxBodyBytes = 512 << 20
	// maxDrainBytes is how much of an answer's tail is read after decoding
	// so that the connection can be reused.
	maxDrainBytes = 64 << 10
)

// upstream performs one attempt of an embedding batch against one source.
// Its configuration is set once, after assembly and before any call.
type upstream struct {
	t         *transport.Client
	normalize bool
	format    string
	// check validates a decoded batch (count, dimensions, EXPECTED_DIM).
	check func(vecs [][]float32, inputs int) error
}

// embed sends one batch of texts to src's /embeddings endpoint and returns
// the vectors in input order beside the response that accounts for them
// (usage, model, latency). Failures are classified like chat attempts: the
// caller's cancellation is a *core.CanceledError, the attempt's own timeout
// (src.Timeout) a TransientError with reason timeout, HTTP errors go
// through transport.ClassifyResponse, network errors through
// transport.ClassifyNetError, and answers that fail the checks (count,
// dimensions, EXPECTED_DIM) are *core.ResultInvalidError. The source's API
// key is redacted from every error (transport.RedactError). What the
// attempt reserved on the context's memory budget is given back before it
// returns.
func (u *upstream) embed(ctx context.Context, src *core.SourceConfig, texts []string, params map[string]any) ([][]float32, *core.LLMResponse, error) {
	return u.embedHeld(ctx, src, texts, params, nil)
}

// held is the memory budget a successful attempt keeps for its vectors
// until the call is done.
type held struct {
	budget core.MemoryBudget
	n      int64
}

// release gives the reservation back.
func (h *held) release() {
	if h.budget != nil && h.n > 0 {
		h.budget.Release(h.n)
	}
	h.n = 0
}

// embedHeld is embed; when keep is not nil, a successful attempt hands
// its reservation on the memory budget to keep instead of giving it back.
func (u *upstream) embedHeld(ctx context.Context, src *core.SourceConfig, texts []string, params map[string]any, keep *held) ([][]float32, *core.LLMResponse, error) {
	var vecs [][]float32
	body := &bodyReader{limit: maxBodyBytes, budget: core.MemoryBudgetFrom(ctx)}
	defer body.release()
	resp, err := u.attempt(ctx, src, texts, params, body, &vecs)
	if err == nil && u.check != nil {
		if cerr := u.check(vecs, len(texts)); cerr != nil {
			// The answer is billed and recorded; the source is alive.
			return nil, resp, &core.ResultInvalidError{Source: src.Name, Message: cerr.Error(), Err: cerr}
		}
	}
	if err == nil && keep != nil {
		keep.budget, keep.n = body.budget, keep.n+body.take()
	}
	return vecs, resp, err
}

// attempt performs the exchange of embed, reading the answer through body;
// the vectors go to *vecs.
func (u *upstream) attempt(ctx context.Context, src *core.SourceConfig, texts []string, params map[string]any, body *bodyReader, vecs *[][]float32) (_ *core.LLMResponse, err error) {
	if src == nil || len(texts) == 0 {
		return nil, &core.RequestRejectedError{Code: "invalid_request", Message: "an embedding batch needs a source and texts"}
	}
	defer func() { err = transport.RedactError(src, err) }()
	if err := ctx.Err(); err != nil {
		return nil, &core.CanceledError{Err: err}
	}
	if u.t == nil {
		return nil, &core.RequestRejectedError{Source: src.Name, Code: "invalid_request", Message: "embedding upstream has no transport"}
	}
	start := time.Now()
	reqBody, err := u.encode(src, params, texts)
	if err != nil {
		return nil, &core.RequestRejectedError{Source: src.Name, Code: "invalid_request", Message: err.Error(), Err: err}
	}
	target, err := embeddingsURL(src.BaseURL)
	if err != nil {
		return nil, &core.SourceDeadError{Source: src.Name, Message: "invalid base url: " + err.Error()}
	}

	actx := ctx
	if src.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, src.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(actx, http.MethodPost, target, bytes.NewReader(reqBody))
	if err != nil {
		return nil, &core.SourceDeadError{Source: src.Name, Message: "invalid base url"}
	}
	prof := u.t.Profile(src.ProfileName())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", transport.DefaultUserAgent)
	if key := strings.TrimSpace(src.APIKey); key != "" && !strings.EqualFold(key, "none") {
		req.Header.Set("Authorization", "Bearer "+key)
		if prof.Name == "azure" || strings.EqualFold(src.Provider, "azure") {
			req.Header.Set("Api-Key", key)
		}
	}

	resp, err := u.t.Send(src, req)
	if err != nil {
		return nil, ioFailure(ctx, actx, src, 0, err)
	}
	defer resp.Body.Close()
	body.r = resp.Body
	dec, err := u.readAnswer(ctx, actx, src, resp, body, len(texts), requestFormat(u.format, params, src.ExtraBody))
	if err != nil {
		return nil, err
	}
	if u.normalize {
		for _, v := range dec.vectors {
			normalizeL2(v)
		}
	}
	r := &core.LLMResponse{
		Model:      dec.model,
		Provider:   src.Provider,
		SourceName: src.Name,
		Latency:    time.Since(start),
	}
	if r.Model == "" {
		r.Model = src.Model
	}
	if dec.usageOK {
		r.PromptTokens, r.UsageSource = dec.promptTokens, core.UsageMeasured
	} else {
		r.PromptTokens, r.UsageSource = estimateTokens(texts), core.UsageEstimated
	}
	*vecs = dec.vectors
	return r, nil
}

// readAnswer reads the answer resp of an attempt through body: an error
// answer (a non-2xx, or a 2xx with an "error" member) is classified, a
// length announced beyond the limit or the memory budget is refused before
// a byte is read, and the vectors of the rest are decoded (decodeAnswer)
// for n inputs asked for in format.
func (u *upstream) readAnswer(ctx, actx context.Context, src *core.SourceConfig, resp *http.Response, body *bodyReader, n int, format string) (*decoded, error) {
	prof := u.t.Profile(src.ProfileName())
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		eb, rerr := readErrorBody(body)
		switch {
		case errors.Is(rerr, core.ErrMemoryBudget):
			return nil, budgetFailure(src, resp.StatusCode, rerr)
		case rerr != nil && actx.Err() != nil:
			return nil, ioFailure(ctx, actx, src, resp.StatusCode, rerr)
		}
		return nil, transport.ClassifyResponse(src, prof, resp.StatusCode, resp.Header, eb)
	}
	if resp.ContentLength > body.limit {
		return nil, u.decodeFailure(ctx, actx, src, resp.StatusCode, &readError{err: errTooLarge})
	}
	if resp.ContentLength > 0 && !body.reserve(resp.ContentLength) {
		return nil, budgetFailure(src, resp.StatusCode, errBudget)
	}
	dec, err := decodeAnswer(body, n, format)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBytes))
	if err != nil {
		return nil, u.decodeFailure(ctx, actx, src, resp.StatusCode, err)
	}
	if dec.errorBody != nil {
		return nil, transport.ClassifyResponse(src, prof, resp.StatusCode, resp.Header, dec.errorBody)
	}
	return dec, nil
}

// readErrorBody reads the part of an error answer that is classified:
// at most transport.DefaultMaxErrorBodyBytes, the rest left unread.
func readErrorBody(body io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(body, transport.DefaultMaxErrorBodyBytes))
}

// budgetFailure is the end of an attempt whose answer did not fit the
// memory budget: the server holds as much as it may, so the call ends
// (a rejection; no other source is asked), with an error wrapping
// core.ErrMemoryBudget.
func budgetFailure(src *core.SourceConfig, status int, err error) error {
	return &core.RequestRejectedError{Source: src.Name, StatusCode: status, Code: "memory_budget",
		Message: "the answer of " + src.Name + " does not fit the server's memory budget for buffered bytes", Err: err}
}

// requestFormat is the encoding_format the request body asks for: the
// client's, unless the call's params or the source's EXTRA_BODY set
// another (later layers win, as in encode).
func requestFormat(format string, params, extra map[string]any) string {
	for _, m := range []map[string]any{extra, params} {
		if f, ok := m["encoding_format"].(string); ok {
			return f
		}
	}
	return format
}

// decodeFailure classifies a failed decode.
func (u *upstream) decodeFailure(ctx, actx context.Context, src *core.SourceConfig, status int, err error) error {
	var (
		re *readError
		me *malformedError
		ie *invalidError
	)
	switch {
	case errors.As(err, &re):
		if errors.Is(re.err, errTooLarge) {
			return &core.TransientError{Source: src.Name, Reason: core.ReasonNetworkError, StatusCode: status,
				Message: "response body larger than " + strconv.Itoa(maxBodyBytes>>20) + " MiB"}
		}
		if errors.Is(re.err, core.ErrMemoryBudget) {
			return budgetFailure(src, status, re.err)
		}
		return ioFailure(ctx, actx, src, status, re.err)
	case errors.As(err, &me):
		if cerr := ctx.Err(); cerr != nil {
			return &core.CanceledError{Err: cerr}
		}
		return &core.TransientError{Source: src.Name, Reason: core.ReasonNetworkError, StatusCode: status, Message: me.Error(), Err: me}
	case errors.As(err, &ie):
		return &core.ResultInvalidError{Source: src.Name, Message: ie.msg, Err: ie}
	}
	return transport.ClassifyNetError(src, status, err)
}

// ioFailure classifies an I/O error of an attempt: the caller's
// cancellation is a CanceledError, the attempt's own timeout a
// TransientError with reason timeout, anything else a network failure.
func ioFailure(ctx, actx context.Context, src *core.SourceConfig, status int, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return &core.CanceledError{Err: cerr}
	}
	cls := transport.ClassifyNetError(src, status, err)
	if actx.Err() != nil {
		var te *core.TransientError
		if errors.As(cls, &te) {
			te.Reason = core.ReasonTimeout
			te.Message = "attempt exceeded its timeout of " + src.Timeout.String()
		}
	}
	return cls
}

// encode builds the request body. Layers, later ones winning per
// top-level key: model and input (never overridden), encoding_format,
// params, src.ExtraBody. Keys after input are written sorted.
func (u *upstream) encode(src *core.SourceConfig, params map[string]any, texts []string) ([]byte, error) {
	size := 96 + len(src.Model)
	for _, t := range texts {
		size += len(t) + 3
	}
	var buf bytes.Buffer
	buf.Grow(size)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	put := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		return nil
	}
	buf.WriteString(`{"model":`)
	if err := put(src.Model); err != nil {
		return nil, err
	}
	buf.WriteString(`,"input":`)
	if err := put(texts); err != nil {
		return nil, err
	}
	format := u.format
	if format == "" {
		format = EncodingFloat
	}
	if len(params) == 0 && len(src.ExtraBody) == 0 {
		buf.WriteString(`,"encoding_format":`)
		_ = put(format)
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	fields := make(map[string]any, 1+len(params)+len(src.ExtraBody))
	fields["encoding_format"] = format
	maps.Copy(fields, params)
	maps.Copy(fields, src.ExtraBody)
	// The model and the inputs are the batch's own, in any case: a server
	// decoding as encoding/json matches member names case-insensitively.
	maps.DeleteFunc(fields, func(k string, _ any) bool {
		return strings.EqualFold(k, "model") || strings.EqualFold(k, "input")
	})
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		buf.WriteByte(',')
		_ = put(k)
		buf.WriteByte(':')
		if err := put(fields[k]); err != nil {
			return nil, errors.New("cannot encode request field " + k + ": " + err.Error())
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// embeddingsURL appends /embeddings to the path of base, keeping a query
// string (Azure's ?api-version=…) at the end.
func embeddingsURL(base string) (string, error) {
	base = strings.TrimSpace(base)
	query := ""
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base, query = base[:i], base[i:]
	}
	s := strings.TrimRight(base, "/") + "/embeddings" + query
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("cannot parse it")
	}
	if u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("it needs an http(s) scheme and a host")
	}
	return s, nil
}

// estimateTokens estimates the prompt tokens of a batch.
func estimateTokens(texts []string) int {
	n := 0
	for _, t := range texts {
		n += transport.EstimateTokens(t)
	}
	return n
}

// textBytes is the bytes of texts: the most prompt tokens an answer for
// them may claim (a token is at least a byte).
func textBytes(texts []string) int {
	n := 0
	for _, t := range texts {
		n += len(t)
	}
	return n
}

// normalizeL2 scales v to unit length; a zero vector stays zero.
func normalizeL2(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}
