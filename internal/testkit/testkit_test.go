package testkit_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polygateway/polygateway/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reads returns the sizes of the reads r hands out to a reader asking for
// up to max bytes at a time.
func reads(t *testing.T, r io.Reader, max int) ([]int, string) {
	t.Helper()
	var sizes []int
	var got strings.Builder
	p := make([]byte, max)
	for {
		n, err := r.Read(p)
		if n > 0 {
			sizes = append(sizes, n)
			got.Write(p[:n])
		}
		if err == io.EOF {
			return sizes, got.String()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestSplitReaderReadsInTheGivenSizes(t *testing.T) {
	data := []byte("abcdefghijklmnopqrstuvwxyz")
	for _, tc := range []struct {
		name string
		r    *testkit.SplitReader
		max  int
		want []int
	}{
		{"no sizes: at once", &testkit.SplitReader{Data: data}, 64, []int{26}},
		{"no sizes: the caller's buffer", &testkit.SplitReader{Data: data}, 10, []int{10, 10, 6}},
		{"sizes cycle, 0 reads 1", &testkit.SplitReader{Data: data, Sizes: []byte{3, 0}}, 64, []int{3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 2}},
		{"Mod", &testkit.SplitReader{Data: data, Sizes: []byte{3, 61, 200}, Mod: 61}, 64, []int{4, 1, 18, 3}},
	} {
		sizes, got := reads(t, tc.r, tc.max)
		if got != string(data) || !slices.Equal(sizes, tc.want) {
			t.Errorf("%s: reads %v of %q, want %v of the data", tc.name, sizes, got, tc.want)
		}
	}
}

func TestLazyStreamIsAWholeSSEAnswer(t *testing.T) {
	ends := 0
	_, body := reads(t, testkit.NewLazyStream(10, 4, func() { ends++ }), 7)
	var content strings.Builder
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	for _, ev := range events[:len(events)-1] {
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &chunk); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		content.WriteString(chunk.Choices[0].Delta.Content)
	}
	if content.String() != strings.Repeat("y", 12) || events[len(events)-1] != "data: [DONE]" || ends != 1 {
		t.Errorf("content %q, last event %q, atEnd called %d times; want 3 chunks of 4 bytes, [DONE] and one call",
			content.String(), events[len(events)-1], ends)
	}
	if _, body := reads(t, testkit.NewLazyStream(4, 4, nil), 64); !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("without atEnd: %q", body)
	}
}

func TestLogsKeepsRecordsWithTheirAttributes(t *testing.T) {
	all := &testkit.Logs{}
	warn := testkit.NewLogsFrom(slog.LevelWarn)
	for _, h := range []*testkit.Logs{all, warn} {
		l := slog.New(h).With("dropped", true)
		l.Debug("d")
		l.Info("i", "k", 1)
		l.Warn("w", "k", "v")
	}
	if all.Count() != 3 || warn.Count() != 1 || warn.Enabled(context.Background(), slog.LevelInfo) {
		t.Errorf("counts %d and %d, want 3 and 1 (the second enabled from WARN only)", all.Count(), warn.Count())
	}
	if got := strings.Join(all.Messages(slog.LevelInfo), ","); got != "i,w" {
		t.Errorf("messages from INFO %q, want i,w", got)
	}
	w := all.Find("w")
	if len(w) != 1 || w[0].Level != slog.LevelWarn || w[0].Attrs["k"] != "v" || w[0].Attrs["dropped"] != "" {
		t.Errorf("Find(w) = %+v, want one WARN record with k=v and no attribute of the logger", w)
	}
}

func TestBufferTextLoggerWritesDebugRecords(t *testing.T) {
	var b testkit.Buffer
	b.TextLogger().Debug("hello", "k", "v")
	if s := b.String(); !strings.Contains(s, "level=DEBUG") || !strings.Contains(s, "msg=hello k=v") || b.Len() != len(s) {
		t.Errorf("logged %q", s)
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	start := time.Now()
	n := 0
	testkit.WaitFor(t, 5*time.Second, time.Millisecond, "three polls", func() bool { n++; return n == 3 })
	if n != 3 || time.Since(start) > 5*time.Second {
		t.Errorf("polled %d times", n)
	}
}

func TestContinuerContinuesThePrefill(t *testing.T) {
	c := testkit.NewContinuer(t, 5, false)
	body := `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"tok0 tok1"}],"continue_final_message":true}`
	resp, err := http.Post(c.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	s := string(raw)
	if strings.Contains(s, `"tok1"`) || !strings.Contains(s, `" tok2"`) || !strings.Contains(s, `" tok4"`) || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Errorf("continuation %q, want tok2 to tok4 and [DONE]", s)
	}
	if reqs := c.Requests(); len(reqs) != 1 || reqs[0]["continue_final_message"] != true {
		t.Errorf("requests %v", reqs)
	}
}

func TestCutAtReaderSplitsOnceAtItsOffset(t *testing.T) {
	data := []byte("abcdefghij")
	for _, tc := range []struct {
		at   int
		want []int
	}{{0, []int{10}}, {3, []int{3, 7}}, {10, []int{10}}, {42, []int{10}}} {
		sizes, got := reads(t, &testkit.CutAtReader{B: data, At: tc.at}, 64)
		if got != string(data) || !slices.Equal(sizes, tc.want) {
			t.Errorf("at %d: reads %v of %q, want %v of the data", tc.at, sizes, got, tc.want)
		}
	}
}

func TestFailAtReaderFailsAfterItsOffset(t *testing.T) {
	boom := io.ErrUnexpectedEOF
	r := &testkit.FailAtReader{B: []byte("abcdefghij"), At: 4, Err: boom}
	b, err := io.ReadAll(r)
	if string(b) != "abcd" || err != boom { //nolint:errorlint // the very error must come back
		t.Fatalf("ReadAll = %q, %v; want the first 4 bytes, then %v", b, err, boom)
	}
}
