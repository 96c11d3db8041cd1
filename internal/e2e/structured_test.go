package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	"github.com/polygateway/polygateway/telemetry"
)

// contentServer answers chat completions (non-streaming) with the scripted
// contents in order, repeating the last, and keeps the request bodies.
type contentServer struct {
	*httptest.Server
	mu      sync.Mutex
	answers []string
	bodies  []string
}

func newContentServer(t *testing.T, answers ...string) *contentServer {
	cs := &contentServer{answers: answers}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cs.mu.Lock()
		i := min(len(cs.bodies), len(cs.answers)-1)
		cs.bodies = append(cs.bodies, string(body))
		answer := cs.answers[i]
		cs.mu.Unlock()
		content, _ := json.Marshal(answer)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, content)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *contentServer) requests() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.bodies...)
}

func structuredEnv(cs *contentServer, kv ...string) testenv.Env {
	e := testenv.Base().Set(
		"LLM__OPENAI__1__BASE_URL", cs.URL+"/v1", "LLM__OPENAI__1__API_KEY", "k",
		"LLM__OPENAI__1__MODEL", "m", "LLM__OPENAI__1__TIMEOUT_S", "5")
	return e.Set(kv...)
}

const verdictSchema = `{"type":"object","properties":{"score":{"type":"integer","minimum":0,"maximum":10},"reason":{"type":"string"}},"required":["score","reason"]}`

type verdict struct {
	Score  int    `json:"score"`
	Reason string `json:"reason"`
}

func askStructured(c *polygateway.GatewayClient, opts ...polygateway.CallOption) (*polygateway.LLMResponse, error) {
	return c.Chat(context.Background(), []polygateway.Message{polygateway.User("rate it")}, append(opts, polygateway.WithStream(false))...)
}

func TestFencedTrailingCommaJSONIsRepairedWithoutReask(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, "```json\n{\"score\": 7, \"reason\": 'fine',}\n```")
	c := structuredEnv(cs).Client(t)
	resp, err := askStructured(c, polygateway.WithJSONSchema([]byte(verdictSchema)))
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	got, ok := resp.StructuredData.(map[string]any)
	if !ok || got["score"] != 7.0 || got["reason"] != "fine" {
		t.Fatalf("StructuredData = %#v", resp.StructuredData)
	}
	if n := len(cs.requests()); n != 1 {
		t.Fatalf("%d requests, want 1 (no re-ask)", n)
	}
}

func TestSchemaViolationIsReaskedOnceWithTheErrorFedBack(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, `{"score": 42, "reason": "too high"}`, `{"score": 4, "reason": "ok"}`)
	sink := telemetry.NewMemory()
	c := structuredEnv(cs).Client(t, polygateway.WithTelemetry(sink))
	v, resp, err := polygateway.ChatInto[verdict](context.Background(), c, []polygateway.Message{polygateway.User("rate it")},
		polygateway.WithJSONSchema([]byte(verdictSchema)), polygateway.WithStream(false))
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if v != (verdict{Score: 4, Reason: "ok"}) || resp.StructuredData.(verdict) != v {
		t.Fatalf("decoded %+v", v)
	}
	reqs := cs.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want exactly one re-ask", len(reqs))
	}
	if !strings.Contains(reqs[1], "maximum") || !strings.Contains(reqs[1], "too high") {
		t.Fatalf("the re-ask does not carry the validation error and the previous answer: %s", reqs[1])
	}
	recs := sink.Records()
	if len(recs) != 2 || recs[1].ParentCallID != recs[0].CallID || !strings.HasPrefix(recs[0].Error, "ResultInvalidError: ") ||
		recs[0].CompletionTokens != 5 || recs[1].Error != "" {
		t.Fatalf("telemetry rows = %+v", recs)
	}
}

func TestStructuredFailureIsResultInvalidAndNeverChargesTheBreaker(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, "I think it is a seven.")
	c := structuredEnv(cs, "PGW_STRUCTURED_MAX_RETRIES", "1").Client(t)
	for range 8 {
		resp, err := askStructured(c, polygateway.WithJSON())
		var invalid *polygateway.ResultInvalidError
		if !errors.As(err, &invalid) || invalid.Raw != "I think it is a seven." || invalid.Message == "" || resp == nil {
			t.Fatalf("err = %v, want ResultInvalidError with the raw text", err)
		}
	}
	if n := len(cs.requests()); n != 16 {
		t.Fatalf("%d requests, want 16 (1 + 1 re-ask per call)", n)
	}
	st := c.Sources(context.Background())[0]
	if st.Breaker.State != core.StateClosed || st.Breaker.ConsecutiveFailures != 0 {
		t.Fatalf("breaker charged by invalid results: %+v", st.Breaker)
	}
}

func TestStructuredMaxRetriesZeroMeansNoReask(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, "not json at all {")
	c := structuredEnv(cs, "PGW_STRUCTURED_MAX_RETRIES", "0").Client(t)
	if _, err := askStructured(c, polygateway.WithJSON()); err == nil {
		t.Fatal("invalid JSON accepted")
	}
	if n := len(cs.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// An answer that holds one JSON object and then something else — a note
// in prose after its fenced block, a second object — is not one document:
// repair would wrap the pieces in an array the model never wrote, and
// WithJSON would hand that array over as the answer. It is re-asked.
func TestWithJSONNeverTakesAnArrayRepairMadeOfAnObjectAndWhatFollowsIt(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{
		"```json\n{\"title\": \"Dune\", \"year\": 1965,}\n```\n\nNote: the year is the first edition.",
		"{\"title\": \"Dune\"}\n{\"title\": \"Dune Messiah\"}",
	} {
		cs := newContentServer(t, answer, `{"title": "Dune", "year": 1965}`)
		resp, err := askStructured(structuredEnv(cs, "PGW_STRUCTURED_MAX_RETRIES", "1").Client(t), polygateway.WithJSON())
		if err != nil {
			t.Fatalf("%q: %v, want the re-asked answer", answer, err)
		}
		if got, ok := resp.StructuredData.(map[string]any); !ok || got["year"] != 1965.0 {
			t.Errorf("%q: StructuredData = %#v, want the re-asked object", answer, resp.StructuredData)
		}
		if n := len(cs.requests()); n != 2 {
			t.Errorf("%q: %d requests, want one re-ask", answer, n)
		}
	}
}

func TestOnlyValidatedAnswersAreCached(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, "nope", `{"score": 1, "reason": "r"}`)
	c := structuredEnv(cs, "PGW_STRUCTURED_MAX_RETRIES", "0",
		"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "t", "PGW_CACHE_TTL_S", "60").Client(t)
	schema := polygateway.WithJSONSchema([]byte(verdictSchema))
	if _, err := askStructured(c, schema); err == nil {
		t.Fatal("first (invalid) answer accepted")
	}
	resp, err := askStructured(c, schema)
	if err != nil || resp.CacheHit {
		t.Fatalf("second call: hit=%v err=%v; the invalid answer must not have been cached", resp != nil && resp.CacheHit, err)
	}
	hit, err := askStructured(c, schema)
	if err != nil || !hit.CacheHit || hit.StructuredData == nil {
		t.Fatalf("third call: want a validated cache hit with StructuredData, got %+v, %v", hit, err)
	}
	if plain, err := askStructured(c); err != nil || plain.CacheHit {
		t.Fatalf("a plain call must not share the structured call's cache entry: %+v %v", plain, err)
	}
}

func TestInvalidSchemaIsRejectedLocally(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, "{}")
	c := structuredEnv(cs).Client(t)
	_, err := askStructured(c, polygateway.WithJSONSchema([]byte(`{"type": 12}`)))
	var re *polygateway.RequestRejectedError
	if !errors.As(err, &re) || len(cs.requests()) != 0 {
		t.Fatalf("err = %v, requests = %d; want a local RequestRejectedError", err, len(cs.requests()))
	}
}

// A schema that is JSON but not valid against its meta-schema (a type that
// does not exist, a negative length) is refused before any request, like
// one that is not a schema at all.
func TestSchemaInvalidAgainstItsMetaSchemaIsRejectedLocally(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{`{"type": "strin"}`, `{"type": "string", "minLength": -1}`, `{"required": ["a", "a"]}`} {
		cs := newContentServer(t, "{}")
		_, err := askStructured(structuredEnv(cs).Client(t), polygateway.WithJSONSchema([]byte(schema)))
		var re *polygateway.RequestRejectedError
		if !errors.As(err, &re) || re.Code != "invalid_json_schema" || len(cs.requests()) != 0 {
			t.Errorf("%s: err = %v, requests = %d; want a local invalid_json_schema", schema, err, len(cs.requests()))
		}
	}
}

// Validation follows the schema's own draft and exact decimal arithmetic:
// a decimal multipleOf holds for decimal answers, schemas of drafts 4, 6,
// 7 and 2019-09 validate, and a draft-07 schema asserts its formats (a
// 2020-12 schema keeps format an annotation).
func TestSchemaValidationFollowsTheDraftAndDecimalArithmetic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema, answer string
		valid                bool
	}{
		{"decimal multipleOf", `{"type":"object","properties":{"price":{"type":"number","multipleOf":0.01}},"required":["price"]}`, `{"price": 1.15}`, true},
		{"decimal multipleOf refused", `{"type":"object","properties":{"price":{"type":"number","multipleOf":0.01}},"required":["price"]}`, `{"price": 1.155}`, false},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":["a"]}`, `{"a": 1}`, true},
		{"draft-06", `{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","required":["a"]}`, `{"a": 1}`, true},
		{"draft-07 without the fragment", `{"$schema":"http://json-schema.org/draft-07/schema","type":"object","required":["a"]}`, `{"a": 1}`, true},
		{"draft 2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","required":["a"]}`, `{"a": 1}`, true},
		{"draft-07 format asserted", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"to":{"type":"string","format":"email"}}}`, `{"to": "nobody"}`, false},
		{"draft 2020-12 format annotated", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"to":{"type":"string","format":"email"}}}`, `{"to": "nobody"}`, true},
	} {
		cs := newContentServer(t, tc.answer)
		c := structuredEnv(cs, "PGW_STRUCTURED_MAX_RETRIES", "0").Client(t)
		resp, err := askStructured(c, polygateway.WithJSONSchema([]byte(tc.schema)))
		var invalid *polygateway.ResultInvalidError
		switch {
		case tc.valid && (err != nil || resp.StructuredData == nil):
			t.Errorf("%s: %v, want %s accepted", tc.name, err, tc.answer)
		case !tc.valid && !errors.As(err, &invalid):
			t.Errorf("%s: %v, want %s refused as a ResultInvalidError", tc.name, err, tc.answer)
		case len(cs.requests()) != 1:
			t.Errorf("%s: %d requests, want 1", tc.name, len(cs.requests()))
		}
	}
}

// A Go type to decode into, with no hand-written schema.
type labelled struct {
	Label  string   `json:"label"`
	Score  float64  `json:"score"`
	Tags   []string `json:"tags,omitempty"`
	Source *string  `json:"source"`
}

func TestChatIntoDerivesTheSchemaFromTheTypeAndReasksForAMissingRequiredField(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, `{"label": "spam"}`, `{"label": "spam", "score": 0.9, "source": null}`)
	c := structuredEnv(cs).Client(t)
	v, resp, err := polygateway.ChatInto[labelled](context.Background(), c, []polygateway.Message{polygateway.User("classify")},
		polygateway.WithStream(false))
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if v.Label != "spam" || v.Score != 0.9 || v.Source != nil || resp == nil {
		t.Fatalf("decoded %+v", v)
	}
	reqs := cs.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the answer missing score re-asked once", len(reqs))
	}
	if !strings.Contains(reqs[1], "score") {
		t.Errorf("the re-ask does not name the missing field: %s", reqs[1])
	}
	// The derived schema went upstream natively (the openai profile supports it).
	if !strings.Contains(reqs[0], `"json_schema"`) || !strings.Contains(reqs[0], `"required":["label","score","source"]`) {
		t.Errorf("the first request does not carry the derived schema: %s", reqs[0])
	}
}

// A Go type whose JSON form is not its Go structure: a number and a
// boolean with the json ",string" option, and types that read themselves
// from text only (netip.Addr implements encoding.TextUnmarshaler).
type ticket struct {
	ID    int64        `json:"id,string"`
	Paid  *bool        `json:"paid,string"`
	Host  netip.Addr   `json:"host"`
	Hosts []netip.Addr `json:"hosts,omitempty"`
}

// The schema ChatInto derives describes the JSON encoding/json decodes
// into T: an answer that decodes is accepted at once, not re-asked until
// the call fails, and the schema sent upstream asks for it.
func TestChatIntoDerivesTheSchemaOfTheJSONTheTypeDecodesFrom(t *testing.T) {
	t.Parallel()
	cs := newContentServer(t, `{"id": "9007199254740993", "paid": "true", "host": "192.0.2.1", "hosts": ["2001:db8::1"]}`)
	c := structuredEnv(cs, "PGW_STRUCTURED_MAX_RETRIES", "1").Client(t)
	v, _, err := polygateway.ChatInto[ticket](context.Background(), c, []polygateway.Message{polygateway.User("the ticket")},
		polygateway.WithStream(false))
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if v.ID != 9007199254740993 || v.Paid == nil || !*v.Paid || v.Host != netip.MustParseAddr("192.0.2.1") ||
		len(v.Hosts) != 1 || v.Hosts[0] != netip.MustParseAddr("2001:db8::1") {
		t.Fatalf("decoded %+v", v)
	}
	reqs := cs.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want the decodable answer taken at once", len(reqs))
	}
	for _, want := range []string{`"id":{"type":"string"}`, `"paid":{"type":["null","string"]}`, `"host":{"type":"string"}`, `"items":{"type":"string"}`} {
		if !strings.Contains(reqs[0], want) {
			t.Errorf("the schema sent upstream lacks %s: %s", want, reqs[0])
		}
	}
}

// finishServer answers chat completions (non-streaming) with the scripted
// (content, finish_reason) pairs in order, repeating the last.
func finishServer(t *testing.T, answers ...[2]string) *contentServer {
	cs := &contentServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cs.mu.Lock()
		a := answers[min(len(cs.bodies), len(answers)-1)]
		cs.bodies = append(cs.bodies, string(body))
		cs.mu.Unlock()
		content, _ := json.Marshal(a[0])
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, content, a[1])
	}))
	t.Cleanup(cs.Close)
	return cs
}

// A structured answer cut at the model's token limit (finish_reason
// "length") at any byte is never repaired into a success: repair would
// close its brackets and present part of the data as the whole. It is
// re-asked (the cut fed back), and without a re-ask it is a
// ResultInvalidError. Valid JSON as sent is taken at its word.
func TestPropertyAStructuredAnswerCutAtItsTokenLimitIsNeverRepairedIntoASuccess(t *testing.T) {
	t.Parallel()
	whole := `{"score": 7, "reason": "clear and complete", "tags": ["a", "b", "c"]}`
	for cut := 1; cut < len(whole); cut++ {
		part := whole[:cut]
		cs := finishServer(t, [2]string{part, "length"}, [2]string{whole, "stop"})
		c := structuredEnv(cs, "PGW_STRUCTURED_MAX_RETRIES", "1").Client(t)
		resp, err := askStructured(c, polygateway.WithJSON())
		if err != nil {
			t.Fatalf("cut at %d (%q): %v, want the re-asked whole answer", cut, part, err)
		}
		if resp.Content != whole {
			t.Fatalf("cut at %d (%q): the call succeeded with %q", cut, part, resp.Content)
		}
		reqs := cs.requests()
		if len(reqs) != 2 || !strings.Contains(reqs[1], "token limit") {
			t.Fatalf("cut at %d: %d requests (re-ask %v), want one re-ask naming the token limit", cut, len(reqs), reqs[len(reqs)-1])
		}
		c0 := structuredEnv(finishServer(t, [2]string{part, "length"}), "PGW_STRUCTURED_MAX_RETRIES", "0").Client(t)
		var invalid *polygateway.ResultInvalidError
		if _, err := askStructured(c0, polygateway.WithJSON()); !errors.As(err, &invalid) {
			t.Fatalf("cut at %d without a re-ask: %v, want a ResultInvalidError", cut, err)
		}
	}
	cs := finishServer(t, [2]string{whole, "length"})
	resp, err := askStructured(structuredEnv(cs).Client(t), polygateway.WithJSON())
	if err != nil || resp.StructuredData == nil || len(cs.requests()) != 1 {
		t.Fatalf("valid JSON at the limit: (%v, %v), %d requests; want it taken as sent", resp, err, len(cs.requests()))
	}
}
