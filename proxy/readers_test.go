package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/polygateway/polygateway/internal/testkit"
)

// bodyServer is a server with nothing but its body bounds: MaxBodyBytes
// and the budget.
func bodyServer() *Server {
	s := &Server{cfg: Config{MaxBodyBytes: 8 << 20}}
	s.bodies.max = 64 << 20
	return s
}

// readVia reads a request body from r as the server reads one (readBody),
// with its length declared (length ≥ 0) or not; the share is given back.
func readVia(r io.Reader, length int64) ([]byte, *apiError) {
	s := bodyServer()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", r)
	req.ContentLength = length
	body, release, aerr := s.readBody(httptest.NewRecorder(), req)
	if aerr == nil {
		release()
	}
	if used := s.bodies.used.Load(); used != 0 {
		panic("readBody left " + strconv.FormatInt(used, 10) + " bytes reserved")
	}
	return body, aerr
}

// chatOutcome is what a test compares of a parsed chat request.
type chatOutcome struct {
	req  *chatRequest
	code string
}

func chatOf(body []byte, aerr *apiError) chatOutcome {
	if aerr != nil {
		return chatOutcome{code: aerr.code}
	}
	req, err := parseChat(body)
	if err != nil {
		return chatOutcome{code: mapError(err, false).code}
	}
	return chatOutcome{req: req}
}

func sameChat(a, b chatOutcome) bool {
	if a.code != b.code || (a.req == nil) != (b.req == nil) {
		return false
	}
	if a.req == nil {
		return true
	}
	x, y := *a.req, *b.req
	if !reflect.DeepEqual(x.messages, y.messages) || len(x.params) != len(y.params) {
		return false
	}
	for k, v := range x.params {
		if !bytes.Equal(v.(json.RawMessage), y.params[k].(json.RawMessage)) {
			return false
		}
	}
	x.messages, y.messages, x.params, y.params = nil, nil, nil, nil
	return reflect.DeepEqual(x, y)
}

// requestBodies are the bodies every request reader test reads.
var requestBodies = map[string]string{
	"chat": `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"messages":[` +
		`{"role":"system","content":"be brief \u00e9\ud83d\ude00 \"q\"\n"},` +
		`{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AQID","detail":"low"}}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"42"}],"fallbacks":["other"],"extra_body":{"top_k":5,"fallbacks":["b"]}}`,
	"chat duplicates": `{"model":"a","model":"b","messages":[{"role":"user","content":"A","content":"B"}],"messages":[{"role":"user","content":"last"}],"n":1}`,
	"embeddings":      `{"model":"text-embedding-3-small","input":["a","b\u00e9","\ud83d\ude00"],"encoding_format":"base64","dimensions":256,"user":"u"}`,
}

// embedOf reads an embeddings request as the server does (parse, then the
// input under a bound).
func embedOf(body []byte, aerr *apiError) (*embedRequest, string) {
	if aerr != nil {
		return nil, aerr.code
	}
	req, err := parseEmbed(body)
	if err == nil {
		err = req.decodeInput(2048)
	}
	if err != nil {
		return nil, mapError(err, false).code
	}
	req.counted = nil
	return req, ""
}

// TestRequestReadersReadTheSameWhateverTheReads reads chat and embeddings
// request bodies through every kind of read boundary — one byte at a
// time, half reads, data returned with io.EOF, a split at every offset,
// random read sizes — declared or chunked: the request is always the one
// of the body read whole.
func TestRequestReadersReadTheSameWhateverTheReads(t *testing.T) {
	t.Parallel()
	for name, b := range requestBodies {
		body := []byte(b)
		readers := map[string]func() io.Reader{
			"whole":    func() io.Reader { return bytes.NewReader(body) },
			"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) },
			"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(body)) },
			"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) },
			"random":   func() io.Reader { return &testkit.SplitReader{Data: body, Sizes: []byte{3, 250, 17, 0, 99}, Mod: 61} },
		}
		for at := 1; at < len(body); at++ {
			readers["split at "+strconv.Itoa(at)] = func() io.Reader { return &testkit.CutAtReader{B: body, At: at} }
		}
		wantChat := chatOf(body, nil)
		wantEmbed, wantCode := embedOf(body, nil)
		if strings.HasPrefix(name, "chat") && wantChat.req == nil || name == "embeddings" && wantEmbed == nil {
			t.Fatalf("%s: whole body refused: %v%v", name, wantChat.code, wantCode)
		}
		for rname, r := range readers {
			for _, length := range []int64{int64(len(body)), -1} {
				read, aerr := readVia(r(), length)
				if got := chatOf(read, aerr); !sameChat(got, wantChat) {
					t.Fatalf("%s, %s reads, length %d: chat %+v, read whole %+v", name, rname, length, got, wantChat)
				}
				if got, code := embedOf(read, aerr); code != wantCode || !reflect.DeepEqual(got, wantEmbed) {
					t.Fatalf("%s, %s reads, length %d: embeddings %+v %q, read whole %+v %q", name, rname, length, got, code, wantEmbed, wantCode)
				}
			}
		}
	}
}

// TestARequestBodyCutByAReadErrorIsRefused: a body whose read fails at
// any offset (a reset, a timeout) is refused with 400 invalid_body, and
// nothing stays reserved.
func TestARequestBodyCutByAReadErrorIsRefused(t *testing.T) {
	t.Parallel()
	body := []byte(requestBodies["chat"])
	for at := 0; at < len(body); at += 7 {
		for _, e := range []error{errors.New("connection reset by peer"), iotest.ErrTimeout} {
			for _, length := range []int64{int64(len(body)), -1} {
				_, aerr := readVia(&testkit.FailAtReader{B: body, At: at, Err: e}, length)
				if aerr == nil || aerr.status != http.StatusBadRequest || aerr.code != "invalid_body" {
					t.Fatalf("cut at %d by %v, length %d: %+v, want 400 invalid_body", at, e, length, aerr)
				}
			}
		}
	}
}

// genRequest makes random chat request bodies: keys given twice, escapes,
// surrogate pairs (and lone halves), invalid UTF-8, numbers in every form,
// members of the wrong kind, names in other cases.
type genRequest struct{ r *rand.Rand }

func (g genRequest) pick(s ...string) string { return s[g.r.IntN(len(s))] }

func (g genRequest) str() string {
	var b strings.Builder
	b.WriteByte('"')
	for range g.r.IntN(5) {
		b.WriteString(g.pick("a", "Hello", " ", "é", "中文", `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00x`,
			`\u0001`, "\xff", "\xc3", "🙂", `\t`, `\u2028`, "<b>&"))
	}
	b.WriteByte('"')
	return b.String()
}

func (g genRequest) value() string {
	return g.pick("null", "true", "false", "0", "-1.5e3", "1e400", "0.1", g.str(), "[]", "{}", `[1,"x",{"a":null}]`, `{"k":[true]}`)
}

func (g genRequest) members(m [][2]string) string {
	g.r.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
	var parts []string
	for _, kv := range m {
		parts = append(parts, strconv.Quote(kv[0])+" : "+kv[1])
		switch g.r.IntN(12) {
		case 0:
			parts = append(parts, strconv.Quote(kv[0])+":"+g.value()) // given twice, of any kind
		case 1:
			parts = append(parts, strconv.Quote(kv[0])+":"+kv[1]) // given twice, the same
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (g genRequest) message() string {
	role := g.pick(`"user"`, `"system"`, `"assistant"`, `"tool"`, `"user"`, `"assistant"`, `"us\u0065r"`, `"robot"`, "null", "5")
	content := g.pick(g.str(), g.str(), g.str(), "null", `[{"type":"text","text":`+g.str()+`}]`, `[{"type":"image_url","image_url":"https://x/y.png"}]`, "5")
	m := [][2]string{{g.pick("role", "Role", "ROLE"), role}, {g.pick("content", "Content"), content}}
	if g.r.IntN(4) == 0 {
		m = append(m, [2]string{"name", g.str()})
	}
	if g.r.IntN(6) == 0 {
		m = append(m, [2]string{"tool_calls", `[{"id":"c","type":"function","function":{"name":"f","arguments":` + g.str() + `}}]`})
	}
	return g.members(m)
}

func (g genRequest) body() string {
	var msgs []string
	for range g.r.IntN(3) + 1 {
		msgs = append(msgs, g.message())
	}
	m := [][2]string{{"messages", "[" + strings.Join(msgs, ",") + "]"}}
	for _, kv := range [][2]string{{"model", g.pick(g.str(), g.str(), "null", "5")}, {"stream", g.pick("true", "false", "null", `"yes"`)},
		{"temperature", g.value()}, {"n", g.pick("1", "1.0", "2", "null")}, {"tools", g.value()}, {"user", g.str()},
		{"stream_options", g.pick(`{"include_usage":true}`, `{"include_usage":false}`, "null", "[]")}} {
		if g.r.IntN(3) == 0 {
			m = append(m, kv)
		}
	}
	return g.members(m)
}

// TestChatRequestReadingMatchesEncodingJSON: random request bodies, read
// in random pieces, mean what encoding/json's reading of the whole body
// means (parseChatStd): refused alike, the same request when accepted.
func TestChatRequestReadingMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	g := genRequest{rand.New(rand.NewPCG(5, 6))}
	accepted := 0
	for range 2000 {
		body := []byte(g.body())
		if !json.Valid(body) {
			t.Fatalf("generated invalid JSON %s", body)
		}
		read, aerr := readVia(&testkit.SplitReader{Data: body, Sizes: []byte{byte(g.r.IntN(256)), byte(g.r.IntN(256))}, Mod: 61}, -1)
		if aerr != nil {
			t.Fatalf("%s: %+v", body, aerr)
		}
		got, gerr := parseChat(read)
		want, werr := parseChatStd(body)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: parseChat error %v, encoding/json reading error %v", body, gerr, werr)
		}
		if gerr != nil {
			continue
		}
		accepted++
		if !reflect.DeepEqual(got.messages, want.messages) || got.model != want.model || got.stream != want.stream || got.includeUsage != want.includeUsage {
			t.Fatalf("%s:\n got %+v %#v\nwant %+v %#v", body, got, got.messages, want, want.messages)
		}
		for k, v := range want.params {
			if !bytes.Equal(got.params[k].(json.RawMessage), v.(json.RawMessage)) {
				t.Fatalf("%s: param %q %s, want %s", body, k, got.params[k], v)
			}
		}
		if len(got.params) != len(want.params) {
			t.Fatalf("%s: params %v, want %v", body, got.params, want.params)
		}
	}
	if accepted < 300 {
		t.Fatalf("only %d of 2000 random bodies accepted: the generator tests too little", accepted)
	}
}
