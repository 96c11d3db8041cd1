package polygatewaytest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestSplitContent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{"ok", []string{"ok"}},
		{"The capital is Paris.", []string{"The", " capital", " is", " Paris."}},
		{"a  b\nc\t d", []string{"a", "  b", "\nc", "\t d"}},
		{"  lead", []string{"  lead"}},
		{"trail  ", []string{"trail  "}},
		{"a b ", []string{"a", " b "}},
		{"   ", []string{"   "}},
	}
	for _, tc := range cases {
		got := splitContent(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("splitContent(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Join(got, "") != tc.in {
			t.Errorf("splitContent(%q) loses text: %q", tc.in, got)
		}
		if f := len(strings.Fields(tc.in)); f > 0 && len(got) != f {
			t.Errorf("splitContent(%q): %d tokens, %d words", tc.in, len(got), f)
		}
	}
}

func TestContentAndPromptTokensStreamAndPlain(t *testing.T) {
	t.Parallel()
	const text = `Say "hi" <now>, café`
	s := NewServer(t, WithBehavior(OK().WithContent(text).WithPromptTokens(5)))
	resp, body := mustPost(t, s, plainReq)
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if c.Choices[0].Message.Content != text || c.Usage == nil || *c.Usage != (usage{5, 4, 9}) {
		t.Errorf("plain answer %d %s", resp.StatusCode, body)
	}
	sresp, err := post(t, s, usageReq)
	if err != nil {
		t.Fatal(err)
	}
	res := parseStream(t, sresp)
	if res.content.String() != text || res.tokens != 4 || res.usage == nil || *res.usage != (usage{5, 4, 9}) || !res.done {
		t.Errorf("stream %q, %d tokens, usage %+v", res.content.String(), res.tokens, res.usage)
	}
	zero := NewServer(t, WithBehavior(OK().WithPromptTokens(0)))
	_, body = mustPost(t, zero, plainReq)
	if !strings.Contains(string(body), `"prompt_tokens":0,`) {
		t.Errorf("WithPromptTokens(0): %s", body)
	}
}

func TestWithModelScriptsAreIndependentOfTheServerScript(t *testing.T) {
	t.Parallel()
	s := NewServer(t,
		WithScript(BadKey(), OK()),
		WithModel("a", ServerError(500), RateLimited("1"), OK()),
		WithModel("b"))
	req := func(model string) int {
		resp, _ := mustPost(t, s, `{"model":"`+model+`","messages":[]}`)
		return resp.StatusCode
	}
	got := []int{req("a"), req("b"), req("other"), req("a"), req("a"), req("a"), req("other"), req("b")}
	want := []int{500, 200, 401, 429, 200, 200, 200, 200}
	if !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	// A later WithModel for the same model replaces the earlier one.
	r := NewServer(t, WithModel("a", BadKey()), WithModel("a", ContextLength()))
	resp, _ := mustPost(t, r, `{"model":"a","messages":[]}`)
	if resp.StatusCode != 400 {
		t.Errorf("replaced model script: status %d", resp.StatusCode)
	}
}

func TestWithModelComesAfterTheConcurrencyLimitAndTheFlap(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithFlap(1<<40, 1, ServerError(503)), WithModel("a", BadKey()))
	resp, _ := mustPost(t, s, `{"model":"a","messages":[]}`)
	if resp.StatusCode != 503 {
		t.Errorf("status %d during a down window, want the flap's 503", resp.StatusCode)
	}
}

func TestAWithModelOptionGivenToTwoServersStartsEachAtItsFirstBehavior(t *testing.T) {
	t.Parallel()
	opts := []Option{WithModel("a", ServerError(503), OK())}
	for i := range 2 {
		s := NewServer(t, opts...)
		first, _ := mustPost(t, s, `{"model":"a","messages":[]}`)
		second, _ := mustPost(t, s, `{"model":"a","messages":[]}`)
		if first.StatusCode != 503 || second.StatusCode != 200 {
			t.Errorf("server %d: statuses %d, %d, want 503, 200", i, first.StatusCode, second.StatusCode)
		}
	}
}

func TestModelsList(t *testing.T) {
	t.Parallel()
	get := func(s *Server, path string) (int, string) {
		resp, err := s.Client().Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ids := func(body string) []string {
		var l struct {
			Object string `json:"object"`
			Data   []struct {
				ID     string `json:"id"`
				Object string `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &l); err != nil || l.Object != "list" {
			t.Fatalf("models list %s: %v", body, err)
		}
		var out []string
		for _, d := range l.Data {
			out = append(out, d.ID)
		}
		return out
	}
	if code, body := get(NewServer(t), "/models"); code != 200 || !slices.Equal(ids(body), []string{DefaultModel}) {
		t.Errorf("default list %d %s", code, body)
	}
	s := NewServer(t, WithModel("gpt-a", ServerError(503)), WithModels("gpt-b", "gpt-a"), WithModel("gpt-c"))
	if code, body := get(s, "/models"); code != 200 || !slices.Equal(ids(body), []string{"gpt-a", "gpt-b", "gpt-c"}) {
		t.Errorf("list %d %s", code, body)
	}
	if code, body := get(s, "/models/gpt-b"); code != 200 || !strings.Contains(body, `"id":"gpt-b"`) {
		t.Errorf("one model %d %s", code, body)
	}
	if code, body := get(s, "/models/nope"); code != 404 || !strings.Contains(body, "model_not_found") {
		t.Errorf("unknown model %d %s", code, body)
	}
	resp, err := s.Client().Post(s.URL()+"/models", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST /models: %d", resp.StatusCode)
	}
	if s.Requests() != 0 {
		t.Errorf("Requests %d: the models list is not answered by a Behavior", s.Requests())
	}
}

func TestAttemptLogRecordsEveryRequestBounded(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b) // the handler still gets the whole body
	})
	s := NewServer(t, WithAttemptLog(4), WithHandler("/rerank", h), WithScript(ServerError(502), Reset()))
	mustPost(t, s, plainReq) // 502
	if _, err := post(t, s, streamReq); err == nil {
		t.Error("Reset answered")
	}
	resp, err := s.Client().Post(s.URL()+"/rerank", "application/json", strings.NewReader(`{"model":"rr"}`))
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(echo) != `{"model":"rr"}` {
		t.Errorf("handler read %q", echo)
	}
	big := `{"model":"big","messages":[],"pad":"` + strings.Repeat("x", MaxLoggedBody) + `"}`
	if _, err := post(t, s, big); err == nil {
		t.Error("Reset answered")
	}

	got := s.Attempts()
	if len(got) != 4 {
		t.Fatalf("%d attempts, want 4", len(got))
	}
	want := []struct {
		path, model string
		stream      bool
		kind        Kind
		status      int
	}{
		{chatPath, "m-req", false, KindStatus, 502},
		{chatPath, "m-req", true, KindReset, 0},
		{"/v1/rerank", "rr", false, KindNone, 0},
		{chatPath, "big", false, KindReset, 0},
	}
	for i, w := range want {
		a := got[i]
		if a.Seq != i || a.Path != w.path || a.Model != w.model || a.Stream != w.stream || a.Kind != w.kind ||
			a.Status != w.status || a.Method != http.MethodPost {
			t.Errorf("attempt %d = %+v, want %+v", i, a, w)
		}
		if a.Time.IsZero() || (i > 0 && a.Time.Before(got[i-1].Time)) {
			t.Errorf("attempt %d time %v", i, a.Time)
		}
	}
	if got[0].Header.Get("Authorization") != "Bearer sk-test" || string(got[0].Body) != plainReq || got[0].Truncated {
		t.Errorf("first attempt header/body %v %q", got[0].Header, got[0].Body)
	}
	if !got[3].Truncated || len(got[3].Body) != MaxLoggedBody {
		t.Errorf("big body: truncated %v, %d bytes kept", got[3].Truncated, len(got[3].Body))
	}
	// Copies: changing them does not change the log.
	got[0].Body[0] = 'X'
	got[0].Header.Set("Authorization", "changed")
	if again := s.Attempts(); again[0].Body[0] != '{' || again[0].Header.Get("Authorization") != "Bearer sk-test" {
		t.Error("Attempts returned shared memory")
	}

	// The ring keeps the last four.
	if resp, err := s.Client().Get(s.URL() + "/nothing-here"); err == nil {
		resp.Body.Close()
	}
	got = s.Attempts()
	if len(got) != 4 || got[0].Seq != 1 || got[3].Path != "/v1/nothing-here" || got[3].Status != 404 || got[3].Method != "GET" {
		t.Errorf("after a fifth request: %+v", got)
	}
	if m := s.AttemptsFor("m-req"); len(m) != 1 || !m[0].Stream {
		t.Errorf("AttemptsFor %+v", m)
	}
	s.ResetStats()
	if len(s.Attempts()) != 0 {
		t.Error("ResetStats kept the log")
	}
	_, _ = post(t, s, plainReq) // reset again
	if a := s.Attempts(); len(a) != 1 || a[0].Seq != 5 {
		t.Errorf("after ResetStats %+v", a)
	}
	off := NewServer(t, WithAttemptLog(0))
	mustPost(t, off, plainReq)
	if len(off.Attempts()) != 0 {
		t.Error("WithAttemptLog(0) logged")
	}
}

func TestTheAttemptLogNamesTheModelOfARequestTheServerRefused(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	send := func(method, path, body string) int {
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(http.MethodPost, "/completions", `{"model":"legacy","prompt":"hi"}`); code != 404 {
		t.Errorf("POST /completions: %d", code)
	}
	if code := send(http.MethodPut, "/chat/completions", `{"model":"put","messages":[]}`); code != 405 {
		t.Errorf("PUT /chat/completions: %d", code)
	}
	if a := s.AttemptsFor("legacy"); len(a) != 1 || a[0].Status != 404 || a[0].Kind != KindNone {
		t.Errorf("attempts for the unknown path: %+v", a)
	}
	if a := s.AttemptsFor("put"); len(a) != 1 || a[0].Status != 405 || a[0].Kind != KindNone {
		t.Errorf("attempts for the wrong method: %+v", a)
	}
}

// embedPost posts body to the embeddings endpoint.
func embedPost(t *testing.T, s *Server, body string) (int, []byte) {
	t.Helper()
	resp, err := s.Client().Post(s.URL()+"/embeddings", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return resp.StatusCode, b
}

type embedAnswer struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage *struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeVector(t *testing.T, raw json.RawMessage) []float32 {
	t.Helper()
	var floats []float32
	if json.Unmarshal(raw, &floats) == nil {
		return floats
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("embedding %s", raw)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("base64 %q: %v", s, err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestEmbeddingsEndpoint(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithEmbeddingDim(7))
	for _, format := range []string{"", "float", "base64"} {
		body := `{"model":"emb","input":["a b c","d"]`
		if format != "" {
			body += `,"encoding_format":"` + format + `"`
		}
		code, out := embedPost(t, s, body+"}")
		var ans embedAnswer
		if err := json.Unmarshal(out, &ans); err != nil || code != 200 {
			t.Fatalf("%s: %d %s", format, code, out)
		}
		if ans.Object != "list" || ans.Model != "emb" || len(ans.Data) != 2 || ans.Usage == nil ||
			ans.Usage.PromptTokens != 4 || ans.Usage.TotalTokens != 4 {
			t.Errorf("%s: answer %s", format, out)
		}
		for i, text := range []string{"a b c", "d"} {
			v := decodeVector(t, ans.Data[i].Embedding)
			if ans.Data[i].Index != i || ans.Data[i].Object != "embedding" || !slices.Equal(v, EmbeddingFor(text, 7)) {
				t.Errorf("%s: entry %d = %v", format, i, v)
			}
		}
	}
	// A single string, token ids, dimensions.
	code, out := embedPost(t, s, `{"model":"emb","input":"one","dimensions":3}`)
	var ans embedAnswer
	if json.Unmarshal(out, &ans) != nil || code != 200 || len(ans.Data) != 1 || !slices.Equal(decodeVector(t, ans.Data[0].Embedding), EmbeddingFor("one", 3)) {
		t.Errorf("single string: %d %s", code, out)
	}
	code, out = embedPost(t, s, `{"model":"emb","input":[[1,2,3],[4]]}`)
	if json.Unmarshal(out, &ans) != nil || code != 200 || len(ans.Data) != 2 || ans.Usage.PromptTokens != 4 ||
		!slices.Equal(decodeVector(t, ans.Data[0].Embedding), EmbeddingFor("1,2,3", 7)) {
		t.Errorf("token arrays: %d %s", code, out)
	}
	code, out = embedPost(t, s, `{"model":"emb","input":[5,6]}`)
	if json.Unmarshal(out, &ans) != nil || code != 200 || len(ans.Data) != 1 || ans.Usage.PromptTokens != 2 {
		t.Errorf("one token array: %d %s", code, out)
	}
	if s.Requests() != 6 {
		t.Errorf("Requests %d, want 6", s.Requests())
	}
}

func TestEmbeddingsRejectBadRequests(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	cases := []struct{ body, want string }{
		{`{"model":"e"}`, "required"},
		{`{"model":"e","input":[]}`, "non-empty"},
		{`{"model":"e","input":[""]}`, "empty strings"},
		{`{"model":"e","input":[{}]}`, "token ids"},
		{`{"model":"e","input":"x","encoding_format":"f"}`, "encoding_format"},
		{`{"model":"e","input":"x","dimensions":0}`, "dimensions"},
		{`{"model":"e","input":"x","dimensions":8193}`, "dimensions"},
		{`{"model":"e","input":[` + strings.Repeat(`"x",`, MaxEmbeddingInputs) + `"x"]}`, "at most"},
		{`{"model":"e","input":[` + strings.Repeat(`"x",`, 1000) + `"x"],"dimensions":8192}`, "too many inputs"},
		{`{"model":`, "parse the JSON"},
	}
	for _, tc := range cases {
		code, out := embedPost(t, s, tc.body)
		if code != 400 || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), `"invalid_request_error"`) {
			t.Errorf("%.60s: %d %s, want 400 mentioning %q", tc.body, code, out, tc.want)
		}
	}
	if code, out := embedPost(t, s, `{"model":"e","input":["x"],"dimensions":8192}`); code != 200 {
		t.Errorf("the largest dimensions: %d %.200s", code, out)
	}
	if a := s.Attempts(); len(a) != len(cases)+1 || a[0].Kind != KindNone || a[0].Status != 400 || a[len(cases)].Kind != KindOK {
		t.Errorf("%d attempts logged for %d requests", len(a), len(cases)+1)
	}
}

func TestEmbeddingsFaults(t *testing.T) {
	t.Parallel()
	const req = `{"model":"emb","input":["a","b"]}`
	s := NewServer(t, WithScript(ServerError(503), MalformedAt(0), ErrorEvent(0), OK().WithoutUsage().WithModel("served"),
		CutAfter(0), Reset()))
	if code, out := embedPost(t, s, req); code != 503 || !strings.Contains(string(out), "overloaded") {
		t.Errorf("503: %d %s", code, out)
	}
	if code, out := embedPost(t, s, req); code != 200 || json.Valid(out) {
		t.Errorf("malformed: %d %s", code, out)
	}
	if code, out := embedPost(t, s, req); code != 200 || !strings.HasPrefix(string(out), `{"error":`) {
		t.Errorf("error event: %d %s", code, out)
	}
	code, out := embedPost(t, s, req)
	var ans embedAnswer
	if json.Unmarshal(out, &ans) != nil || code != 200 || ans.Usage != nil || ans.Model != "served" {
		t.Errorf("no usage: %d %s", code, out)
	}
	resp, err := s.Client().Post(s.URL()+"/embeddings", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("cut body read without error")
	}
	resp.Body.Close()
	if _, err := s.Client().Post(s.URL()+"/embeddings", "application/json", strings.NewReader(req)); err == nil {
		t.Error("reset answered")
	}
}

func TestEmbeddingFor(t *testing.T) {
	t.Parallel()
	a, b := EmbeddingFor("hello", 64), EmbeddingFor("hello", 64)
	if !slices.Equal(a, b) || slices.Equal(a, EmbeddingFor("hellp", 64)) {
		t.Error("not a deterministic function of the text")
	}
	for _, dim := range []int{1, 2, 16, 1536} {
		var sum float64
		for _, x := range EmbeddingFor("x", dim) {
			sum += float64(x) * float64(x)
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("dim %d: norm² %v", dim, sum)
		}
	}
	if EmbeddingFor("x", 0) != nil {
		t.Error("dim 0 gave a vector")
	}
}

func TestEnv(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	got := s.Env("LLM")
	want := map[string]string{
		"LLM__OPENAI__1__BASE_URL": s.URL(), "LLM__OPENAI__1__API_KEY": DefaultAPIKey,
		"LLM__OPENAI__1__MODEL": DefaultModel, "LLM__OPENAI__1__TIMEOUT_S": "10",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}
	if len(got) != len(want) {
		t.Errorf("Env = %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	got = s.Env("EMBED", EnvSource("qwen", 3), EnvModel("m"), EnvAPIKey("k"), EnvField("priority", "1"), EnvField("TIMEOUT_S", "2"))
	for k, v := range map[string]string{"EMBED__QWEN__3__MODEL": "m", "EMBED__QWEN__3__API_KEY": "k",
		"EMBED__QWEN__3__PRIORITY": "1", "EMBED__QWEN__3__TIMEOUT_S": "2", "EMBED__QWEN__3__BASE_URL": s.URL()} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestKindAndStatusCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		b      Behavior
		kind   Kind
		status int
	}{
		{OK(), KindOK, 200},
		{Behavior{}, KindOK, 200},
		{RateLimited("1"), KindStatus, 429},
		{Status(200, "x", nil), KindStatus, 200},
		{Reset(), KindReset, 0},
		{Hang(), KindHang, 0},
		{CutAfter(1), KindCut, 200},
		{StallAfter(1, 1), KindStall, 200},
		{MalformedAt(1), KindMalformed, 200},
		{ErrorEvent(1), KindErrorEvent, 200},
	}
	for _, tc := range cases {
		if tc.b.Kind() != tc.kind || tc.b.StatusCode() != tc.status {
			t.Errorf("%v: kind %v status %d, want %v %d", tc.b, tc.b.Kind(), tc.b.StatusCode(), tc.kind, tc.status)
		}
	}
	if KindErrorEvent.String() != "error_event" || KindNone.String() != "none" || Kind(200).String() != "kind(200)" {
		t.Error("Kind.String")
	}
}
