package polygatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	chatPath       = "/v1/chat/completions"
	embeddingsPath = "/v1/embeddings"
	modelsPath     = "/v1/models"
	maxBodySize    = 64 << 20
)

// request is the part of a chat completion request the server looks at.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct{} `json:"messages"` // zero-size elements: counted, not kept
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == chatPath:
		s.governed(w, r, nil)
	case s.cfg.handlers[p] != nil:
		s.mounted(w, r, s.cfg.handlers[p])
	case p == embeddingsPath:
		s.governed(w, r, new(embedRequest))
	case p == modelsPath || strings.HasPrefix(p, modelsPath+"/"):
		s.models(w, r)
	default:
		body, _ := io.ReadAll(io.LimitReader(r.Body, MaxLoggedBody+1))
		s.logAttempt(r, time.Now(), body, jsonModel(body), false, KindNone, http.StatusNotFound)
		writeStatic(w, http.StatusNotFound, bodyNotFound)
	}
}

// mounted serves a WithHandler handler; the body it reads is the one the
// attempt log saw.
func (s *Server) mounted(w http.ResponseWriter, r *http.Request, h http.Handler) {
	arrival := time.Now()
	body, err := readBody(r)
	if err != nil {
		abort()
	}
	s.logAttempt(r, arrival, body, jsonModel(body), false, KindNone, 0)
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.ServeHTTP(w, r)
}

// jsonModel returns the "model" of a JSON body, or "".
func jsonModel(body []byte) string {
	var m struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	return m.Model
}

// abort drops the connection without completing the response.
func abort() { panic(http.ErrAbortHandler) }

// governed serves a request answered by a Behavior: a chat completion when
// emb is nil, else an embeddings request decoded into emb.
func (s *Server) governed(w http.ResponseWriter, r *http.Request, emb *embedRequest) {
	s.enter()
	defer s.inFlight.Add(-1)

	body, err := readBody(r)
	if err != nil {
		abort()
	}
	idx, arrival := s.record(body)
	if r.Method != http.MethodPost {
		s.logAttempt(r, arrival, body, jsonModel(body), false, KindNone, http.StatusMethodNotAllowed)
		writeStatic(w, http.StatusMethodNotAllowed, bodyNotFound)
		return
	}
	info := RequestInfo{
		Index:   idx,
		Path:    r.URL.Path,
		Arrival: arrival,
		Body:    body,
		Header:  r.Header,
	}
	if emb == nil {
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			s.logAttempt(r, arrival, body, "", false, KindNone, http.StatusBadRequest)
			writeStatic(w, http.StatusBadRequest, bodyBadJSON)
			return
		}
		info.Model, info.Stream, info.Messages = req.Model, req.Stream, len(req.Messages)
		info.IncludeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	} else {
		if bad := emb.parse(body, s.cfg.embedDim); bad != "" {
			s.logAttempt(r, arrival, body, emb.Model, false, KindNone, http.StatusBadRequest)
			writeStatic(w, http.StatusBadRequest, bad)
			return
		}
		info.Model, info.Inputs = emb.Model, len(emb.texts)
	}

	var b Behavior
	admitted := true
	if lim := int64(s.cfg.limit); lim > 0 {
		if s.admitted.Add(1) > lim {
			s.admitted.Add(-1)
			b, admitted = s.cfg.over, false
		} else {
			defer s.admitted.Add(-1)
		}
	}
	switch {
	case !admitted:
	case s.down(arrival):
		b = s.cfg.flapB
	default:
		b = s.next(&info)
	}
	s.logAttempt(r, arrival, body, info.Model, info.Stream, b.Kind(), b.StatusCode())
	s.answer(w, r, &info, &b, emb)
}

// readBody reads the whole request body.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > 0 && r.ContentLength <= maxBodySize {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, maxBodySize))
}

// writeStatic writes a complete JSON response.
func writeStatic(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// answerer holds the per-request state of one answer.
type answerer struct {
	s     *Server
	w     http.ResponseWriter
	f     http.Flusher
	ctx   context.Context
	b     *Behavior
	timer *time.Timer
}

// sleep waits d, sending keep-alive comments when ka is set and the
// behavior asks for them. It reports false when the client went away or the
// server is closing.
func (a *answerer) sleep(d time.Duration, ka bool) bool {
	if d <= 0 {
		return true
	}
	ka = ka && a.b.KeepAlive > 0
	for d > 0 {
		step := d
		if ka && step > a.b.KeepAlive {
			step = a.b.KeepAlive
		}
		if a.timer == nil {
			a.timer = time.NewTimer(step)
		} else {
			a.timer.Reset(step)
		}
		select {
		case <-a.timer.C:
		case <-a.ctx.Done():
			a.timer.Stop()
			return false
		case <-a.s.done:
			a.timer.Stop()
			return false
		}
		d -= step
		if ka && d > 0 && !a.write(eventKeepAlive) {
			return false
		}
	}
	return true
}

// write sends p and flushes it.
func (a *answerer) write(p []byte) bool {
	if _, err := a.w.Write(p); err != nil {
		return false
	}
	if a.f != nil {
		a.f.Flush()
	}
	return true
}

func (a *answerer) stop() {
	if a.timer != nil {
		a.timer.Stop()
	}
}

// setHeaders applies the behavior's extra headers.
func (a *answerer) setHeaders() {
	h := a.w.Header()
	for k, v := range a.b.Headers {
		h.Set(k, v)
	}
}

// answer serves one request with behavior b; emb is the decoded embeddings
// request, nil for a chat completion.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, info *RequestInfo, b *Behavior, emb *embedRequest) {
	a := answerer{s: s, w: w, ctx: r.Context(), b: b}
	a.f, _ = w.(http.Flusher)
	defer a.stop()

	if b.kind == kindHang {
		select {
		case <-a.ctx.Done():
		case <-s.done:
		}
		abort()
	}
	if !a.sleep(b.Latency, false) {
		abort()
	}
	switch b.kind {
	case kindReset:
		reset(w)
	case kindStatus:
		a.status()
	default:
		model := b.Model
		if model == "" {
			model = info.Model
		}
		if model == "" {
			model = DefaultModel
		}
		if emb != nil {
			a.embeddings(emb, model)
			return
		}
		key := renderKey{model: model, tokens: b.tokens(), content: b.Content, prompt: b.promptTokens(),
			thinking: b.Thinking, thinkingField: b.ThinkingField, usage: b.Usage}
		if key.content != "" {
			key.tokens = 0 // the content decides the tokens
		}
		rd := s.cache.get(key)
		if info.Stream {
			a.stream(rd, info.IncludeUsage)
		} else {
			a.plain(rd)
		}
	}
}

// reset closes the connection abruptly before any response byte.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		abort()
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		abort()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST instead of FIN
	}
	_ = conn.Close()
}

// status writes a Status behavior.
func (a *answerer) status() {
	h := a.w.Header()
	if strings.HasPrefix(a.b.body, "{") {
		h["Content-Type"] = hdrJSON
	} else {
		h["Content-Type"] = hdrPlainText
	}
	a.setHeaders()
	h["Content-Length"] = []string{strconv.Itoa(len(a.b.body))}
	a.w.WriteHeader(a.b.status)
	_, _ = io.WriteString(a.w, a.b.body)
}

// plain writes a non-streaming answer.
func (a *answerer) plain(rd *rendered) {
	b := a.b
	wait := b.FirstTokenDelay
	if n := len(rd.chunks); n > 1 {
		wait += time.Duration(n-1) * b.InterTokenDelay
	}
	if b.fault == faultStall {
		wait += b.stall
	}
	if !a.sleep(wait, false) {
		abort()
	}
	body, clen := rd.full, rd.fullLen
	if b.NoUsage {
		body, clen = rd.fullNoUsage, rd.fullNoUseLen
	}
	switch b.fault {
	case faultMalformed, faultTruncated:
		body, clen = bodyMalformed, lenMalformed
	case faultErrorEvent:
		body, clen = bodyErrorEvent, lenErrorEvent
	}
	a.writeJSON(body, clen)
}

// writeJSON writes a 200 answer of JSON body, whose length is clen; a Cut
// behavior breaks the connection halfway through it.
func (a *answerer) writeJSON(body []byte, clen string) {
	h := a.w.Header()
	h["Content-Type"] = hdrJSON
	a.setHeaders()
	h["Content-Length"] = []string{clen}
	a.w.WriteHeader(http.StatusOK)
	if a.b.fault == faultCut {
		a.write(body[:len(body)/2])
		abort()
	}
	_, _ = a.w.Write(body)
}

// stream writes a streaming answer.
func (a *answerer) stream(rd *rendered, includeUsage bool) {
	b := a.b
	h := a.w.Header()
	h["Content-Type"] = hdrEventStream
	h["Cache-Control"] = hdrNoCache
	h["X-Content-Type-Options"] = hdrNoSniff
	a.setHeaders()
	a.w.WriteHeader(http.StatusOK)
	if a.f != nil {
		a.f.Flush()
	}
	if !a.sleep(b.FirstTokenDelay, true) {
		abort()
	}
	if rd.thinkingChunk != nil && !a.write(rd.thinkingChunk) {
		return
	}
	n := len(rd.chunks)
	at := -1
	if b.fault != faultNone {
		at = min(max(b.faultAt, 0), n)
	}
	for i := 0; i <= n; i++ {
		if i == at && b.fault != faultTruncated && !a.fault() {
			return
		}
		if i == n {
			break
		}
		if i > 0 && !a.sleep(b.InterTokenDelay, true) {
			abort()
		}
		ev := rd.chunks[i]
		if i == at && b.fault == faultTruncated {
			ev = truncatedEvent(ev)
		}
		if !a.write(ev) {
			return
		}
	}
	finish := rd.finish
	if at == n && b.fault == faultTruncated {
		finish = truncatedEvent(finish) // no token n: the chunk after the last one is cut
	}
	if !a.write(finish) {
		return
	}
	if includeUsage && !b.NoUsage && !a.write(rd.usage) {
		return
	}
	if !b.NoDone {
		a.write(eventDone)
	}
}

// truncatedEvent returns the SSE event ev ("data: {…}\n\n") with its JSON
// cut at two thirds of its length, still ending with the blank line.
func truncatedEvent(ev []byte) []byte {
	const prefix, tail = len("data: "), len("\n\n")
	if len(ev) <= prefix+tail+1 {
		return ev
	}
	payload := ev[prefix : len(ev)-tail]
	out := make([]byte, 0, len(ev))
	out = append(out, ev[:prefix]...)
	out = append(out, payload[:len(payload)*2/3]...)
	return append(out, "\n\n"...)
}

// fault performs the behavior's stream fault; it reports whether the stream
// goes on.
func (a *answerer) fault() bool {
	switch a.b.fault {
	case faultCut:
		abort()
	case faultStall:
		if !a.sleep(a.b.stall, true) {
			abort()
		}
	case faultMalformed:
		if !a.write(eventMalformed) {
			return false
		}
		if a.b.closeAfterFault {
			abort()
		}
	case faultErrorEvent:
		if a.write(eventError) {
			a.write(eventDone)
		}
		return false
	}
	return true
}
