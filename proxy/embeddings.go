package proxy

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strconv"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
)

type embeddingBody struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32s
}

type embedGatewayInfo struct {
	RequestID   string   `json:"request_id"`
	CallID      string   `json:"call_id"`
	Scope       string   `json:"scope"`
	Source      string   `json:"source"`
	Provider    string   `json:"provider,omitempty"`
	LatencyMS   float64  `json:"latency_ms"`
	UsageSource string   `json:"usage_source,omitempty"`
	Cost        *float64 `json:"cost,omitempty"`
	Batches     int      `json:"batches"`
}

// handleEmbeddings serves POST /v1/embeddings through the embeddings
// client of the routed scope (inputs beyond the scope's batch size are
// split and governed batch by batch). An input array longer than the
// scope's MAX_INPUTS is refused while it is parsed (400 too_many_inputs);
// the client refuses inputs over MAX_INPUT_BYTES (400 input_too_large)
// before any upstream call.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
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
	req, err := parseEmbed(body)
	if err != nil {
		s.fail(w, ri, mapError(err, false))
		return
	}
	ri.model = req.model
	scope, client, ok := g.embedRoute(req.model)
	if !ok {
		s.fail(w, ri, modelNotFound(req.model))
		return
	}
	ri.scope = scope
	if err := req.decodeInput(maxInputs(client)); err != nil {
		s.fail(w, ri, mapError(err, false))
		return
	}
	ctx, done := s.callContext(r)
	defer done()
	ctx = s.withBudget(ctx)
	resp, err := client.Embed(ctx, req.input, append(s.budgetOptions(ri), polygateway.WithParams(req.params), polygateway.WithSessionID(ri.id))...)
	if err != nil {
		s.fail(w, ri, s.callError(r, err))
		return
	}
	ri.source = resp.SourceName
	data := make([]embeddingBody, len(resp.Vectors))
	for i, v := range resp.Vectors {
		data[i] = embeddingBody{Object: "embedding", Index: i, Embedding: v}
		if req.base64 {
			data[i].Embedding = base64Floats(v)
		}
	}
	h := w.Header()
	h.Set("X-PolyGateway-Source", resp.SourceName)
	h.Set("X-PolyGateway-Cache", "miss")
	h.Set("X-PolyGateway-Degraded", "false")
	h.Set("X-PolyGateway-Batches", strconv.Itoa(len(resp.BatchCallIDs)))
	s.writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": resp.Model,
		"usage": map[string]int{"prompt_tokens": resp.PromptTokens, "total_tokens": resp.PromptTokens},
		"gateway": embedGatewayInfo{
			RequestID: ri.id, CallID: resp.CallID, Scope: scope, Source: resp.SourceName, Provider: resp.Provider,
			LatencyMS: ms(resp.Latency), UsageSource: resp.UsageSource, Cost: resp.Cost, Batches: len(resp.BatchCallIDs),
		},
	})
}

// maxInputs is the number of inputs the embedder takes in one call: its
// scope's MAX_INPUTS for an *embed.Client (or anything with its Config
// method), else embed.DefaultMaxInputs.
func maxInputs(e Embedder) int {
	if c, ok := e.(interface{ Config() embed.Config }); ok && c.Config().MaxInputs > 0 {
		return c.Config().MaxInputs
	}
	return embed.DefaultMaxInputs
}

// base64Floats encodes v as OpenAI's base64 embedding format: the
// little-endian bytes of each float32.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}
