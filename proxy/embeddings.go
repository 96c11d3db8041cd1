package proxy

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
)

type embeddingBody struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or []byte: little-endian float32s, which encoding/json writes in base64
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
	if req.model == "" {
		s.fail(w, ri, noModel())
		return
	}
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
	opts := append(s.budgetOptions(ri), placeOptions(ri.place)...)
	resp, err := client.Embed(ctx, req.input, append(opts, polygateway.WithParams(req.params), polygateway.WithSessionID(ri.id), polygateway.WithoutPushbackWait())...)
	if err != nil {
		s.fail(w, ri, s.callError(r, err))
		return
	}
	ri.source = resp.SourceName
	ri.queueWait += resp.QueueWait
	h := w.Header()
	h.Set("X-PolyGateway-Source", resp.SourceName)
	h.Set("X-PolyGateway-Cache", "miss")
	h.Set("X-PolyGateway-Degraded", "false")
	h.Set("X-PolyGateway-Batches", strconv.Itoa(len(resp.BatchCallIDs)))
	s.writeEmbeddings(w, resp, req.base64, embedGatewayInfo{
		RequestID: ri.id, CallID: resp.CallID, Scope: scope, Source: resp.SourceName, Provider: resp.Provider,
		LatencyMS: ms(resp.Latency), UsageSource: resp.UsageSource, Cost: resp.Cost, Batches: len(resp.BatchCallIDs),
	})
}

// embeddingsTail is the answer after its data array.
type embeddingsTail struct {
	Gateway embedGatewayInfo `json:"gateway"`
	Model   string           `json:"model"`
	Object  string           `json:"object"`
	Usage   embedUsage       `json:"usage"`
}

type embedUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// embedWriteBuffer is how much of an embeddings answer is buffered before
// it goes to the client.
const embedWriteBuffer = 32 << 10

// writeEmbeddings writes the answer {"data":[…],"gateway":…,"model":…,
// "object":"list","usage":…} (the keys in the order json.Marshal gives a
// map) to the client vector by vector: each data entry is encoded by
// encoding/json and written through a small buffer, so that what the
// answer costs beyond the vectors themselves is one entry and the buffer,
// never the whole answer in one piece. The status is sent before the
// first vector; a client that goes away ends the writing.
func (s *Server) writeEmbeddings(w http.ResponseWriter, resp *embed.Response, b64 bool, gw embedGatewayInfo) {
	tail, err := json.Marshal(embeddingsTail{Gateway: gw, Model: resp.Model, Object: "list",
		Usage: embedUsage{PromptTokens: resp.PromptTokens, TotalTokens: resp.PromptTokens}})
	if err != nil {
		writeAPIError(w, mapError(err, false))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, embedWriteBuffer)
	_, _ = bw.WriteString(`{"data":[`)
	var raw []byte
	for i, v := range resp.Vectors {
		entry := embeddingBody{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			raw = littleEndianFloats(raw[:0], v)
			entry.Embedding = raw
		}
		b, err := json.Marshal(entry)
		if err != nil {
			return
		}
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if _, err := bw.Write(b); err != nil {
			return // the client is gone
		}
	}
	_, _ = bw.WriteString("],")
	_, _ = bw.Write(tail[1:]) // the tail object's members and its closing brace
	_ = bw.Flush()
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

// littleEndianFloats appends the little-endian bytes of each float32 of v
// to b: OpenAI's base64 embedding format before its base64 encoding.
func littleEndianFloats(b []byte, v []float32) []byte {
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}
