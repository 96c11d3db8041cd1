package polygatewaytest

import (
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultEmbeddingDim is the length of the vectors the embeddings endpoint
// returns unless WithEmbeddingDim or the request's "dimensions" says
// otherwise.
const DefaultEmbeddingDim = 16

// MaxEmbeddingDim is the largest vector length the embeddings endpoint
// accepts.
const MaxEmbeddingDim = 8192

// Bounds of one embeddings request.
const (
	// MaxEmbeddingInputs is the largest number of texts one embeddings
	// request may carry (OpenAI's own limit).
	MaxEmbeddingInputs = 2048
	// maxEmbeddingValues bounds inputs × dimensions of one answer.
	maxEmbeddingValues = 1 << 22
)

// embedRequest is the part of an embeddings request the server looks at,
// decoded once per request.
type embedRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`

	texts  []string // one per input; token arrays as their ids joined by ","
	tokens []int    // usage per input
	dim    int
	base64 bool
}

// parse decodes body into e; it returns the body of a 400 answer, or "".
func (e *embedRequest) parse(body []byte, defaultDim int) string {
	if err := json.Unmarshal(body, e); err != nil {
		return bodyBadJSON
	}
	switch e.EncodingFormat {
	case "", "float":
	case "base64":
		e.base64 = true
	default:
		return invalidRequest("'encoding_format' must be one of float, base64", "encoding_format")
	}
	e.dim = defaultDim
	if e.Dimensions != nil {
		if *e.Dimensions < 1 || *e.Dimensions > MaxEmbeddingDim {
			return invalidRequest("'dimensions' must be between 1 and "+strconv.Itoa(MaxEmbeddingDim), "dimensions")
		}
		e.dim = *e.Dimensions
	}
	if msg := e.inputs(); msg != "" {
		return invalidRequest(msg, "input")
	}
	if len(e.texts)*e.dim > maxEmbeddingValues {
		return invalidRequest("too many inputs for this many dimensions", "input")
	}
	return ""
}

// inputs fills texts and tokens from Input: a string, an array of strings,
// an array of token ids, or an array of arrays of token ids.
func (e *embedRequest) inputs() string {
	raw := e.Input
	if len(raw) == 0 || string(raw) == "null" {
		return "'input' is a required property"
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return e.add(one)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return "'input' must be a non-empty string or array"
	}
	if len(list) > MaxEmbeddingInputs {
		return "'input' must have at most " + strconv.Itoa(MaxEmbeddingInputs) + " items"
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return e.addTokens(ids)
	}
	for _, item := range list {
		var s string
		if json.Unmarshal(item, &s) == nil {
			if msg := e.add(s); msg != "" {
				return msg
			}
			continue
		}
		if json.Unmarshal(item, &ids) != nil || len(ids) == 0 {
			return "'input' items must be strings or arrays of token ids"
		}
		if msg := e.addTokens(ids); msg != "" {
			return msg
		}
	}
	return ""
}

func (e *embedRequest) add(s string) string {
	if s == "" {
		return "'input' must not contain empty strings"
	}
	e.texts = append(e.texts, s)
	e.tokens = append(e.tokens, max(len(strings.Fields(s)), 1))
	return ""
}

func (e *embedRequest) addTokens(ids []int) string {
	if len(ids) == 0 {
		return "'input' must not contain empty token arrays"
	}
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
	}
	e.texts = append(e.texts, b.String())
	e.tokens = append(e.tokens, len(ids))
	return ""
}

// invalidRequest returns an OpenAI invalid_request_error envelope.
func invalidRequest(msg, param string) string {
	type apiError struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   string  `json:"param"`
		Code    *string `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error apiError `json:"error"`
	}{apiError{Message: msg, Type: "invalid_request_error", Param: param}})
	return string(b)
}

// EmbeddingFor returns the vector the embeddings endpoint answers for text
// with dim dimensions: a deterministic function of (text, dim) with unit
// L2 norm, so equal texts get equal vectors on every server and run, and
// different texts almost surely different ones. An input given as token
// ids is embedded as the text of its decimal ids joined by commas
// ("1,2,3"). dim < 1 returns nil.
func EmbeddingFor(text string, dim int) []float32 {
	if dim < 1 {
		return nil
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	x := h.Sum64()
	vals := make([]float64, dim)
	var sum float64
	for i := range vals {
		x += 0x9e3779b97f4a7c15 // splitmix64
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		vals[i] = float64(z>>11)/(1<<53)*2 - 1
		sum += vals[i] * vals[i]
	}
	out := make([]float32, dim)
	if sum == 0 {
		out[0] = 1
		return out
	}
	norm := math.Sqrt(sum)
	for i, v := range vals {
		out[i] = float32(v / norm)
	}
	return out
}

// embeddings writes the answer to an embeddings request.
func (a *answerer) embeddings(e *embedRequest, model string) {
	b := a.b
	wait := b.FirstTokenDelay
	if b.fault == faultStall {
		wait += b.stall
	}
	if !a.sleep(wait, false) {
		abort()
	}
	var body []byte
	switch b.fault {
	case faultMalformed, faultTruncated:
		body = bodyEmbedMalformed
	case faultErrorEvent:
		body = bodyErrorEvent
	default:
		body = renderEmbeddings(e, model, b)
	}
	a.writeJSON(body, strconv.Itoa(len(body)))
}

var bodyEmbedMalformed = []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.125,`)

// embeddingEntry and embeddingsAnswer are the answer to an embeddings
// request as encoding/json writes it. A base64 vector is the []byte of its
// little-endian float32 values, which encoding/json writes in base64.
type embeddingEntry struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingsAnswer struct {
	Object string           `json:"object"`
	Data   []embeddingEntry `json:"data"`
	Model  string           `json:"model"`
	Usage  any              `json:"usage,omitempty"`
}

type embeddingsUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// renderEmbeddings builds the JSON answer to e.
func renderEmbeddings(e *embedRequest, model string, b *Behavior) []byte {
	ans := embeddingsAnswer{Object: "list", Data: make([]embeddingEntry, len(e.texts)), Model: model}
	prompt := 0
	for i, text := range e.texts {
		prompt += e.tokens[i]
		v := EmbeddingFor(text, e.dim)
		ans.Data[i] = embeddingEntry{Object: "embedding", Index: i, Embedding: v}
		if e.base64 {
			raw := make([]byte, 0, 4*len(v))
			for _, f := range v {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			ans.Data[i].Embedding = raw
		}
	}
	switch {
	case b.NoUsage:
	case b.Usage != "":
		ans.Usage = json.RawMessage(b.Usage)
	default:
		if b.PromptTokens != 0 {
			prompt = b.promptTokens()
		}
		ans.Usage = &embeddingsUsage{PromptTokens: prompt, TotalTokens: prompt}
	}
	out, _ := json.Marshal(ans) // plain strings, numbers and bytes always marshal
	return out
}

// models answers GET /v1/models and GET /v1/models/{id}.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	if r.Method != http.MethodGet {
		s.logAttempt(r, arrival, nil, "", false, KindNone, http.StatusMethodNotAllowed)
		writeStatic(w, http.StatusMethodNotAllowed, bodyNotFound)
		return
	}
	created := strconv.FormatInt(s.start.Unix(), 10)
	object := func(out []byte, id string) []byte {
		out = append(out, `{"id":`...)
		out = append(out, quote(id)...)
		out = append(out, `,"object":"model","created":`...)
		out = append(out, created...)
		return append(out, `,"owned_by":"polygatewaytest"}`...)
	}
	if id, ok := strings.CutPrefix(r.URL.Path, modelsPath+"/"); ok {
		for _, n := range s.cfg.names {
			if n == id {
				s.logAttempt(r, arrival, nil, id, false, KindNone, http.StatusOK)
				writeStatic(w, http.StatusOK, string(object(nil, id)))
				return
			}
		}
		s.logAttempt(r, arrival, nil, id, false, KindNone, http.StatusNotFound)
		writeStatic(w, http.StatusNotFound, `{"error":{"message":"The model `+strings.Trim(string(quote(id)), `"`)+
			` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
		return
	}
	out := []byte(`{"object":"list","data":[`)
	for i, n := range s.cfg.names {
		if i > 0 {
			out = append(out, ',')
		}
		out = object(out, n)
	}
	out = append(out, "]}"...)
	s.logAttempt(r, arrival, nil, "", false, KindNone, http.StatusOK)
	writeStatic(w, http.StatusOK, string(out))
}
