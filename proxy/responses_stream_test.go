package proxy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// sseEvent is one event of a Responses stream as a client parses it.
type sseEvent struct {
	name string
	data map[string]any
}

// parseResponseEvents parses a Responses stream and checks every event's
// framing: an event: line equal to its type, a data: line of JSON, and the
// next sequence number.
func parseResponseEvents(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		lines := strings.Split(block, "\n")
		name, ok1 := strings.CutPrefix(lines[0], "event: ")
		data, ok2 := "", len(lines) == 2
		if ok2 {
			data, ok2 = strings.CutPrefix(lines[1], "data: ")
		}
		if !ok1 || !ok2 {
			t.Fatalf("event %q is not an event: line and a data: line", block)
		}
		ev := sseEvent{name: name}
		if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
			t.Fatalf("event %q: %v", block, err)
		}
		if ev.data["type"] != name || ev.data["sequence_number"] != float64(len(out)) {
			t.Fatalf("event %d %q: type %v, sequence_number %v", len(out), name, ev.data["type"], ev.data["sequence_number"])
		}
		out = append(out, ev)
	}
	return out
}

// streamView is what a client accumulates from a Responses stream.
type streamView struct {
	names     []string
	text      string           // output_text deltas, joined
	reasoning string           // reasoning summary deltas, joined
	args      map[int]string   // function call argument deltas by output index
	items     []map[string]any // output items as output_item.done left them
	final     map[string]any   // the response of the last event that carries one
}

// accumulate replays evs as the SDKs' accumulators do, and fails on an
// event that refers to an item or part that was not added, or a .done
// whose text is not its deltas.
func accumulate(t *testing.T, evs []sseEvent) *streamView {
	t.Helper()
	v := &streamView{args: map[int]string{}}
	texts := map[string]string{}
	idOf := map[int]string{}
	for i, ev := range evs {
		v.names = append(v.names, ev.name)
		d := ev.data
		idx := -1
		if f, ok := d["output_index"].(float64); ok {
			idx = int(f)
		}
		if id, ok := d["item_id"].(string); ok && idOf[idx] != id {
			t.Fatalf("event %d %s: item_id %q at output_index %d, which holds %q", i, ev.name, id, idx, idOf[idx])
		}
		switch ev.name {
		case "response.output_item.added":
			if idx != len(v.items) {
				t.Fatalf("event %d: item added at output_index %d, want %d", i, idx, len(v.items))
			}
			item := d["item"].(map[string]any)
			idOf[idx] = item["id"].(string)
			v.items = append(v.items, item)
		case "response.output_item.done":
			v.items[idx] = d["item"].(map[string]any)
		case "response.output_text.delta":
			v.text += d["delta"].(string)
			texts[idOf[idx]] += d["delta"].(string)
		case "response.reasoning_summary_text.delta":
			v.reasoning += d["delta"].(string)
			texts[idOf[idx]] += d["delta"].(string)
		case "response.output_text.done", "response.reasoning_summary_text.done":
			if d["text"] != texts[idOf[idx]] {
				t.Fatalf("event %d %s: text %q, deltas %q", i, ev.name, d["text"], texts[idOf[idx]])
			}
		case "response.function_call_arguments.delta":
			v.args[idx] += d["delta"].(string)
		case "response.function_call_arguments.done":
			if d["arguments"] != v.args[idx] {
				t.Fatalf("event %d: arguments %q, deltas %q", i, d["arguments"], v.args[idx])
			}
		}
		if r, ok := d["response"].(map[string]any); ok {
			v.final = r
		}
	}
	return v
}

// recorderOut is an sseWriter on a recorder.
func recorderOut() (*httptest.ResponseRecorder, *sseWriter) {
	rec := httptest.NewRecorder()
	return rec, &sseWriter{w: rec, rc: http.NewResponseController(rec), timeout: time.Second}
}

// Each answer kind is written as the event sequence the SDKs expect.
func TestResponsesStreamEventSequences(t *testing.T) {
	t.Parallel()
	type piece struct{ content, thinking string }
	tool := polygateway.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	head := []string{"response.created", "response.in_progress"}
	msg := func(deltas int) []string {
		out := []string{"response.output_item.added", "response.content_part.added"}
		for range deltas {
			out = append(out, "response.output_text.delta")
		}
		return append(out, "response.output_text.done", "response.content_part.done", "response.output_item.done")
	}
	rs := func(deltas int) []string {
		out := []string{"response.output_item.added", "response.reasoning_summary_part.added"}
		for range deltas {
			out = append(out, "response.reasoning_summary_text.delta")
		}
		return append(out, "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done")
	}
	fc := []string{"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done"}
	cat := slices.Concat[[]string]
	for _, tc := range []struct {
		name   string
		pieces []piece
		resp   polygateway.LLMResponse
		fail   bool
		want   []string
	}{
		{"text", []piece{{"Hel", ""}, {"lo", ""}}, polygateway.LLMResponse{Content: "Hello"},
			false, cat(head, msg(2), []string{"response.completed"})},
		{"reasoning then text", []piece{{"", "hm"}, {"", "m"}, {"ok", ""}}, polygateway.LLMResponse{Content: "ok", Thinking: "hmm"},
			false, cat(head, rs(2), msg(1), []string{"response.completed"})},
		{"a delta with both", []piece{{"ok", "hm"}}, polygateway.LLMResponse{Content: "ok", Thinking: "hm"},
			false, cat(head, rs(1), msg(1), []string{"response.completed"})},
		{"reasoning after text opens a new item", []piece{{"a", ""}, {"", "b"}, {"c", ""}}, polygateway.LLMResponse{Content: "ac", Thinking: "b"},
			false, cat(head, msg(1), rs(1), msg(1), []string{"response.completed"})},
		{"tool calls only", nil, polygateway.LLMResponse{ToolCalls: []polygateway.ToolCall{tool, tool}},
			false, cat(head, fc, fc, []string{"response.completed"})},
		{"text and a tool call", []piece{{"looking", ""}}, polygateway.LLMResponse{Content: "looking", ToolCalls: []polygateway.ToolCall{tool}},
			false, cat(head, msg(1), fc, []string{"response.completed"})},
		{"an empty answer", []piece{{"", ""}}, polygateway.LLMResponse{},
			false, cat(head, msg(0), []string{"response.completed"})},
		{"stopped at the token limit", []piece{{"abc", ""}}, polygateway.LLMResponse{Content: "abc", FinishReason: "length"},
			false, cat(head, msg(1), []string{"response.incomplete"})},
		{"cut after text", []piece{{"abc", ""}}, polygateway.LLMResponse{},
			true, cat(head, []string{"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.failed", "error"})},
		{"cut before anything", nil, polygateway.LLMResponse{},
			true, cat(head, []string{"response.failed", "error"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans := &responsesAnswer{echo: defaultEcho()}
			st := ans.events("c1", 1700000000)
			rec, out := recorderOut()
			for _, p := range tc.pieces {
				st.delta(out, "m", p.content, p.thinking)
			}
			if tc.fail {
				st.fail(out, &apiError{typ: "upstream_error", code: "stream_interrupted", msg: "cut at http://10.0.0.1:8000/v1"})
			} else {
				resp := tc.resp
				resp.CallID, resp.PromptTokens, resp.CompletionTokens = "c1", 3, 4
				st.end(out, "m", &resp, &gatewayInfo{Scope: "LLM"})
			}
			evs := parseResponseEvents(t, rec.Body.String())
			v := accumulate(t, evs)
			if !reflect.DeepEqual(v.names, tc.want) {
				t.Fatalf("events\n got %v\nwant %v", v.names, tc.want)
			}
			last := evs[len(evs)-1].data
			if tc.fail {
				checkFailed(t, evs)
				return
			}
			checkFinal(t, v, last, &tc.resp)
		})
	}
}

// checkFailed checks the end of a failed stream: response.failed with the
// error, then an error event carrying it at the top level and as an error
// object, addresses scrubbed.
func checkFailed(t *testing.T, evs []sseEvent) {
	t.Helper()
	failed, errEv := evs[len(evs)-2].data, evs[len(evs)-1].data
	r := failed["response"].(map[string]any)
	e := r["error"].(map[string]any)
	if r["status"] != "failed" || e["code"] != "stream_interrupted" || r["usage"] != nil {
		t.Fatalf("response.failed %v", failed)
	}
	obj := errEv["error"].(map[string]any)
	if errEv["code"] != "stream_interrupted" || obj["code"] != "stream_interrupted" || obj["type"] != "upstream_error" || errEv["message"] != obj["message"] {
		t.Fatalf("error event %v", errEv)
	}
	if strings.Contains(fmt.Sprint(evs), "10.0.0.1") {
		t.Fatal("an address reached the client")
	}
	for _, it := range r["output"].([]any) {
		if st := it.(map[string]any)["status"]; st != nil && st != "incomplete" {
			t.Fatalf("an item of a failed response is %v", st)
		}
	}
}

// checkFinal checks the response of the last event of a successful stream
// against the items the stream built and the answer.
func checkFinal(t *testing.T, v *streamView, last map[string]any, resp *polygateway.LLMResponse) {
	t.Helper()
	r := last["response"].(map[string]any)
	wantStatus, _ := responseStatus(resp)
	if r["status"] != wantStatus || r["output_text"] != v.text || v.text != resp.Content || v.reasoning != resp.Thinking {
		t.Fatalf("final response %v; deltas %q/%q", r, v.text, v.reasoning)
	}
	out := r["output"].([]any)
	if len(out) != len(v.items) {
		t.Fatalf("final output has %d items, the stream built %d", len(out), len(v.items))
	}
	for i := range out {
		if !reflect.DeepEqual(out[i], v.items[i]) {
			t.Fatalf("final output[%d] = %v, the stream's item %v", i, out[i], v.items[i])
		}
	}
	u := r["usage"].(map[string]any)
	if u["input_tokens"] != 3.0 || u["output_tokens"] != 4.0 || u["total_tokens"] != 7.0 || r["gateway"] == nil {
		t.Fatalf("final usage %v, gateway %v", u, r["gateway"])
	}
	if wantStatus == "incomplete" && r["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Fatalf("incomplete_details %v", r["incomplete_details"])
	}
}

// A non-streamed answer is a response object: each answer kind gives its
// output items, status and usage.
func TestResponseObjectOfEachAnswerKind(t *testing.T) {
	t.Parallel()
	tool := polygateway.ToolCall{ID: "call_1", Name: "f", Arguments: "{}"}
	anon := polygateway.ToolCall{Name: "g", Arguments: `{"a":1}`}
	for _, tc := range []struct {
		name   string
		resp   polygateway.LLMResponse
		status string
		output string
	}{
		{"text", polygateway.LLMResponse{Content: "hi"}, "completed",
			`[{"type":"message","id":"msg_c1_0","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[],"logprobs":[]}]}]`},
		{"reasoning and text", polygateway.LLMResponse{Content: "hi", Thinking: "hm"}, "completed",
			`[{"type":"reasoning","id":"rs_c1_0","summary":[{"type":"summary_text","text":"hm"}]},{"type":"message","id":"msg_c1_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[],"logprobs":[]}]}]`},
		{"tool calls", polygateway.LLMResponse{ToolCalls: []polygateway.ToolCall{tool, anon}, FinishReason: "tool_calls"}, "completed",
			`[{"type":"function_call","id":"fc_c1_0","call_id":"call_1","name":"f","arguments":"{}","status":"completed"},{"type":"function_call","id":"fc_c1_1","call_id":"call_c1_1","name":"g","arguments":"{\"a\":1}","status":"completed"}]`},
		{"text and a tool call", polygateway.LLMResponse{Content: "x", ToolCalls: []polygateway.ToolCall{tool}}, "completed",
			`[{"type":"message","id":"msg_c1_0","status":"completed","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[],"logprobs":[]}]},{"type":"function_call","id":"fc_c1_1","call_id":"call_1","name":"f","arguments":"{}","status":"completed"}]`},
		{"empty", polygateway.LLMResponse{}, "completed",
			`[{"type":"message","id":"msg_c1_0","status":"completed","role":"assistant","content":[{"type":"output_text","text":"","annotations":[],"logprobs":[]}]}]`},
		{"token limit", polygateway.LLMResponse{Content: "ab", FinishReason: "length"}, "incomplete",
			`[{"type":"message","id":"msg_c1_0","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"ab","annotations":[],"logprobs":[]}]}]`},
		{"content filter", polygateway.LLMResponse{Content: "", FinishReason: "content_filter"}, "incomplete",
			`[{"type":"message","id":"msg_c1_0","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"","annotations":[],"logprobs":[]}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.resp
			resp.CallID, resp.Model, resp.PromptTokens, resp.CompletionTokens, resp.CachedPromptTokens = "c1", "m", 10, 5, 4
			ans := &responsesAnswer{echo: defaultEcho()}
			b, err := ans.body(&reqInfo{id: "r1", scope: "LLM", route: "gpt-4o"}, &resp, 1700000000)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				ID, Object, Status, Model, OutputText string
				CreatedAt                             int64 `json:"created_at"`
				Output                                json.RawMessage
				Incomplete                            *incompleteDetails `json:"incomplete_details"`
				Usage                                 json.RawMessage
				Gateway                               *gatewayInfo
				Error                                 json.RawMessage
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.ID != "resp_c1" || got.Object != "response" || got.CreatedAt != 1700000000 || got.Model != "m" || got.Status != tc.status || string(got.Error) != "null" {
				t.Fatalf("response %s", b)
			}
			if string(got.Output) != tc.output {
				t.Fatalf("output\n got %s\nwant %s", got.Output, tc.output)
			}
			if want := `{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":5,"total_tokens":15}`; string(got.Usage) != want {
				t.Fatalf("usage %s", got.Usage)
			}
			if (got.Incomplete != nil) != (tc.status == "incomplete") || got.Gateway == nil || got.Gateway.Scope != "LLM" || got.Gateway.CallID != "c1" {
				t.Fatalf("incomplete_details %v, gateway %+v", got.Incomplete, got.Gateway)
			}
			var raw map[string]any
			_ = json.Unmarshal(b, &raw)
			if raw["output_text"] != resp.Content {
				t.Fatalf("output_text %v, want %q", raw["output_text"], resp.Content)
			}
		})
	}
}

// randomAnswer is an answer of random text, reasoning and tool calls, and
// the deltas a stream delivers it in: the reasoning first, then the text,
// each split at random byte offsets (runes may be split, as upstream
// chunks never split them, so they stay whole here).
func randomAnswer(rng *rand.Rand) (*polygateway.LLMResponse, [][2]string) {
	words := []string{"tok", " ", "é", "🌧", "\n", `"`, "<", "abc", "\\", "data: ", "\n\n"}
	text := func(max int) string {
		var b strings.Builder
		for range rng.IntN(max + 1) {
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	resp := &polygateway.LLMResponse{Content: text(12), Thinking: text(6)}
	if rng.IntN(3) == 0 {
		resp.Thinking = ""
	}
	for i := range rng.IntN(3) {
		resp.ToolCalls = append(resp.ToolCalls, polygateway.ToolCall{Index: i, ID: fmt.Sprintf("call_%d", i), Name: "f", Arguments: `{"q":"` + text(3) + `"}`})
	}
	if rng.IntN(8) == 0 {
		resp.FinishReason = "length"
	}
	var deltas [][2]string
	split := func(s string, thinking bool) {
		runes := []rune(s)
		for len(runes) > 0 {
			n := 1 + rng.IntN(len(runes))
			d := [2]string{string(runes[:n]), ""}
			if thinking {
				d = [2]string{"", d[0]}
			}
			deltas = append(deltas, d)
			runes = runes[n:]
		}
	}
	split(resp.Thinking, true)
	split(resp.Content, false)
	return resp, deltas
}

// Property: for random answers (text, reasoning, tool calls) split into
// random deltas, through the stream sink under either commit policy, the
// output_text deltas joined are the non-streamed answer's output_text, the
// final response's output is the non-streamed answer's output, and a
// client accumulating the events gets the same items.
func TestResponsesStreamTextEqualsTheNonStreamedAnswer(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 400 {
		resp, deltas := randomAnswer(rng)
		resp.CallID, resp.Model, resp.SourceName = "c1", "primary-model", "primary_1"
		commit := []string{CommitFirstToken, CommitBuffer}[i%2]
		s := &Server{cfg: Config{WriteTimeout: time.Second, StreamCommit: commit}}
		s.bodies.max = 1 << 30 // a held delta's place is taken from it (buffer)
		ri := &reqInfo{id: "r1", scope: "LLM", route: "gpt-4o"}
		ans := &responsesAnswer{echo: defaultEcho()}
		rec := httptest.NewRecorder()
		sink := s.newStreamSink(rec, ri, "c1", "gpt-4o", "", ans)
		sink.AttemptStarted(core.AttemptEvent{Source: "primary_1", Model: "primary-model"})
		for _, d := range deltas {
			if err := sink.Delta(d[0], d[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := sink.finish(resp, false); err != nil {
			t.Fatalf("answer %d: finish: %v", i, err)
		}
		evs := parseResponseEvents(t, rec.Body.String())
		v := accumulate(t, evs)
		body, err := ans.body(ri, resp, 1)
		if err != nil {
			t.Fatal(err)
		}
		var whole struct {
			OutputText string           `json:"output_text"`
			Output     []map[string]any `json:"output"`
		}
		if err := json.Unmarshal(body, &whole); err != nil {
			t.Fatal(err)
		}
		if v.text != whole.OutputText || v.final["output_text"] != whole.OutputText || v.reasoning != resp.Thinking {
			t.Fatalf("answer %d (%s): stream text %q (final %q), non-stream %q", i, commit, v.text, v.final["output_text"], whole.OutputText)
		}
		final, _ := json.Marshal(v.final["output"])
		items, _ := json.Marshal(v.items)
		want, _ := json.Marshal(whole.Output)
		if string(final) != string(want) || string(items) != string(want) {
			t.Fatalf("answer %d (%s): stream output\n%s\naccumulated\n%s\nnon-stream\n%s", i, commit, final, items, want)
		}
		for j, tc := range resp.ToolCalls {
			if idx := len(whole.Output) - len(resp.ToolCalls) + j; v.args[idx] != tc.Arguments {
				t.Fatalf("answer %d: call %d arguments %q, want %q", i, j, v.args[idx], tc.Arguments)
			}
		}
	}
}
