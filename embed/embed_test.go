package embed_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/transport"
	"github.com/polygateway/polygateway/telemetry"
)

func TestEmbedBatchesInInputOrder(t *testing.T) {
	t.Parallel()
	f := newFake(t, 8, func(f *fakeEmbed) { f.shuffle = true })
	c := newClient(t, env(f.URL(), "4"))
	in := texts(10)
	resp, err := c.Embed(ctxT(t), in)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	wantVectors(t, resp.Vectors, in, 8)
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream saw %d requests, want 3", len(reqs))
	}
	for i, want := range []int{4, 4, 2} {
		r := reqs[i]
		if len(r.Input) != want {
			t.Errorf("request %d has %d inputs, want %d", i, len(r.Input), want)
		}
		if r.Model != "text-embedding-test" || r.Format != "float" || r.Auth != "Bearer sk-embed-test" {
			t.Errorf("request %d: model %q, encoding_format %q, auth %q", i, r.Model, r.Format, r.Auth)
		}
	}
	if resp.Dim != 8 || resp.Provider != "openai" || resp.SourceName != "openai_1" || resp.Model != "text-embedding-test-served" {
		t.Errorf("Dim %d, Provider %q, SourceName %q, Model %q", resp.Dim, resp.Provider, resp.SourceName, resp.Model)
	}
	if len(resp.CallID) != 32 || len(resp.BatchCallIDs) != 3 {
		t.Errorf("CallID %q, BatchCallIDs %v", resp.CallID, resp.BatchCallIDs)
	}
	if resp.Latency <= 0 {
		t.Errorf("Latency %v", resp.Latency)
	}
}

func TestEmbedBase64EqualsFloat(t *testing.T) {
	t.Parallel()
	f := newFake(t, 16, func(f *fakeEmbed) { f.shuffle = true })
	in := texts(7)
	floatC := newClient(t, env(f.URL(), "3"))
	b64C := newClient(t, env(f.URL(), "3", "EMBED__ENCODING_FORMAT", "base64"))

	a, err := floatC.Embed(ctxT(t), in)
	if err != nil {
		t.Fatalf("float: %v", err)
	}
	b, err := b64C.Embed(ctxT(t), in)
	if err != nil {
		t.Fatalf("base64: %v", err)
	}
	p, err := floatC.Embed(ctxT(t), in, polygateway.WithParams(map[string]any{"encoding_format": "base64"}))
	if err != nil {
		t.Fatalf("base64 by WithParams: %v", err)
	}
	wantVectors(t, a.Vectors, in, 16)
	wantVectors(t, b.Vectors, in, 16)
	wantVectors(t, p.Vectors, in, 16)
	formats := map[string]int{}
	for _, r := range f.requests() {
		formats[r.Format]++
	}
	if formats["float"] != 3 || formats["base64"] != 6 {
		t.Errorf("encoding_format per request = %v, want 3 float and 6 base64", formats)
	}
}

func TestEmbedNormalize(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4, func(f *fakeEmbed) {
		f.respond = func(req fakeReq) (int, string) {
			return 200, `{"data":[{"index":1,"embedding":[0,0,0,0]},{"index":0,"embedding":[3,0,4,0]}],"usage":{"prompt_tokens":2}}`
		}
	})
	c := newClient(t, env(f.URL(), "8", "EMBED__NORMALIZE", "true"))
	resp, err := c.Embed(ctxT(t), []string{"a", "zero"})
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	want := [][]float32{{0.6, 0, 0.8, 0}, {0, 0, 0, 0}}
	for i := range want {
		for k := range want[i] {
			if math.Abs(float64(resp.Vectors[i][k]-want[i][k])) > 1e-6 {
				t.Fatalf("vectors = %v, want %v", resp.Vectors, want)
			}
		}
	}
	if !c.Config().Normalize {
		t.Error("Config().Normalize is false")
	}
}

func TestEmbedExpectedDimMismatchIsResultInvalid(t *testing.T) {
	t.Parallel()
	f := newFake(t, 8)
	mem := telemetry.NewMemory()
	c := newClient(t, env(f.URL(), "4", "EMBED__EXPECTED_DIM", "16", "EMBED__RETRY__MAX_ATTEMPTS", "3"), polygateway.WithTelemetry(mem))
	for range 6 {
		_, err := c.Embed(ctxT(t), texts(2))
		var invalid *polygateway.ResultInvalidError
		if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "EMBED__EXPECTED_DIM") {
			t.Fatalf("err = %v, want a ResultInvalidError naming EMBED__EXPECTED_DIM", err)
		}
		var be *embed.BatchError
		if !errors.As(err, &be) || be.Batch != 0 || be.Count != 2 {
			t.Fatalf("err = %#v, want a BatchError of batch 0", err)
		}
	}
	if n := len(f.requests()); n != 6 {
		t.Errorf("upstream saw %d requests, want 6 (an invalid result is not retried)", n)
	}
	breakerClosed(t, c)
	rows := mem.Records()
	if len(rows) != 6 {
		t.Fatalf("%d telemetry rows, want 6", len(rows))
	}
	if !strings.HasPrefix(rows[0].Error, "ResultInvalidError") || rows[0].PromptTokens == 0 || rows[0].UsageSource != "measured" {
		t.Errorf("row = %+v, want a ResultInvalidError row with the billed usage", rows[0])
	}
}

func TestEmbedTransientFailureRetriesThatBatchOnly(t *testing.T) {
	t.Parallel()
	in := texts(1000)
	f := newFake(t, 8, func(f *fakeEmbed) { f.failures[in[64]] = 1 }) // batch 2 (of 16) fails once
	c := newClient(t, env(f.URL(), "64"))
	resp, err := c.Embed(ctxT(t), in)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	wantVectors(t, resp.Vectors, in, 8)
	per := f.perBatch()
	if len(per) != 16 {
		t.Fatalf("requests per batch = %v, want 16 batches", per)
	}
	for first, n := range per {
		want := 1
		if first == in[64] {
			want = 2
		}
		if n != want {
			t.Errorf("batch starting %q sent %d times, want %d", first, n, want)
		}
	}
	if len(f.requests()) != 17 {
		t.Errorf("%d requests, want 17", len(f.requests()))
	}
	breakerClosed(t, c)
}

func TestEmbedEmptyInputMakesNoRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, 8)
	c := newClient(t, env(f.URL(), "4"))
	for _, in := range [][]string{nil, {}} {
		resp, err := c.Embed(ctxT(t), in)
		if err != nil {
			t.Fatalf("Embed(%v): %v", in, err)
		}
		if resp.Vectors == nil || len(resp.Vectors) != 0 || resp.Dim != 0 || resp.PromptTokens != 0 {
			t.Errorf("Embed(%v) = %+v, want an empty response with non-nil Vectors", in, resp)
		}
		if resp.Cost == nil || *resp.Cost != 0 || resp.CallID == "" {
			t.Errorf("Cost %v, CallID %q", resp.Cost, resp.CallID)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("upstream saw %d requests, want 0", n)
	}
}

func TestEmbedEmptyStringIsRejected(t *testing.T) {
	t.Parallel()
	f := newFake(t, 8)
	c := newClient(t, env(f.URL(), "4"))
	_, err := c.Embed(ctxT(t), []string{"a", "b", "c", "d", "e", "", "g"})
	var rej *polygateway.RequestRejectedError
	if !errors.As(err, &rej) || !strings.Contains(rej.Message, "texts[5]") {
		t.Fatalf("err = %v, want a RequestRejectedError naming texts[5]", err)
	}
	if !errors.Is(err, polygateway.ErrGateway) {
		t.Error("errors.Is(err, ErrGateway) is false")
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("upstream saw %d requests, want 0", n)
	}
}

// TestEmbedInputCapsRefuseBeforeAnyBatch shows that a call over
// MAX_INPUTS or MAX_INPUT_BYTES (the defaults, then configured values) is a
// RequestRejectedError with its own code, and that nothing is sent.
func TestEmbedInputCapsRefuseBeforeAnyBatch(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	def := newClient(t, env(f.URL(), "4"))
	small := newClient(t, env(f.URL(), "4", "EMBED__MAX_INPUTS", "5", "EMBED__MAX_INPUT_BYTES", "20"))
	huge := strings.Repeat("x", embed.DefaultMaxInputBytes/2+1)
	for _, tc := range []struct {
		name   string
		c      *embed.Client
		in     []string
		code   string
		reject bool
	}{
		{"default count", def, make([]string, embed.DefaultMaxInputs+1), "too_many_inputs", true},
		{"a million inputs", def, make([]string, 1_000_000), "too_many_inputs", true},
		{"default bytes", def, []string{huge, huge}, "input_too_large", true},
		{"default bytes, one fits", def, []string{huge}, "", false},
		{"configured count", small, texts(6), "too_many_inputs", true},
		{"configured count, at the limit", small, []string{"a", "b", "c", "d", "e"}, "", false},
		{"configured bytes", small, []string{"0123456789", "0123456789", "x"}, "input_too_large", true},
		{"configured bytes, at the limit", small, []string{"0123456789", "0123456789"}, "", false},
	} {
		before := len(f.requests())
		_, err := tc.c.Embed(ctxT(t), tc.in)
		var rej *polygateway.RequestRejectedError
		switch {
		case !tc.reject && err != nil:
			t.Errorf("%s: %v, want success", tc.name, err)
		case tc.reject && (!errors.As(err, &rej) || rej.Code != tc.code || !strings.Contains(rej.Message, "EMBED__MAX_INPUT")):
			t.Errorf("%s: err = %v, want a RequestRejectedError %s naming the key", tc.name, err, tc.code)
		case tc.reject && len(f.requests()) != before:
			t.Errorf("%s: %d requests were sent", tc.name, len(f.requests())-before)
		}
	}
}

func TestEmbedUsageSummedOrEstimated(t *testing.T) {
	t.Parallel()
	in := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	t.Run("measured", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, 4)
		c := newClient(t, env(f.URL(), "2"))
		resp, err := c.Embed(ctxT(t), in)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, s := range in {
			want += len(s) // the fake's usage
		}
		if resp.PromptTokens != want || resp.UsageSource != "measured" {
			t.Errorf("PromptTokens %d %s, want %d measured", resp.PromptTokens, resp.UsageSource, want)
		}
	})
	t.Run("one batch estimated", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, 4, func(f *fakeEmbed) { f.noUsage = func(first string) bool { return first == "gamma" } })
		c := newClient(t, env(f.URL(), "2"))
		resp, err := c.Embed(ctxT(t), in)
		if err != nil {
			t.Fatal(err)
		}
		want := len("alpha") + len("beta") + transport.EstimateTokens("gamma") + transport.EstimateTokens("delta") + len("epsilon")
		if resp.PromptTokens != want || resp.UsageSource != "estimated" {
			t.Errorf("PromptTokens %d %s, want %d estimated", resp.PromptTokens, resp.UsageSource, want)
		}
	})
}

func TestEmbedTelemetryRowPerBatch(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	mem := telemetry.NewMemory()
	pricing := polygateway.PricingTable{"text-embedding-test": {InputPer1M: 1e6}} // 1 per token
	c := newClient(t, env(f.URL(), "4"), polygateway.WithTelemetry(mem), polygateway.WithPricing(pricing))
	in := texts(10)
	resp, err := c.Embed(ctxT(t), in, polygateway.WithSessionID("sess-1"))
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	rows := mem.Records()
	if len(rows) != 3 {
		t.Fatalf("%d telemetry rows, want 3", len(rows))
	}
	total := 0.0
	for i, r := range rows {
		if r.CallID != resp.BatchCallIDs[i] || r.ParentCallID != resp.CallID || r.SessionID != "sess-1" {
			t.Errorf("row %d: call %q parent %q session %q; want call %q parent %q", i, r.CallID, r.ParentCallID, r.SessionID, resp.BatchCallIDs[i], resp.CallID)
		}
		if r.Error != "" || r.SourceName != "openai_1" || r.UsageSource != "measured" || r.Cost == nil || r.PromptTokens == 0 {
			t.Errorf("row %d = %+v", i, r)
		}
		if r.Cost != nil {
			total += *r.Cost
		}
	}
	if resp.Cost == nil || *resp.Cost != total || total != float64(resp.PromptTokens) {
		t.Errorf("Cost %v, rows total %v, PromptTokens %d", resp.Cost, total, resp.PromptTokens)
	}

	// WithParentCallID: the batch rows hang under the caller's parent.
	resp2, err := c.Embed(ctxT(t), in[:2], polygateway.WithParentCallID("task-7"))
	if err != nil {
		t.Fatal(err)
	}
	rows = mem.Records()
	if len(rows) != 4 || rows[3].ParentCallID != "task-7" || rows[3].CallID != resp2.BatchCallIDs[0] {
		t.Errorf("rows = %+v, want a 4th row under task-7", rows)
	}
}

func TestEmbedCostNilWithoutPrice(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	c := newClient(t, env(f.URL(), "4"), polygateway.WithPricing(polygateway.PricingTable{"other": {InputPer1M: 1}}))
	resp, err := c.Embed(ctxT(t), texts(5))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Cost != nil {
		t.Errorf("Cost = %v, want nil", *resp.Cost)
	}
}

func TestFromEnvConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, key string
		kv        []string
		want      string
	}{
		{"missing batch size", "EMBED__BATCH_SIZE", []string{"EMBED__BATCH_SIZE", ""}, ""},
		{"zero batch size", "EMBED__BATCH_SIZE", []string{"EMBED__BATCH_SIZE", "0"}, ""},
		{"batch size not a number", "EMBED__BATCH_SIZE", []string{"EMBED__BATCH_SIZE", "lots"}, ""},
		{"bad normalize", "EMBED__NORMALIZE", []string{"EMBED__NORMALIZE", "yes"}, ""},
		{"bad expected dim", "EMBED__EXPECTED_DIM", []string{"EMBED__EXPECTED_DIM", "-3"}, ""},
		{"bad concurrency", "EMBED__CONCURRENCY", []string{"EMBED__CONCURRENCY", "1000"}, ""},
		{"bad encoding", "EMBED__ENCODING_FORMAT", []string{"EMBED__ENCODING_FORMAT", "int8"}, ""},
		{"unknown key", "EMBED__NORMALISE", []string{"EMBED__NORMALISE", "true"}, "did you mean EMBED__NORMALIZE?"},
		{"zero max inputs", "EMBED__MAX_INPUTS", []string{"EMBED__MAX_INPUTS", "0"}, ""},
		{"max inputs not a number", "EMBED__MAX_INPUTS", []string{"EMBED__MAX_INPUTS", "2k"}, ""},
		{"negative max input bytes", "EMBED__MAX_INPUT_BYTES", []string{"EMBED__MAX_INPUT_BYTES", "-1"}, ""},
		{"empty max input bytes", "EMBED__MAX_INPUT_BYTES", []string{"EMBED__MAX_INPUT_BYTES", " "}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := embed.FromEnv("EMBED", polygateway.WithEnv(env("http://127.0.0.1:1/v1", "4", tc.kv...)))
			var ce *polygateway.ConfigError
			if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Problem, tc.want) {
				t.Fatalf("err = %v, want a ConfigError for %s saying %q", err, tc.key, tc.want)
			}
		})
	}
	t.Run("settings", func(t *testing.T) {
		t.Parallel()
		s, err := polygateway.LoadSettings("EMBED", env("http://127.0.0.1:1/v1", ""))
		if err != nil {
			t.Fatal(err)
		}
		_, err = embed.FromSettings(s)
		var ce *polygateway.ConfigError
		if !errors.As(err, &ce) || ce.Key != "EMBED__BATCH_SIZE" {
			t.Fatalf("err = %v, want a ConfigError for EMBED__BATCH_SIZE", err)
		}
		s.Extra = map[string]string{"BATCH_SIZE": "32", "NORMALIZE": "1", "EXPECTED_DIM": "8", "CONCURRENCY": "2", "ENCODING_FORMAT": "base64"}
		c, err := embed.FromSettings(s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		want := embed.Config{BatchSize: 32, Normalize: true, ExpectedDim: 8, Concurrency: 2, EncodingFormat: "base64",
			MaxInputs: embed.DefaultMaxInputs, MaxInputBytes: embed.DefaultMaxInputBytes}
		if c.Config() != want || c.Scope() != "EMBED" {
			t.Errorf("Config() = %+v, Scope %q", c.Config(), c.Scope())
		}
		s.Extra["MAX_INPUTS"], s.Extra["MAX_INPUT_BYTES"] = " 10 ", "4096"
		c2, err := embed.FromSettings(s)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		if got := c2.Config(); got.MaxInputs != 10 || got.MaxInputBytes != 4096 {
			t.Errorf("Config() = %+v, want MaxInputs 10, MaxInputBytes 4096", got)
		}
	})
}

func TestEmbedCancellation(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4, func(f *fakeEmbed) { f.hang = true })
	mem := telemetry.NewMemory()
	c := newClient(t, env(f.URL(), "4"), polygateway.WithTelemetry(mem))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-f.arrived
		cancel()
	}()
	_, err := c.Embed(ctx, texts(9))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want errors.Is(err, context.Canceled)", err)
	}
	var ce *polygateway.CanceledError
	if !errors.As(err, &ce) {
		t.Errorf("err = %v, want a CanceledError", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want 1 (later batches never start)", n)
	}
	if mem.Len() != 0 {
		t.Errorf("%d telemetry rows, want none for a cancelled call", mem.Len())
	}
	breakerClosed(t, c)

	// A context that is already done makes no request.
	_, err = c.Embed(ctx, texts(2))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want still 1", n)
	}
}

func TestEmbedAttemptTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4, func(f *fakeEmbed) { f.hang = true })
	c := newClient(t, env(f.URL(), "4", "EMBED__OPENAI__1__TIMEOUT_S", "0.2", "EMBED__RETRY__MAX_ATTEMPTS", "1"))
	start := time.Now()
	_, err := c.Embed(ctxT(t), texts(2))
	var te *polygateway.TransientError
	if !errors.As(err, &te) || te.Reason != core.ReasonTimeout {
		t.Fatalf("err = %v, want a TransientError with reason timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestEmbedConcurrentBatches(t *testing.T) {
	t.Parallel()
	f := newFake(t, 8, func(f *fakeEmbed) { f.shuffle = true })
	in := texts(101)
	f.failures[in[40]] = 1
	c := newClient(t, env(f.URL(), "10", "EMBED__CONCURRENCY", "4"))
	resp, err := c.Embed(ctxT(t), in)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	wantVectors(t, resp.Vectors, in, 8)
	if n := len(f.requests()); n != 12 {
		t.Errorf("%d requests, want 12 (11 batches, one retried)", n)
	}
}

func TestEmbedConcurrentFailureStopsTheCall(t *testing.T) {
	t.Parallel()
	f := newFake(t, 8, func(f *fakeEmbed) {
		f.respond = func(req fakeReq) (int, string) {
			if req.Input[0] == "text number 20" {
				return 400, `{"error":{"message":"input too long","type":"invalid_request_error","code":"bad_input"}}`
			}
			return 200, string(f.answer(req))
		}
	})
	c := newClient(t, env(f.URL(), "10", "EMBED__CONCURRENCY", "3"))
	_, err := c.Embed(ctxT(t), texts(200))
	var rej *polygateway.RequestRejectedError
	var be *embed.BatchError
	if !errors.As(err, &rej) || rej.Code != "bad_input" || !errors.As(err, &be) || be.Batch != 2 || be.Offset != 20 || be.Count != 10 {
		t.Fatalf("err = %v, want the rejection of batch 2", err)
	}
	if n := len(f.requests()); n >= 20 {
		t.Errorf("%d requests: the call went on after the failure", n)
	}
}

func TestEmbedRequestBody(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	c := newClient(t, env(f.URL(), "4", "EMBED__OPENAI__1__EXTRA_BODY", `{"user":"svc","input":"never","truncate":"END"}`))
	_, err := c.Embed(ctxT(t), []string{"x <&> y"}, polygateway.WithParams(map[string]any{
		"dimensions": 4, "model": "other", "input": "nope", "user": "caller",
	}))
	if err != nil {
		t.Fatal(err)
	}
	body := f.requests()[0].Body
	if body["model"] != "text-embedding-test" || body["dimensions"] != float64(4) || body["user"] != "svc" ||
		body["truncate"] != "END" || body["encoding_format"] != "float" {
		t.Errorf("body = %v", body)
	}
	if in, ok := body["input"].([]any); !ok || len(in) != 1 || in[0] != "x <&> y" {
		t.Errorf("input = %v", body["input"])
	}
}

// TestEmbedOwnedFieldsInAnotherCaseNeverReachTheUpstream: a server that
// decodes as encoding/json matches member names in any case, the last one
// winning, so "Model" or "INPUT" from parameters or EXTRA_BODY would
// replace the source's model or the batch's inputs there: they are left
// out, as the exact names are.
func TestEmbedOwnedFieldsInAnotherCaseNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	c := newClient(t, env(f.URL(), "4", "EMBED__OPENAI__1__EXTRA_BODY", `{"Model":"other","INPUT":["never"]}`))
	if _, err := c.Embed(ctxT(t), []string{"x"}, polygateway.WithParams(map[string]any{"MODEL": "nope", "Input": "nope"})); err != nil {
		t.Fatal(err)
	}
	for k := range f.requests()[0].Body {
		if k != "model" && k != "input" && (strings.EqualFold(k, "model") || strings.EqualFold(k, "input")) {
			t.Errorf("the body carries %q beside the client's own field", k)
		}
	}
}

func TestEmbedNoAuthorizationForKeyNone(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	c := newClient(t, env(f.URL(), "4", "EMBED__OPENAI__1__API_KEY", "none"))
	if _, err := c.Embed(ctxT(t), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if auth := f.requests()[0].Auth; auth != "" {
		t.Errorf("Authorization = %q, want none", auth)
	}
}

func TestEmbedFailoverToSecondSource(t *testing.T) {
	t.Parallel()
	bad := newFake(t, 4, func(f *fakeEmbed) {
		f.respond = func(fakeReq) (int, string) { return 500, `{"error":{"message":"boom"}}` }
	})
	good := newFake(t, 4)
	e := env(bad.URL(), "4",
		"EMBED__OPENAI__2__BASE_URL", good.URL(), "EMBED__OPENAI__2__API_KEY", "sk-2",
		"EMBED__OPENAI__2__MODEL", "text-embedding-test", "EMBED__OPENAI__2__TIMEOUT_S", "10",
		"EMBED__SELECTOR", "round_robin")
	c := newClient(t, e)
	in := texts(12)
	for range 3 {
		resp, err := c.Embed(ctxT(t), in)
		if err != nil {
			t.Fatalf("Embed: %v", err)
		}
		wantVectors(t, resp.Vectors, in, 4)
		if resp.SourceName != "openai_2" {
			t.Errorf("SourceName %q", resp.SourceName)
		}
	}
}

func TestEmbedIsNeverCached(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	c := newClient(t, env(f.URL(), "4", "PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "ns", "PGW_CACHE_TTL_S", "60"))
	for range 2 {
		if _, err := c.Embed(ctxT(t), []string{"same"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestEmbedAfterClose(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	c, err := embed.FromEnv("EMBED", polygateway.WithEnv(env(f.URL(), "4")))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Embed(ctxT(t), []string{"a"}); !errors.Is(err, polygateway.ErrClientClosed) {
		t.Errorf("err = %v, want ErrClientClosed", err)
	}
}

// TestEmbedWithANilContextIsRejected: a nil context is a
// RequestRejectedError (code nil_context), not a panic, and nothing is sent.
func TestEmbedWithANilContextIsRejected(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	c := newClient(t, env(f.URL(), "4"))
	var noCtx context.Context // nil
	var rej *polygateway.RequestRejectedError
	if _, err := c.Embed(noCtx, []string{"a"}); !errors.As(err, &rej) || rej.Code != "nil_context" {
		t.Errorf("err = %v, want a RequestRejectedError with code nil_context", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

// Batches answered in different dimensions — here batch 1 fails over to a
// fallback whose model has 6 dimensions where the primary's has 4 — are
// never returned as one call's vectors: a ResultInvalidError of the batch
// that differs, naming both sources.
func TestEmbedBatchesOfDifferentDimensionsAreResultInvalid(t *testing.T) {
	t.Parallel()
	in := texts(8)
	primary := newFake(t, 4, func(f *fakeEmbed) { f.failures[in[4]] = 100 }) // batch 1 always 503
	other := newFake(t, 6)
	e := env(primary.URL(), "4", "EMBED__RETRY__MAX_ATTEMPTS", "2", "EMBED__RETRY__TIER_PATIENCE_S", "0",
		"EMBED__BACKUP__2__BASE_URL", other.URL(), "EMBED__BACKUP__2__API_KEY", "sk-2",
		"EMBED__BACKUP__2__MODEL", "other-embedding", "EMBED__BACKUP__2__TIMEOUT_S", "10", "EMBED__BACKUP__2__PRIORITY", "1")
	resp, err := newClient(t, e).Embed(ctxT(t), in)
	var invalid *polygateway.ResultInvalidError
	var be *embed.BatchError
	if !errors.As(err, &invalid) || !errors.As(err, &be) {
		t.Fatalf("Embed = (%+v, %v), want a ResultInvalidError in a BatchError", resp, err)
	}
	if be.Batch != 1 || be.Offset != 4 || invalid.Source != "backup_2" ||
		!strings.Contains(err.Error(), "openai_1") || !strings.Contains(err.Error(), "6 dimensions") {
		t.Fatalf("err = %v (batch %d, source %q), want batch 1 of backup_2 against openai_1", err, be.Batch, invalid.Source)
	}
	if len(other.requests()) != 1 {
		t.Errorf("the fallback got %d requests, want 1 (batch 1)", len(other.requests()))
	}
}

// TestEmbedHugeBatchSizeSendsOneBatch: a BATCH_SIZE near the largest int is
// a valid integer >= 1 (no upper bound is documented); a call of several
// texts is one batch, not a panic from the batch count wrapping.
func TestEmbedHugeBatchSizeSendsOneBatch(t *testing.T) {
	t.Parallel()
	for _, bs := range []string{strconv.Itoa(math.MaxInt), strconv.Itoa(math.MaxInt - 1)} {
		t.Run(bs, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, 4)
			c := newClient(t, env(f.URL(), bs))
			in := texts(3)
			resp, err := c.Embed(ctxT(t), in)
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			wantVectors(t, resp.Vectors, in, 4)
			if reqs := f.requests(); len(reqs) != 1 || len(reqs[0].Input) != 3 || len(resp.BatchCallIDs) != 1 {
				t.Errorf("upstream saw %d requests, BatchCallIDs %v; want one batch of 3", len(reqs), resp.BatchCallIDs)
			}
		})
	}
}
