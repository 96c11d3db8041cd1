package polygatewaytest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// ContentChunk returns the JSON payload of one streamed content chunk
// carrying content, as OpenAI-compatible servers send it: the event a test
// cuts or damages to build a stream that the Behaviors do not script.
func ContentChunk(content string) string {
	c, _ := json.Marshal(content) // a string always encodes
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` +
		string(c) + `},"finish_reason":null}]}`
}

// FinishChunk is the payload of the chunk that ends a streamed answer
// (finish_reason "stop", an empty delta).
const FinishChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

// NewRawStream starts a server that answers every request with one SSE
// stream (Content-Type text/event-stream) of the given event payloads in
// order, each sent as "data: " + payload + "\n\n" exactly as given, valid
// JSON or not; pass "[DONE]" for the end marker. The server is closed when
// the test ends. It records nothing: use NewServer where the requests
// matter.
func NewRawStream(t testing.TB, payloads ...string) *httptest.Server {
	t.Helper()
	payloads = append([]string(nil), payloads...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range payloads {
			_, _ = io.WriteString(w, "data: "+p+"\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
