package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

const benchAnswer = `{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over the lazy dog."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22}}`

// BenchmarkDo compares one non-streaming transport attempt with a raw
// net/http POST of the same body to the same fake upstream (read to the
// end). Compare ns/op and allocs/op of the two sub-benchmarks.
func BenchmarkDo(b *testing.B) {
	body := []byte(benchAnswer)
	srv := newServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request is known; only its end matters
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body) // a failed write shows as an error on the client side
	}))
	call := &core.Call{Messages: []core.Message{core.System("You are terse."), core.User("Say the pangram.")},
		Params: map[string]any{"temperature": 0.2, "max_tokens": 64}}
	src := source(srv, "openai")

	b.Run("raw", func(b *testing.B) {
		hc := &http.Client{Transport: newHTTPTransport(&Config{MaxIdleConnsPerHost: 128, IdleConnTimeout: DefaultIdleConnTimeout}, false)}
		defer hc.CloseIdleConnections()
		reqBody, _ := encodeRequest(nil, src, call, &core.ProviderProfile{})
		url := src.BaseURL + "/chat/completions"
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(reqBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+src.APIKey)
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			if _, err := buf.ReadFrom(resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
	b.Run("transport", func(b *testing.B) {
		c := New(Config{})
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			r, err := c.Do(context.Background(), src, call)
			if err != nil || r.Content == "" {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStream1000 reads a 1,000-chunk stream per op and reports
// chunks/s.
func BenchmarkStream1000(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		if i%2 == 0 {
			sb.WriteString(`data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":"token "},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		} else {
			sb.WriteString(`data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"reasoning_content":"why\u00e9 "},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		}
	}
	sb.WriteString(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	sb.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1000,"total_tokens":1005}}` + "\n\n")
	sb.WriteString("data: [DONE]\n\n")
	payload := []byte(sb.String())
	srv := newServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request is known; only its end matters
		w.Header().Set("Content-Type", "text/event-stream")
		// Written in 4 KiB pieces so the reader sees many reads.
		fl := w.(http.Flusher)
		for p := payload; len(p) > 0; {
			n := min(4096, len(p))
			if _, err := w.Write(p[:n]); err != nil {
				return // the client went away
			}
			fl.Flush()
			p = p[n:]
		}
	}))
	src := source(srv, "deepseek")
	src.TTFTTimeout, src.InterTokenTimeout = 0, 0
	c := New(Config{})
	defer c.Close()
	call := chatCall(true)
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Do(context.Background(), src, call)
		if err != nil || r.CompletionTokens != 1000 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkParseChunk measures decoding one typical chunk and folding it
// into the answer, as a stream does per event.
func BenchmarkParseChunk(b *testing.B) {
	ev := []byte(`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":"token "},"logprobs":null,"finish_reason":null}],"usage":null}`)
	var (
		c   wireChunk
		asm assembler
	)
	p := openAIProfile()
	asm.reset(&p, false, "test-model", nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		if !decodeChunk(ev, &c) {
			b.Fatal("parse")
		}
		if _, err := asm.apply(&c); err != nil {
			b.Fatal(err)
		}
		if asm.content.Len() > 1<<20 {
			asm.reset(&p, false, "test-model", nil)
		}
	}
}

// BenchmarkDoVsRaw interleaves a raw net/http call and a transport attempt
// against the same fake upstream and reports their time ratio
// ("ratio" = transport / raw; the design budget is ≤ 1.15 for the whole
// governed call).
func BenchmarkDoVsRaw(b *testing.B) {
	body := []byte(benchAnswer)
	srv := newServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request is known; only its end matters
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body) // a failed write shows as an error on the client side
	}))
	call := &core.Call{Messages: []core.Message{core.System("You are terse."), core.User("Say the pangram.")},
		Params: map[string]any{"temperature": 0.2, "max_tokens": 64}}
	src := source(srv, "openai")
	hc := &http.Client{Transport: newHTTPTransport(&Config{MaxIdleConnsPerHost: 128, IdleConnTimeout: DefaultIdleConnTimeout}, false)}
	defer hc.CloseIdleConnections()
	reqBody, _ := encodeRequest(nil, src, call, &core.ProviderProfile{})
	url := src.BaseURL + "/chat/completions"
	c := New(Config{})
	defer c.Close()
	var buf bytes.Buffer
	var rawT, ourT time.Duration
	for b.Loop() {
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(reqBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+src.APIKey)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		t1 := time.Now()
		if _, err := c.Do(context.Background(), src, call); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		rawT += t1.Sub(t0)
		ourT += t2.Sub(t1)
	}
	b.ReportMetric(float64(ourT)/float64(rawT), "ratio")
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(ourT.Nanoseconds())/float64(b.N), "transport-ns/op")
}

// BenchmarkEncodeRequest encodes BenchmarkDo's request body (and one with
// content parts, a tool call and extra body) into a reused buffer after
// the endpoint's opening, as each attempt does.
func BenchmarkEncodeRequest(b *testing.B) {
	small := &core.Call{Messages: []core.Message{core.System("You are terse."), core.User("Say the pangram.")},
		Params: map[string]any{"temperature": 0.2, "max_tokens": 64}}
	rich := &core.Call{Stream: true, Params: map[string]any{"temperature": 0.7, "top_p": 0.9, "max_tokens": 512, "stop": []string{"END"}},
		Messages: []core.Message{
			core.System("You are a careful assistant. Answer in the language of the question."),
			core.UserParts(core.TextPart("What is in this picture? Describe it in \"detail\"."), core.ImageURLPart("https://example.com/cat.png")),
			{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"cat breeds"}`}}},
			{Role: core.RoleTool, ToolCallID: "call_1", Content: "Maine Coon, Siamese, Persian"},
		}}
	src := &core.SourceConfig{Name: "s_1", Provider: "openai", Model: "test-model",
		ExtraBody: map[string]any{"seed": json.Number("7"), "user": "bench"}}
	prof := ProfileFor(DefaultProfiles(), "openai")
	head := modelHead(src.Model) // an endpoint's, made once
	for name, call := range map[string]*core.Call{"small": small, "rich": rich} {
		b.Run(name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = encodeRequestAfter(buf[:0], head, src, call, &prof); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Inputs of the decoder comparisons: a streaming chunk (as BenchmarkParseChunk
// and BenchmarkStream1000 send), a non-streaming answer (BenchmarkDo's) and
// an error body.
var (
	benchChunk    = []byte(`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":"token "},"logprobs":null,"finish_reason":null}],"usage":null}`)
	benchReason   = []byte(`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"reasoning_content":"why\u00e9 "},"logprobs":null,"finish_reason":null}],"usage":null}`)
	benchErrBody  = []byte(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29980, Requested 120.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	decoderInputs = []struct {
		name string
		in   []byte
	}{{"chunk", benchChunk}, {"reasoning_chunk", benchReason}, {"answer", []byte(benchAnswer)}}
)

// ejChunk is a chunk or answer as a plain encoding/json client reads it.
type ejChunk struct {
	Model   string          `json:"model"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
		Message *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// BenchmarkDecoders compares the transport's reading of a chunk (decodeChunk,
// then the assembler's apply, as a stream does per event) and of an error
// body with a plain encoding/json client's reading of the same input.
func BenchmarkDecoders(b *testing.B) {
	p := openAIProfile()
	for _, tc := range decoderInputs {
		b.Run(tc.name+"/transport", func(b *testing.B) {
			var (
				c   wireChunk
				asm assembler
			)
			asm.reset(&p, false, "test-model", nil)
			b.ReportAllocs()
			for b.Loop() {
				if !decodeChunk(tc.in, &c) {
					b.Fatal("parse")
				}
				if _, err := asm.apply(&c); err != nil {
					b.Fatal(err)
				}
				if asm.content.Len()+asm.thinking.Len() > 1<<16 {
					asm.reset(&p, false, "test-model", nil)
				}
			}
		})
		b.Run(tc.name+"/plain_client", func(b *testing.B) {
			var content, thinking []byte
			b.ReportAllocs()
			for b.Loop() {
				var c ejChunk
				if err := json.Unmarshal(tc.in, &c); err != nil {
					b.Fatal(err)
				}
				for _, ch := range c.Choices {
					d := ch.Delta
					if d == nil {
						d = ch.Message
					}
					if d != nil && d.Content != nil {
						content = append(content, *d.Content...)
					}
					if d != nil && d.ReasoningContent != nil {
						thinking = append(thinking, *d.ReasoningContent...)
					}
				}
				if len(content) > 1<<16 {
					content, thinking = content[:0], thinking[:0]
				}
			}
		})
	}
	b.Run("error_envelope/transport", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if e := parseEnvelope(benchErrBody); e.code == "" {
				b.Fatal("no code")
			}
		}
	})
	b.Run("error_envelope/plain_client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e struct {
				Error struct {
					Code    json.RawMessage `json:"code"`
					Type    *string         `json:"type"`
					Message string          `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(benchErrBody, &e); err != nil || len(e.Error.Code) == 0 {
				b.Fatal(err)
			}
		}
	})
}
