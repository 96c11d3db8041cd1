// Package streamhandler is an HTTP handler that relays a governed chat
// answer to its own users as Server-Sent Events while it is generated: the
// shape of a chat UI's backend. It reads the answer with
// GatewayClient.ChatStream, so the call keeps its governance: a source
// that fails before its first token is replaced before anything is sent,
// the stream watchdog cuts a silent source, and the telemetry row is
// written. When the user goes away, the request's context ends the call
// and releases what it held.
//
// The events it writes are its own small protocol (not OpenAI's):
//
//	event: delta   data: {"content":"…"}          one per piece of the answer
//	event: done    data: {"source":"…","cost":…}  the answer is complete
//	event: error   data: {"error":"…","retry_after_s":…}
//
// Its test (streamhandler_test.go) runs it against the fake server of
// package polygatewaytest; cmd/main.go serves it offline.
package streamhandler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/polygateway/polygateway"
)

// maxQuestionBytes bounds the question a user may send.
const maxQuestionBytes = 16 << 10

// Handler answers POST / with the body as the user's question.
type Handler struct {
	// Client makes the governed calls (required).
	Client *polygateway.GatewayClient
	// System is the system prompt (optional).
	System string
}

// ServeHTTP streams the answer to the question in the request body.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a question", http.StatusMethodNotAllowed)
		return
	}
	q, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxQuestionBytes))
	if err != nil || strings.TrimSpace(string(q)) == "" {
		http.Error(w, "the body is the question (at most 16 KiB)", http.StatusBadRequest)
		return
	}
	msgs := []polygateway.Message{polygateway.User(string(q))}
	if h.System != "" {
		msgs = append([]polygateway.Message{polygateway.System(h.System)}, msgs...)
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}

	// The request's context: a user who goes away cancels the call.
	stream := h.Client.ChatStream(r.Context(), msgs)
	defer stream.Close()
	started := false
	for stream.Next() {
		d := stream.Delta()
		if d.Content == "" {
			continue
		}
		if !started {
			// Headers go out with the first piece: until then a failure
			// can still be answered with a plain HTTP status.
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			started = true
		}
		if err := writeEvent(w, "delta", map[string]string{"content": d.Content}); err != nil {
			return // the user went away; Close cancels the call
		}
		flusher.Flush()
	}
	if err := stream.Err(); err != nil {
		if !started {
			status, retry := statusOf(err)
			if retry > 0 {
				w.Header().Set("Retry-After", fmt.Sprint(retry))
			}
			http.Error(w, "no answer: "+reasonOf(err), status)
			return
		}
		// Part of the answer is out: say it ended badly (the user keeps
		// what it has; the answer is not complete).
		_, retry := statusOf(err)
		_ = writeEvent(w, "error", map[string]any{"error": reasonOf(err), "retry_after_s": retry})
		flusher.Flush()
		return
	}
	resp := stream.Response()
	if !started {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	done := map[string]any{"source": resp.SourceName, "attempts": resp.Attempts}
	if resp.Cost != nil {
		done["cost"] = *resp.Cost
	}
	_ = writeEvent(w, "done", done)
	flusher.Flush()
}

// writeEvent writes one SSE event with v as its JSON data.
func writeEvent(w http.ResponseWriter, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	return err
}

// statusOf maps a failed call to an HTTP status and a Retry-After in
// seconds (0 = none).
func statusOf(err error) (status int, retryAfterS int) {
	var unavailable *polygateway.GatewayUnavailableError
	var rejected *polygateway.RequestRejectedError
	switch {
	case errors.As(err, &unavailable):
		return http.StatusServiceUnavailable, int(unavailable.RetryAfter.Seconds() + 0.999)
	case errors.As(err, &rejected):
		return http.StatusBadRequest, 0
	}
	return http.StatusBadGateway, 0
}

// reasonOf is what a user may be told about a failure: its class and
// reason, never an upstream's address or message.
func reasonOf(err error) string {
	var unavailable *polygateway.GatewayUnavailableError
	var transient *polygateway.TransientError
	var rejected *polygateway.RequestRejectedError
	switch {
	case errors.As(err, &unavailable):
		return "unavailable (" + string(unavailable.Reason) + ")"
	case errors.As(err, &transient):
		return "interrupted (" + string(transient.Reason) + ")"
	case errors.As(err, &rejected):
		return "rejected"
	case errors.Is(err, polygateway.ErrGateway):
		return "failed"
	}
	return "cancelled"
}
