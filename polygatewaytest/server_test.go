package polygatewaytest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/internal/testkit"
)

func TestScriptOrdering(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithScript(ServerError(500), RateLimited("1"), BadKey(), OK()))
	want := []int{500, 429, 401, 200, 200, 200}
	for i, code := range want {
		resp, _ := mustPost(t, s, plainReq)
		if resp.StatusCode != code {
			t.Errorf("request %d: status %d, want %d", i, resp.StatusCode, code)
		}
	}
}

func TestScriptLastWins(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithFunc(func(RequestInfo) Behavior { return BadKey() }), WithScript(ServerError(500)))
	resp, _ := mustPost(t, s, plainReq)
	if resp.StatusCode != 500 {
		t.Errorf("status %d, want the later WithScript", resp.StatusCode)
	}
}

func TestFunc(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var infos []RequestInfo
	s := NewServer(t, WithFunc(func(r RequestInfo) Behavior {
		mu.Lock()
		infos = append(infos, r)
		mu.Unlock()
		if r.Index == 1 {
			return ContextLength()
		}
		return OK()
	}))
	before := time.Now()
	mustPost(t, s, plainReq)
	resp, _ := mustPost(t, s, usageReq)
	if resp.StatusCode != 400 {
		t.Errorf("second request status %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(infos) != 2 {
		t.Fatalf("%d calls", len(infos))
	}
	a, b := infos[0], infos[1]
	if a.Index != 0 || a.Model != "m-req" || a.Stream || a.IncludeUsage || a.Messages != 1 || string(a.Body) != plainReq {
		t.Errorf("first %+v", a)
	}
	if b.Index != 1 || !b.Stream || !b.IncludeUsage || b.Messages != 2 || b.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("second %+v", b)
	}
	if a.Arrival.Before(before) || b.Arrival.Before(a.Arrival) {
		t.Errorf("arrivals %v %v", a.Arrival, b.Arrival)
	}
}

func TestFlap(t *testing.T) {
	t.Parallel()
	const down, up = 200 * time.Millisecond, 200 * time.Millisecond
	s := NewServer(t, WithFlap(down, up, ServerError(503)))
	var codes []int
	for time.Since(s.Started()) < 2*(down+up) {
		resp, _ := mustPost(t, s, plainReq)
		codes = append(codes, resp.StatusCode)
		time.Sleep(10 * time.Millisecond)
	}
	arr := s.Arrivals()
	if len(arr) != len(codes) {
		t.Fatalf("%d arrivals for %d requests", len(arr), len(codes))
	}
	var downs, ups int
	for i, at := range arr {
		phase := at.Sub(s.Started()) % (down + up)
		want := 200
		if phase < down {
			want = 503
			downs++
		} else {
			ups++
		}
		if codes[i] != want {
			t.Errorf("request at %v: status %d, want %d", at.Sub(s.Started()), codes[i], want)
		}
	}
	if downs == 0 || ups == 0 || codes[0] != 503 {
		t.Errorf("downs %d ups %d first %d", downs, ups, codes[0])
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithConcurrencyLimit(2, RateLimited("1")), WithScript(Hang(), Hang(), OK()), WithAttemptLog(16))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := postCtx(ctx, t, s, plainReq)
			if err == nil {
				resp.Body.Close()
				t.Error("hanging request answered")
			}
		})
	}
	// A request is in flight from its first byte but admitted only once its
	// body is read; its attempt is logged after admission.
	testkit.WaitFor(t, 5*time.Second, 2*time.Millisecond, "2 admitted", func() bool { return len(s.Attempts()) == 2 })
	for i := range 3 {
		resp, _ := mustPost(t, s, plainReq)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("over-limit request %d: %d", i, resp.StatusCode)
		}
	}
	if s.MaxInFlight() < 3 {
		t.Errorf("MaxInFlight %d", s.MaxInFlight())
	}
	cancel()
	wg.Wait()
	testkit.WaitFor(t, 5*time.Second, 2*time.Millisecond, "0 in flight", func() bool { return s.InFlight() == 0 })
	// Rejected requests did not consume the script: the next admitted one
	// gets the third entry.
	resp, _ := mustPost(t, s, plainReq)
	if resp.StatusCode != 200 {
		t.Errorf("after release: %d", resp.StatusCode)
	}
}

func TestConcurrencyLimitParallel(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithConcurrencyLimit(3, RateLimited("1")), WithBehavior(OK().WithLatency(300*time.Millisecond)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for range 8 {
		wg.Go(func() {
			resp, _ := mustPost(t, s, plainReq)
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[200] > 3 || counts[200] == 0 || counts[200]+counts[429] != 8 {
		t.Errorf("status counts %v", counts)
	}
}

func TestObservability(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithBodyHistory(3), WithBehavior(OK().WithLatency(100*time.Millisecond)))
	if s.Requests() != 0 || s.LastBody() != nil || len(s.Bodies()) != 0 {
		t.Fatal("fresh server not empty")
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			mustPost(t, s, `{"model":"m`+string(rune('0'+i))+`","messages":[]}`)
		})
	}
	wg.Wait()
	if s.Requests() != 4 || len(s.Arrivals()) != 4 || s.InFlight() != 0 {
		t.Errorf("Requests %d Arrivals %d InFlight %d", s.Requests(), len(s.Arrivals()), s.InFlight())
	}
	if m := s.MaxInFlight(); m < 2 || m > 4 {
		t.Errorf("MaxInFlight %d", m)
	}
	if b := s.Bodies(); len(b) != 3 {
		t.Errorf("%d bodies kept, want 3", len(b))
	}
	mid := time.Now()
	mustPost(t, s, `{"model":"last","messages":[]}`)
	if h := s.Hits(mid); h != 1 {
		t.Errorf("Hits(mid) %d", h)
	}
	if h := s.Hits(s.Started()); h != 5 {
		t.Errorf("Hits(start) %d", h)
	}
	if !strings.Contains(string(s.LastBody()), `"last"`) {
		t.Errorf("LastBody %s", s.LastBody())
	}
	bodies := s.Bodies()
	if !strings.Contains(string(bodies[2]), `"last"`) {
		t.Errorf("Bodies not oldest-first: %q", bodies)
	}
	arr := s.Arrivals()
	for i := 1; i < len(arr); i++ {
		if arr[i].Before(arr[i-1]) {
			t.Errorf("arrivals out of order")
		}
	}

	s.ResetStats()
	if s.Requests() != 0 || len(s.Arrivals()) != 0 || len(s.Bodies()) != 0 || s.MaxInFlight() != 0 || s.Hits(time.Time{}) != 0 {
		t.Errorf("after ResetStats: %d %d %d %d", s.Requests(), len(s.Arrivals()), len(s.Bodies()), s.MaxInFlight())
	}
	mustPost(t, s, plainReq)
	if s.Requests() != 1 || s.MaxInFlight() != 1 {
		t.Errorf("after ResetStats and one request: %d %d", s.Requests(), s.MaxInFlight())
	}
}

func TestCloseIdempotentAndURL(t *testing.T) {
	t.Parallel()
	s := New()
	if !strings.HasSuffix(s.URL(), "/v1") || !strings.HasPrefix(s.URL(), "http://") {
		t.Errorf("URL %q", s.URL())
	}
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(plainReq))
	if err != nil {
		t.Fatal(err)
	}
	var c completion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Error(err)
	}
	resp.Body.Close()
	s.Close()
	s.Close()
	http.DefaultClient.CloseIdleConnections()
}

func TestMostWithinCountsTheBusiestWindow(t *testing.T) {
	t.Parallel()
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[i] = time.Unix(0, 0).Add(time.Duration(m) * time.Millisecond)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
	}{
		{"none", nil, time.Second, 0},
		{"one", at(5), time.Second, 1},
		{"a zero window holds nothing", at(0, 0), 0, 0},
		{"all within", at(0, 100, 900), time.Second, 3},
		{"the window is half-open", at(0, 1000), time.Second, 1},
		{"the busiest window is not the first", at(0, 2000, 2100, 2200, 3500), time.Second, 3},
		{"the 0, 1, 3, 7 s schedule in 3 s", at(0, 1000, 3000, 7000), 3 * time.Second, 2},
		{"five in half a second", at(0, 100, 200, 300, 400), 3 * time.Second, 5},
	} {
		if got := MostWithin(tt.times, tt.w); got != tt.want {
			t.Errorf("%s: MostWithin = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestNewRawStreamSendsThePayloadsAsGiven(t *testing.T) {
	t.Parallel()
	srv := NewRawStream(t, ContentChunk(`say "hi"`), `{"choices":[{"delta":{"cont`, FinishChunk, "[DONE]")
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := "data: " + ContentChunk(`say "hi"`) + "\n\ndata: {\"choices\":[{\"delta\":{\"cont\n\ndata: " + FinishChunk + "\n\ndata: [DONE]\n\n"
	if resp.Header.Get("Content-Type") != "text/event-stream" || string(body) != want {
		t.Fatalf("%s %q, want %q", resp.Header.Get("Content-Type"), body, want)
	}
	var c struct {
		Choices []struct{ Delta struct{ Content string } }
	}
	if err := json.Unmarshal([]byte(ContentChunk(`say "hi"`)), &c); err != nil || c.Choices[0].Delta.Content != `say "hi"` {
		t.Fatalf("ContentChunk decodes to %+v, %v", c, err)
	}
}
