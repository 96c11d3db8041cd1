package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
	"github.com/polygateway/polygateway/internal/redact"
)

// gatewayInfo is the "gateway" object of every answer: what really
// happened behind the OpenAI face.
type gatewayInfo struct {
	RequestID string   `json:"request_id"`
	CallID    string   `json:"call_id,omitempty"`
	Scope     string   `json:"scope"`
	Route     string   `json:"route"`
	Source    string   `json:"source"`
	Provider  string   `json:"provider,omitempty"`
	Attempts  []string `json:"attempts"`
	CacheHit  bool     `json:"cache_hit"`
	Degraded  bool     `json:"degraded"`
	// DegradedBy names the strategy that served a degraded answer
	// (stale_cache, fallback).
	DegradedBy string `json:"degraded_by,omitempty"`
	// BreakerState is the answering source's circuit state when its
	// attempt was admitted (closed, half_open: the answer was the probe);
	// absent when no source answered (a cache hit, a fallback).
	BreakerState string   `json:"breaker_state,omitempty"`
	LatencyMS    float64  `json:"latency_ms"`
	TTFTMS       float64  `json:"ttft_ms,omitempty"`
	UsageSource  string   `json:"usage_source,omitempty"`
	Cost         *float64 `json:"cost,omitempty"`
}

func newGatewayInfo(ri *reqInfo, resp *polygateway.LLMResponse) *gatewayInfo {
	attempts := resp.Attempts
	if attempts == nil {
		attempts = []string{}
	}
	return &gatewayInfo{
		RequestID: ri.id, CallID: resp.CallID, Scope: ri.scope, Route: ri.route, Source: resp.SourceName, Provider: resp.Provider,
		Attempts: attempts, CacheHit: resp.CacheHit, Degraded: degraded(resp), DegradedBy: string(resp.DegradedBy),
		BreakerState: breakerState(resp),
		LatencyMS:    ms(resp.Latency), TTFTMS: ms(resp.TTFT), UsageSource: resp.UsageSource, Cost: finiteCost(resp.Cost),
	}
}

// finiteCost is cost, with NaN and the infinities (which JSON cannot
// carry) written as 0.
func finiteCost(cost *float64) *float64 {
	if cost == nil || finite(*cost) == *cost {
		return cost
	}
	zero := 0.0
	return &zero
}

// degraded reports whether the answer was served by a fallback (a stale
// cache entry or the caller's fallback function) rather than by a source.
func degraded(resp *polygateway.LLMResponse) bool { return resp.Degraded }

// breakerHeader carries the answering source's circuit state.
const breakerHeader = "X-PolyGateway-Breaker"

// breakerState is the answering source's circuit state at admission, or ""
// when no source answered (a cache hit, a degraded answer).
func breakerState(resp *polygateway.LLMResponse) string {
	if resp.CacheHit || resp.Degraded || resp.SourceName == "" {
		return ""
	}
	return resp.Breaker.String()
}

// degradedHeader is the X-PolyGateway-Degraded value: "false", or the
// strategy that served a degraded answer (stale_cache, fallback).
func degradedHeader(resp *polygateway.LLMResponse) string {
	switch {
	case !resp.Degraded:
		return "false"
	case resp.DegradedBy != "":
		return string(resp.DegradedBy)
	}
	return "true"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type usageBody struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails carries the part of the prompt the provider
	// served from its prompt cache, when it reported one.
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// promptTokensDetails are the details of an answer's prompt tokens.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func usageOf(resp *polygateway.LLMResponse) *usageBody {
	u := &usageBody{PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens, TotalTokens: resp.PromptTokens + resp.CompletionTokens}
	if resp.CachedPromptTokens > 0 {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: resp.CachedPromptTokens}
	}
	return u
}

type toolCallBody struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function functionBody `json:"function"`
}

type functionBody struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func toolCalls(resp *polygateway.LLMResponse, withIndex bool) []toolCallBody {
	if len(resp.ToolCalls) == 0 {
		return nil
	}
	out := make([]toolCallBody, len(resp.ToolCalls))
	for i, tc := range resp.ToolCalls {
		typ := tc.Type
		if typ == "" {
			typ = "function"
		}
		out[i] = toolCallBody{ID: tc.ID, Type: typ, Function: functionBody{Name: tc.Name, Arguments: tc.Arguments}}
		if withIndex {
			idx := tc.Index
			out[i].Index = &idx
		}
	}
	return out
}

// finishReason returns the answer's finish_reason as clients expect it.
func finishReason(resp *polygateway.LLMResponse) string {
	switch {
	case resp.FinishReason != "":
		return resp.FinishReason
	case len(resp.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

type completionBody struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []choiceBody `json:"choices"`
	Usage   *usageBody   `json:"usage"`
	Gateway *gatewayInfo `json:"gateway"`
}

type choiceBody struct {
	Index        int         `json:"index"`
	Message      messageBody `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Logprobs     *struct{}   `json:"logprobs"`
}

type messageBody struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallBody `json:"tool_calls,omitempty"`
}

// commitHeader overrides the server's stream commit policy for one request
// (the body field polygateway.stream_commit wins over it).
const commitHeader = "X-PolyGateway-Stream-Commit"

// handleChat serves POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) { s.serveChat(w, r, nil) }

// chatAPI translates another API onto the chat call: it reads a request
// body into the chat request the call is made of, and returns the
// chatAnswer that renders that request's answer. The nil chatAPI is the
// chat completions API itself.
type chatAPI func(body []byte) (*chatRequest, chatAnswer, error)

// chatAnswer renders the answer of one request in its API's shape.
type chatAnswer interface {
	// body returns the JSON body of a non-streamed answer.
	body(ri *reqInfo, resp *polygateway.LLMResponse, created int64) ([]byte, error)
	// events returns the writer of a streamed answer's events, for the
	// call callID of one route.
	events(callID string, created int64) streamEvents
}

// serveChat serves a chat call asked in the shape of api (nil: chat
// completions): the same admission, routes, fallbacks, commit policy,
// governance and log line whatever the shape.
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, api chatAPI) {
	ri := info(r)
	g, leave := s.enter(w, r, ri)
	if g == nil {
		return
	}
	defer leave()
	body, release, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, ri, aerr)
		return
	}
	defer release()
	req, ans, err := parseFor(api, body)
	if err != nil {
		s.fail(w, ri, mapError(err, false))
		return
	}
	ri.model, ri.stream = req.model, req.stream
	if req.model == "" {
		s.fail(w, ri, noModel())
		return
	}
	if req.commit == "" {
		if v := r.Header.Get(commitHeader); v != "" {
			if !validCommit(v) {
				s.fail(w, ri, invalidRequest(http.StatusBadRequest, commitHeader, "invalid_value",
					commitHeader+" "+strconv.Quote(v)+" is not a commit policy ("+CommitFirstToken+" or "+CommitBuffer+")"))
				return
			}
			req.commit = v
		}
	}
	scope, cs, ok := g.chatRoute(req.model)
	if !ok {
		s.fail(w, ri, modelNotFound(req.model))
		return
	}
	ri.scope = scope
	chain, aerr := g.chatChain(req, scope, cs)
	if aerr != nil {
		s.fail(w, ri, aerr)
		return
	}
	if req.stream {
		s.streamChat(w, r, ri, chain, req, ans)
		return
	}
	ctx, done := s.callContext(r)
	defer done()
	resp, err := s.governChat(s.withBudget(ctx), w, ri, chain, req)
	if err != nil {
		s.fail(w, ri, s.callError(r, err))
		return
	}
	s.note(ri, resp)
	setGatewayHeaders(w.Header(), resp)
	b, err := answerBody(ans, ri, resp)
	if err != nil {
		s.fail(w, ri, mapError(err, false))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_, _ = w.Write(b)
}

// parseFor reads body as a request of api (nil: chat completions).
func parseFor(api chatAPI, body []byte) (*chatRequest, chatAnswer, error) {
	if api == nil {
		req, err := parseChat(body)
		return req, nil, err
	}
	return api(body)
}

// answerBody is the body of the non-streamed answer resp, rendered by ans
// (nil: a chat completion).
func answerBody(ans chatAnswer, ri *reqInfo, resp *polygateway.LLMResponse) ([]byte, error) {
	if ans == nil {
		return appendCompletion(make([]byte, 0, 1024+len(resp.Content)+len(resp.Thinking)), ri, resp, time.Now().Unix())
	}
	return ans.body(ri, resp, time.Now().Unix())
}

// completion is the chat.completion object of resp.
func completion(ri *reqInfo, resp *polygateway.LLMResponse, created int64) *completionBody {
	content := &resp.Content
	tcs := toolCalls(resp, false)
	if resp.Content == "" && len(tcs) > 0 {
		content = nil
	}
	return &completionBody{
		ID: "chatcmpl-" + resp.CallID, Object: "chat.completion", Created: created, Model: resp.Model,
		Choices: []choiceBody{{Message: messageBody{Role: "assistant", Content: content, ReasoningContent: resp.Thinking, ToolCalls: tcs}, FinishReason: finishReason(resp)}},
		Usage:   usageOf(resp), Gateway: newGatewayInfo(ri, resp),
	}
}

// appendCompletion appends the JSON of completion(ri, resp, created), as
// an encoding/json Encoder without HTML escaping writes it (without its
// newline).
func appendCompletion(b []byte, ri *reqInfo, resp *polygateway.LLMResponse, created int64) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(completion(ri, resp, created)); err != nil {
		return b, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil
}

// finite is f, or 0 for NaN and the infinities, which JSON cannot carry.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// note records the answer in the request's log line.
func (s *Server) note(ri *reqInfo, resp *polygateway.LLMResponse) {
	ri.source, ri.attempts, ri.cache = resp.SourceName, resp.Attempts, resp.CacheHit
	if ri.source == "" && resp.CacheHit {
		ri.source = "cache"
	}
}

// setGatewayHeaders sets the X-PolyGateway-* headers of an answer.
func setGatewayHeaders(h http.Header, resp *polygateway.LLMResponse) {
	h.Set("X-PolyGateway-Source", resp.SourceName)
	if resp.CacheHit && len(resp.Attempts) == 0 {
		h.Set("X-PolyGateway-Attempts", "cache") // answered without an attempt
	} else {
		h.Set("X-PolyGateway-Attempts", joinComma(resp.Attempts))
	}
	if resp.CacheHit {
		h.Set("X-PolyGateway-Cache", "hit")
	} else {
		h.Set("X-PolyGateway-Cache", "miss")
	}
	h.Set("X-PolyGateway-Degraded", degradedHeader(resp))
	if st := breakerState(resp); st != "" {
		h.Set(breakerHeader, st)
	}
}

// fail sends e (unless the client is gone) and records it for the log.
func (s *Server) fail(w http.ResponseWriter, ri *reqInfo, e *apiError) {
	ri.code = e.code
	if e.status == StatusClientClosedRequest {
		ri.status = e.status
		return
	}
	writeAPIError(w, e)
}

// noModel is the refusal of a request without a model: OpenAI refuses one,
// and so does the gateway, default scope or not (chat completions,
// responses and embeddings alike).
func noModel() *apiError {
	return invalidRequest(http.StatusBadRequest, "model", "missing_required_parameter", "you must provide a model parameter")
}

func modelNotFound(model string) *apiError {
	msg := "The model `" + shown(model) + "` does not exist or is not routed by this gateway."
	return invalidRequest(http.StatusNotFound, "model", "model_not_found", msg)
}

// maxShown bounds a name a client sent (a model, a field) where the
// gateway quotes it back (an error, the access log): real names are far
// shorter.
const maxShown = 256

// shown is s, a name a client sent, as the gateway quotes it: at most
// maxShown bytes, not splitting a rune, a cut marked with "…".
func shown(s string) string {
	if len(s) <= maxShown {
		return s
	}
	return redact.CutRunes(s, maxShown) + "…"
}

// govern runs one governed call of the request ri on k and returns the
// library's public answer and error types, as a library caller of the
// scope gets them. The time the call waited in the admission queue
// (core.Call.QueueWait, which the engine has set when Handle returns) is
// added to the request's, answered or not.
func (s *Server) govern(ctx context.Context, ri *reqInfo, k *kernel.Client, call *core.Call) (*polygateway.LLMResponse, error) {
	if s.governing != nil {
		s.governing(call)
	}
	kr, err := k.Handle(ctx, call)
	ri.queueWait += call.QueueWait
	if err != nil {
		return nil, err
	}
	return kr, nil
}
