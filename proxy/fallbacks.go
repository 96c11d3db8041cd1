package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// This file holds a chat request's fallbacks: other routed models whose
// scopes take the call, in order, when the requested model's scope cannot
// answer it.
//
//	{"model": "gpt-4o", "fallbacks": ["claude", "qwen"], "messages": […]}
//
// The list may also come inside "extra_body" (what some SDK users send
// literally); the top-level one wins when both are given. Neither is ever
// sent upstream. Every route tried shares the request's one context: no
// route gets a deadline of its own.

const (
	// fallbacksField is the request field listing the fallback models.
	fallbacksField = "fallbacks"
	// extraBodyField is the request field some SDK users send literally;
	// its fallbacks member counts as the request's.
	extraBodyField = "extra_body"
	// maxFallbacks bounds the fallback models of one request, as listed
	// (duplicates included).
	maxFallbacks = 8
	// routeHeader names the route (the model name) that answered.
	routeHeader = "X-PolyGateway-Route"
)

// setFallbacks reads the request's fallbacks: top is the top-level field's
// value, inner the one of extra_body.fallbacks (each nil when absent or
// null). The top-level one wins; the other is then ignored.
func (req *chatRequest) setFallbacks(top, inner []byte) error {
	param, raw := fallbacksField, top
	if raw == nil {
		param, raw = extraBodyField+"."+fallbacksField, inner
	}
	if raw == nil {
		return nil
	}
	list, err := parseFallbacks(raw, param)
	if err != nil || len(list) == 0 {
		return err
	}
	req.fallbacks, req.fallbacksParam = list, param
	return nil
}

// parseFallbacks decodes a fallbacks value (valid JSON, not null): an
// array of at most maxFallbacks non-empty strings. param names the field
// in errors.
func parseFallbacks(raw []byte, param string) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, badRequest(param, "invalid_type", "%s must be an array of model names", param)
	}
	if n := countElements(raw, maxFallbacks); n > maxFallbacks {
		return nil, badRequest(param, "array_above_max_length", "%s has more than %d entries", param, maxFallbacks)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest(param, "invalid_type", "%s must be an array of model names", param)
	}
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]string, len(items))
	for i, it := range items {
		it = bytes.TrimSpace(it)
		p := param + "[" + strconv.Itoa(i) + "]"
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &out[i]) != nil {
			return nil, badRequest(p, "invalid_type", "%s must be a model name (a string)", p)
		}
		if out[i] == "" {
			return nil, badRequest(p, "invalid_value", "%s must not be empty", p)
		}
	}
	return out, nil
}

// stripFallbacks finds the fallbacks member of an extra_body value (raw,
// valid JSON). found reports one; then kept is extra_body without it (nil
// when it was the only member, so that no empty object goes upstream),
// each other member as its JSON text was sent, and inner the member's
// value (the last one's, as encoding/json reads a duplicate; nil when
// null). Without one, or when raw is not an object, kept is raw itself.
// The members are read by a json.Decoder, whose offsets give their text.
func stripFallbacks(raw []byte) (kept, inner []byte, found bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return raw, nil, false
	}
	var others [][]byte // the text of the other members
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return raw, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return raw, nil, false
		}
		if tok.(string) == fallbacksField {
			found, inner = true, v
			if isNull(v) {
				inner = nil
			}
			continue
		}
		// From the end of the previous member: past its comma and white
		// space, the member itself.
		others = append(others, bytes.TrimLeft(raw[start:dec.InputOffset()], " \t\r\n,"))
	}
	if !found {
		return raw, nil, false
	}
	if len(others) == 0 {
		return nil, inner, true
	}
	kept = make([]byte, 0, len(raw))
	kept = append(kept, '{')
	kept = append(kept, bytes.Join(others, []byte{','})...)
	return append(kept, '}'), inner, true
}

// chatHop is one route a chat request may take: the requested model's,
// then each fallback's.
type chatHop struct {
	model, scope string
	cs           chatScope
}

// chatChain returns the routes of a chat request in the order they are
// tried: the requested model's (scope, cs), then those of its fallbacks.
// A fallback that is not routed is a 400 naming it; one whose scope is
// already in the chain (the requested model itself, a duplicate, another
// name of the same scope) is skipped, since it would run the same sources
// again.
func (g *generation) chatChain(req *chatRequest, scope string, cs chatScope) ([]chatHop, *apiError) {
	chain := []chatHop{{model: req.model, scope: scope, cs: cs}}
	for i, m := range req.fallbacks {
		fscope, fcs, ok := g.chatRoute(m)
		if !ok {
			return nil, invalidRequest(http.StatusBadRequest, req.fallbacksParam+"["+strconv.Itoa(i)+"]", "model_not_found",
				"The fallback model `"+shown(m)+"` does not exist or is not routed by this gateway.")
		}
		if slices.ContainsFunc(chain, func(h chatHop) bool { return h.scope == fscope }) {
			continue
		}
		chain = append(chain, chatHop{model: m, scope: fscope, cs: fcs})
	}
	return chain, nil
}

// fallsBack reports whether a route's failure lets the next route take
// the call: the scope could not answer (unavailable for any reason, its
// governance backend failed, or its last failure was transient, a dead
// source or an invalid result) and the call's context is still live. A
// rejected request is the caller's to fix and is never retried elsewhere;
// nor is anything after the client went away, the deadline passed or the
// server began cancelling its calls.
func fallsBack(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch polygateway.Classify(err).Class {
	case core.ClassUnavailable, core.ClassBackend, core.ClassTransient,
		core.ClassSourceDead, core.ClassInvalid:
		return true
	}
	return false
}

// enterRoute records that route i of chain is about to be tried: the log
// line's scope and routes, and the route the answer will name.
func enterRoute(h http.Header, ri *reqInfo, chain []chatHop, i int) {
	ri.scope, ri.route = chain[i].scope, chain[i].model
	if len(chain) > 1 {
		ri.routes = append(ri.routes, chain[i].model)
	}
	h.Set(routeHeader, chain[i].model)
}

// withEarlier returns resp with the attempts of the routes tried before
// its own in front of its attempts.
func withEarlier(resp *polygateway.LLMResponse, earlier []string) *polygateway.LLMResponse {
	if len(earlier) > 0 {
		resp.Attempts = append(slices.Clip(earlier), resp.Attempts...)
	}
	return resp
}

// attemptLog collects the sources a call's attempts went to.
type attemptLog struct{ sources []string }

// AttemptStarted is part of core.AttemptListener.
func (l *attemptLog) AttemptStarted(ev core.AttemptEvent) { l.sources = append(l.sources, ev.Source) }

// AttemptFinished is part of core.AttemptListener.
func (l *attemptLog) AttemptFinished(core.AttemptEvent) {}

// governChat runs a non-streaming chat call on the routes of chain in
// turn, until one answers or fails in a way no other route can help with
// (fallsBack); the error is then that route's. The answer's attempts are
// those of every route tried.
func (s *Server) governChat(ctx context.Context, w http.ResponseWriter, ri *reqInfo, chain []chatHop, req *chatRequest) (*polygateway.LLMResponse, error) {
	var earlier []string
	for i := 0; ; i++ {
		h := &chain[i]
		call := &core.Call{Messages: req.messages, Params: req.params, Stream: h.cs.watched, SessionID: ri.id, Budgets: s.callBudgets(ri),
			CacheNamespace: s.cacheNamespace(ri, h.cs.cacheNS), NoPushbackWait: true, Place: ri.place}
		var seen *attemptLog
		if len(chain) > 1 {
			seen = &attemptLog{}
			call.Events = seen
		}
		enterRoute(w.Header(), ri, chain, i)
		resp, err := s.govern(ctx, ri, h.cs.k, call)
		if err == nil {
			return withEarlier(resp, earlier), nil
		}
		if seen != nil {
			earlier = append(earlier, seen.sources...)
		}
		if i == len(chain)-1 || !fallsBack(ctx, err) {
			w.Header().Del(routeHeader)
			if len(chain) > 1 && len(earlier) > 0 {
				ri.source, ri.attempts = earlier[len(earlier)-1], earlier
				w.Header().Set("X-PolyGateway-Attempts", joinComma(earlier))
			}
			return nil, err
		}
	}
}

// streamRoutes runs a streamed chat call on the routes of chain in turn.
// It goes on to the next route only while nothing has been sent to the
// client: once a delta went out (commit policy first_token), the route
// that sent it ends the stream, however it ends. It returns the sink of
// the last route tried, whose tracked attempts are those of every route.
func (s *Server) streamRoutes(ctx context.Context, w http.ResponseWriter, ri *reqInfo, chain []chatHop, req *chatRequest, ans chatAnswer) (*polygateway.LLMResponse, *streamSink, error) {
	var earlier []string
	for i := 0; ; i++ {
		h := &chain[i]
		enterRoute(w.Header(), ri, chain, i)
		callID := polygateway.NewCallID()
		sink := s.newStreamSink(w, ri, callID, req.model, req.commit, ans)
		sink.attempts = slices.Clip(earlier)
		resp, err := s.govern(ctx, ri, h.cs.k, &core.Call{
			ID: callID, Messages: req.messages, Params: req.params, Stream: true, SessionID: ri.id, Deltas: sink, Events: sink,
			Budgets: s.callBudgets(ri), CacheNamespace: s.cacheNamespace(ri, h.cs.cacheNS), NoPushbackWait: true, Place: ri.place,
		})
		if err == nil {
			return withEarlier(resp, earlier), sink, nil
		}
		if i == len(chain)-1 || sink.started() || sink.writeFailed() || !fallsBack(ctx, err) {
			if !sink.started() {
				w.Header().Del(routeHeader)
			}
			return nil, sink, err
		}
		_, earlier = sink.tracked()
		sink.release()
	}
}
