package telemetrytest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry"
)

// Reader reads back what a sink stored.
type Reader interface {
	// Rows returns every stored row ordered by created_at, then call_id. It
	// must keep working after the sink was closed.
	Rows(ctx context.Context) ([]core.TelemetryRecord, error)
}

// NewSinkFunc returns a fresh, empty sink and a Reader over its table. Every
// call must be independent of the others (its own file, schema or table):
// the suite's subtests run in parallel. The sink's queue must hold at least
// 2,000 records. Release resources with t.Cleanup; the suite closes the sink
// itself.
type NewSinkFunc func(t *testing.T) (core.TelemetrySink, Reader)

// dropCounter is implemented by sinks that count the records they drop.
type dropCounter interface{ Dropped() uint64 }

// timeout bounds every read and every Close of the suite.
const timeout = 30 * time.Second

// RunSinkSuite runs the conformance tests of the TelemetrySink port against
// the sinks newSink makes:
//
//   - every field (the 18 columns plus scope, created_at, degraded and queue_wait_ms) round-trips,
//     with nil and non-nil optional floats, unicode and large text;
//     created_at keeps at least microsecond precision;
//   - a record carrying RawMessages is stored with core.MessagesJSON of
//     them (inline images as digests, never raw);
//   - rows written become readable without Close (batches are flushed on
//     their own);
//   - inserts are idempotent on call_id: the first row written wins, within
//     one batch and across batches;
//   - Close writes everything queued;
//   - Write after Close returns telemetry.ErrClosed and does not panic;
//     Close is idempotent, also when called concurrently;
//   - concurrent writers lose nothing while the queue is not full, and a
//     Write racing with Close is either stored or refused with ErrClosed;
//   - a row whose text holds a NUL byte or invalid UTF-8 (an upstream's
//     answer or error) is stored, not dropped: its text as it was or, where
//     the database cannot hold such text, with each NUL byte and each invalid
//     sequence replaced by U+FFFD.
//
// A sink with a Dropped() uint64 method must report 0 drops throughout.
func RunSinkSuite(t *testing.T, newSink func(t *testing.T) (core.TelemetrySink, Reader)) {
	t.Helper()
	tests := []struct {
		name string
		run  func(*testing.T, NewSinkFunc)
	}{
		{"RoundTripsEveryField", testRoundTrip},
		{"RendersRawMessagesWithImagesAsDigests", testRendersRawMessages},
		{"RowsAppearWithoutClose", testRowsAppearWithoutClose},
		{"InsertIsIdempotentOnCallIDAndKeepsTheFirst", testIdempotent},
		{"CloseFlushesEverythingQueued", testCloseFlushes},
		{"WriteAfterCloseFailsWithErrClosed", testWriteAfterClose},
		{"CloseIsIdempotent", testCloseIdempotent},
		{"ConcurrentWritersLoseNothing", testConcurrentWriters},
		{"WritesRacingCloseAreStoredOrRefused", testWritesRacingClose},
		{"TextWithNULOrInvalidUTF8KeepsItsRow", testAwkwardText},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newSink)
		})
	}
}

// Base is the created_at of the suite's first record: nanoseconds and a
// non-UTC zone on purpose.
var Base = time.Date(2025, time.March, 14, 15, 9, 26, 535897932, time.FixedZone("UTC+5:30", 5*3600+30*60))

func ptr(v float64) *float64 { return &v }

// FullRecord returns a record with every field set, unicode text and,
// when big is true, large messages and response.
func FullRecord(id string, at time.Time, big bool) core.TelemetryRecord {
	uni := "héllo wörld — 你好，世界 — こんにちは — مرحبا بالعالم — 🚀🔥👩\u200d💻 — tab\there\nnew line — quote ' \" \\ % _ — '); DROP TABLE llm_calls; --"
	msgs := `[{"role":"system","content":"be terse"},{"role":"user","content":"` + strings.ReplaceAll(uni, "\n", `\n`) + `"},{"role":"user","content":[{"type":"image_url","digest":"sha256:9f86d081884c7d65"}]}]`
	resp := "answer: " + uni
	if big {
		msgs = `[{"role":"user","content":"` + strings.Repeat("lorem ipsum 数据 ", 16<<10) + `"}]`
		resp = strings.Repeat("0123456789abcdef€", 64<<10) // ~1.2 MB
	}
	return core.TelemetryRecord{
		CallID:           id,
		ParentCallID:     "parent-" + id,
		SessionID:        "session-☃",
		Model:            "qwen-max-ü",
		Provider:         "qwen",
		SourceName:       "qwen_1",
		Messages:         msgs,
		Response:         resp,
		Thinking:         "thinking… " + uni,
		PromptTokens:     1_234_567_890_123,
		CompletionTokens: 98_765,
		UsageSource:      "estimated",
		LatencyMS:        1234.567891,
		TTFTMS:           ptr(12.345678),
		MaxInterTokenMS:  ptr(0.000123),
		CacheHit:         false,
		Error:            "TransientError: upstream said «no» (503)",
		Cost:             ptr(0.000123456789),
		Scope:            "SEARCH",
		CreatedAt:        at,
		Degraded:         "stale_cache",
		QueueWaitMS:      2750.125,
	}
}

// SparseRecord returns a record with only the call id, the latency and the
// time set: every optional float nil, every string empty.
func SparseRecord(id string, at time.Time) core.TelemetryRecord {
	return core.TelemetryRecord{CallID: id, LatencyMS: 0.5, CreatedAt: at}
}

func testRoundTrip(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	cacheHit := SparseRecord("c-cache-hit", Base.Add(2*time.Second))
	cacheHit.CacheHit, cacheHit.Cost, cacheHit.Model = true, ptr(0), "m"
	want := []core.TelemetryRecord{
		FullRecord("a-full", Base, false),
		SparseRecord("b-sparse", Base.Add(time.Second)),
		cacheHit,
		FullRecord("d-big", Base.Add(3*time.Second), true),
		{CallID: "e-zero-floats", CreatedAt: Base.Add(4 * time.Second), TTFTMS: ptr(0), MaxInterTokenMS: ptr(0), Cost: ptr(0)},
		{CallID: "f-negative-and-tiny", CreatedAt: Base.Add(5 * time.Second).Add(time.Microsecond), LatencyMS: 5e-7,
			TTFTMS: ptr(1e-300), MaxInterTokenMS: ptr(math.MaxFloat64), Cost: ptr(-1.5), PromptTokens: -1},
	}
	for _, r := range want {
		mustWrite(t, sink, r)
	}
	closeSink(t, sink)
	got := readRows(t, rd)
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if d := Diff(want[i], got[i]); d != "" {
			t.Errorf("row %d (%s) differs:\n%s", i, want[i].CallID, d)
		}
	}
	checkNoDrops(t, sink)
}

func testRendersRawMessages(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	image := "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
	raw := []core.Message{
		{Role: "system", Content: "be terse ✓"},
		{Role: "user", Parts: []core.ContentPart{{Type: core.PartText, Text: "what is this?"}, core.ImageURLPart(image)}},
	}
	r := SparseRecord("raw", Base)
	r.RawMessages = raw
	mustWrite(t, sink, r)
	closeSink(t, sink)
	got := readRows(t, rd)
	if len(got) != 1 {
		t.Fatalf("read %d rows, want 1", len(got))
	}
	want := core.MessagesJSON(raw)
	if got[0].Messages != want {
		t.Fatalf("messages = %s\nwant %s", clip(got[0].Messages), clip(want))
	}
	if strings.Contains(got[0].Messages, "iVBORw0KGgo") {
		t.Fatal("the raw image reached the table")
	}
	checkNoDrops(t, sink)
}

func testRowsAppearWithoutClose(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	t.Cleanup(func() { closeSink(t, sink) })
	mustWrite(t, sink, SparseRecord("only", Base))
	deadline := time.Now().Add(timeout)
	for {
		if rows := readRows(t, rd); len(rows) == 1 && rows[0].CallID == "only" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a written row did not become readable within %s without Close", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkNoDrops(t, sink)
}

func testIdempotent(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	first := func(id string) core.TelemetryRecord {
		r := SparseRecord(id, Base)
		r.Response = "first"
		return r
	}
	later := func(id string, n int) core.TelemetryRecord {
		r := SparseRecord(id, Base.Add(time.Hour))
		r.Response, r.Error, r.Cost = fmt.Sprintf("later %d", n), "TransientError: later", ptr(float64(n))
		return r
	}
	// Same batch: both writes are queued back to back.
	mustWrite(t, sink, first("same-batch"))
	mustWrite(t, sink, later("same-batch", 1))
	mustWrite(t, sink, first("across-batches"))
	// Across batches: wait until the first rows are stored, then rewrite.
	waitRows(t, rd, 2)
	mustWrite(t, sink, later("across-batches", 2))
	mustWrite(t, sink, later("same-batch", 3))
	closeSink(t, sink)
	got := readRows(t, rd)
	if len(got) != 2 {
		t.Fatalf("read %d rows, want 2 (one per call_id): %v", len(got), ids(got))
	}
	for _, r := range got {
		if d := Diff(first(r.CallID), r); d != "" {
			t.Errorf("call_id %s: the first row did not win:\n%s", r.CallID, d)
		}
	}
	checkNoDrops(t, sink)
}

func testCloseFlushes(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	const n = 1000
	for i := range n {
		mustWrite(t, sink, SparseRecord(fmt.Sprintf("r%04d", i), Base.Add(time.Duration(i)*time.Millisecond)))
	}
	closeSink(t, sink)
	got := readRows(t, rd)
	if len(got) != n {
		t.Fatalf("after Close %d rows are stored, want %d", len(got), n)
	}
	for i, r := range got {
		if want := fmt.Sprintf("r%04d", i); r.CallID != want {
			t.Fatalf("row %d is %s, want %s", i, r.CallID, want)
		}
	}
	checkNoDrops(t, sink)
}

func testWriteAfterClose(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	mustWrite(t, sink, SparseRecord("before", Base))
	closeSink(t, sink)
	for range 3 {
		err := sink.Write(context.Background(), SparseRecord("after", Base))
		if !errors.Is(err, telemetry.ErrClosed) {
			t.Fatalf("Write after Close = %v, want telemetry.ErrClosed", err)
		}
	}
	if got := readRows(t, rd); len(got) != 1 || got[0].CallID != "before" {
		t.Fatalf("rows = %v, want [before]", ids(got))
	}
}

func testCloseIdempotent(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	mustWrite(t, sink, SparseRecord("x", Base))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			errs[i] = sink.Close(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Close #%d: %v", i, err)
		}
	}
	for range 2 {
		closeSink(t, sink)
	}
	if got := readRows(t, rd); len(got) != 1 {
		t.Fatalf("rows = %v, want [x]", ids(got))
	}
}

func testConcurrentWriters(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	const writers, each = 16, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r := SparseRecord(fmt.Sprintf("w%02d-%03d", w, i), Base.Add(time.Duration(w*each+i)*time.Microsecond))
				r.SourceName = fmt.Sprintf("src_%d", w)
				if err := sink.Write(context.Background(), r); err != nil {
					t.Errorf("Write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	closeSink(t, sink)
	got := readRows(t, rd)
	if len(got) != writers*each {
		t.Fatalf("%d rows stored, want %d", len(got), writers*each)
	}
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.CallID] = true
	}
	for w := range writers {
		for i := range each {
			if id := fmt.Sprintf("w%02d-%03d", w, i); !seen[id] {
				t.Fatalf("row %s is missing", id)
			}
		}
	}
	checkNoDrops(t, sink)
}

func testWritesRacingClose(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	const writers, most = 8, 200
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range most {
				id := fmt.Sprintf("race-%d-%03d", w, i)
				err := sink.Write(context.Background(), SparseRecord(id, Base.Add(time.Duration(i)*time.Microsecond)))
				if errors.Is(err, telemetry.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Write: %v", err)
					return
				}
				mu.Lock()
				accepted[id] = true
				mu.Unlock()
			}
		})
	}
	close(start)
	time.Sleep(time.Millisecond)
	closeSink(t, sink)
	wg.Wait()
	got := readRows(t, rd)
	stored := map[string]bool{}
	for _, r := range got {
		stored[r.CallID] = true
		if !accepted[r.CallID] {
			t.Errorf("row %s is stored but its Write did not return nil", r.CallID)
		}
	}
	for id := range accepted {
		if !stored[id] {
			t.Errorf("Write(%s) returned nil before Close but the row is missing", id)
		}
	}
	checkNoDrops(t, sink)
}

// Replaced is s with each NUL byte and each invalid UTF-8 sequence replaced
// by U+FFFD: how a sink whose database cannot hold them stores such text.
func Replaced(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func testAwkwardText(t *testing.T, newSink NewSinkFunc) {
	sink, rd := newSink(t)
	nul := FullRecord("a-nul", Base, false)
	nul.Response, nul.Thinking = "before \x00 after", "\x00"
	nul.Messages = `[{"role":"user","content":"nul \x00 inside"}]`
	invalid := FullRecord("b-invalid-utf8", Base.Add(time.Second), false)
	invalid.Error = "TransientError: http 500: upstream said \xff\xfe\xc3"
	invalid.Response = "half a rune: \xe4\xbd"
	both := SparseRecord("c-both", Base.Add(2*time.Second))
	both.SessionID, both.Model, both.Cost = "s\x00\xff", "m\x00", ptr(0.25)
	want := []core.TelemetryRecord{nul, invalid, both}
	for _, r := range want {
		mustWrite(t, sink, r)
	}
	closeSink(t, sink)
	got := readRows(t, rd)
	if len(got) != len(want) {
		t.Fatalf("read %d rows (%v), want %d: a row was lost for its text", len(got), ids(got), len(want))
	}
	for i, w := range want {
		r := w
		r.ParentCallID, r.SessionID, r.Model, r.Provider, r.SourceName = Replaced(r.ParentCallID), Replaced(r.SessionID), Replaced(r.Model), Replaced(r.Provider), Replaced(r.SourceName)
		r.Messages, r.Response, r.Thinking, r.UsageSource = Replaced(r.Messages), Replaced(r.Response), Replaced(r.Thinking), Replaced(r.UsageSource)
		r.Error, r.Scope, r.Degraded = Replaced(r.Error), Replaced(r.Scope), Replaced(r.Degraded)
		if d, dr := Diff(w, got[i]), Diff(r, got[i]); d != "" && dr != "" {
			t.Errorf("row %d (%s) differs from what was written:\n%sand from it with U+FFFD replacements:\n%s", i, w.CallID, d, dr)
		}
	}
	checkNoDrops(t, sink)
}

// Diff describes how got differs from want, field by field, or returns "".
// created_at must be equal to the microsecond (sub-microsecond digits may be
// truncated or rounded); floats must be equal exactly.
func Diff(want, got core.TelemetryRecord) string {
	var b strings.Builder
	str := func(name, w, g string) {
		if w != g {
			fmt.Fprintf(&b, "  %s: got %s, want %s\n", name, clip(g), clip(w))
		}
	}
	str("call_id", want.CallID, got.CallID)
	str("parent_call_id", want.ParentCallID, got.ParentCallID)
	str("session_id", want.SessionID, got.SessionID)
	str("model", want.Model, got.Model)
	str("provider", want.Provider, got.Provider)
	str("source_name", want.SourceName, got.SourceName)
	str("messages", want.Messages, got.Messages)
	str("response", want.Response, got.Response)
	str("thinking", want.Thinking, got.Thinking)
	str("usage_source", want.UsageSource, got.UsageSource)
	str("error", want.Error, got.Error)
	str("scope", want.Scope, got.Scope)
	str("degraded", want.Degraded, got.Degraded)
	if want.PromptTokens != got.PromptTokens {
		fmt.Fprintf(&b, "  prompt_tokens: got %d, want %d\n", got.PromptTokens, want.PromptTokens)
	}
	if want.CompletionTokens != got.CompletionTokens {
		fmt.Fprintf(&b, "  completion_tokens: got %d, want %d\n", got.CompletionTokens, want.CompletionTokens)
	}
	if want.LatencyMS != got.LatencyMS {
		fmt.Fprintf(&b, "  latency_ms: got %v, want %v\n", got.LatencyMS, want.LatencyMS)
	}
	if want.QueueWaitMS != got.QueueWaitMS {
		fmt.Fprintf(&b, "  queue_wait_ms: got %v, want %v\n", got.QueueWaitMS, want.QueueWaitMS)
	}
	optional := func(name string, w, g *float64) {
		switch {
		case w == nil && g == nil:
		case w == nil || g == nil:
			fmt.Fprintf(&b, "  %s: got %s, want %s\n", name, fmtPtr(g), fmtPtr(w))
		case *w != *g:
			fmt.Fprintf(&b, "  %s: got %v, want %v\n", name, *g, *w)
		}
	}
	optional("ttft_ms", want.TTFTMS, got.TTFTMS)
	optional("max_inter_token_ms", want.MaxInterTokenMS, got.MaxInterTokenMS)
	optional("cost", want.Cost, got.Cost)
	if want.CacheHit != got.CacheHit {
		fmt.Fprintf(&b, "  cache_hit: got %v, want %v\n", got.CacheHit, want.CacheHit)
	}
	if d := got.CreatedAt.Sub(want.CreatedAt); d <= -time.Microsecond || d >= time.Microsecond {
		fmt.Fprintf(&b, "  created_at: got %s, want %s\n", got.CreatedAt.Format(time.RFC3339Nano), want.CreatedAt.Format(time.RFC3339Nano))
	}
	return b.String()
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// clip shortens long values in failure messages.
func clip(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q…(%d bytes)", s[:80], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func ids(rows []core.TelemetryRecord) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.CallID
	}
	return out
}

func mustWrite(t *testing.T, sink core.TelemetrySink, r core.TelemetryRecord) {
	t.Helper()
	if err := sink.Write(context.Background(), r); err != nil {
		t.Fatalf("Write(%s): %v", r.CallID, err)
	}
}

func closeSink(t *testing.T, sink core.TelemetrySink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := sink.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// readRows reads every row and checks the documented order.
func readRows(t *testing.T, rd Reader) []core.TelemetryRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rows, err := rd.Rows(ctx)
	if err != nil {
		t.Fatalf("Rows: %v", err)
	}
	if !slices.IsSortedFunc(rows, func(a, b core.TelemetryRecord) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.CallID, b.CallID)
	}) {
		t.Fatalf("Rows are not ordered by created_at, call_id: %v", ids(rows))
	}
	return rows
}

// waitRows waits until at least n rows are readable.
func waitRows(t *testing.T, rd Reader, n int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for len(readRows(t, rd)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d rows readable after %s", n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkNoDrops(t *testing.T, sink core.TelemetrySink) {
	t.Helper()
	if dc, ok := sink.(dropCounter); ok {
		if n := dc.Dropped(); n != 0 {
			t.Errorf("Dropped() = %d, want 0", n)
		}
	}
}
