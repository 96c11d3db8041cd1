package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// NewSSEReader returns a reader of r whose single events may hold up to
// maxEvent bytes (≤ 0 means DefaultMaxEventBytes).
func NewSSEReader(r io.Reader, maxEvent int) *SSEReader {
	s := &SSEReader{}
	s.Reset(r, maxEvent)
	return s
}

// readAllEvents drains r and returns the data of each event and the final error.
func readAllEvents(t *testing.T, r *SSEReader) ([]string, []SSEEvent, error) {
	t.Helper()
	var data []string
	var evs []SSEEvent
	for i := 0; i < 100000; i++ {
		ev, err := r.Next()
		if err != nil {
			return data, evs, err
		}
		data = append(data, string(ev.Data))
		cp := *ev
		cp.Data = append([]byte(nil), ev.Data...)
		evs = append(evs, cp)
	}
	t.Fatal("too many events")
	return nil, nil, nil
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200<<10) // > 64 KiB, the bufio.Scanner default
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"bare cr", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"mixed endings", "data: a\r\n\rdata: b\n\r\n", []string{"a", "b"}},
		{"no space after colon", "data:a\n\ndata:  b\n\n", []string{"a", " b"}},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}},
		{"comments skipped", ": keep-alive\n\n: ping\ndata: x\n\n", []string{"x"}},
		{"event and id tolerated", "event: message\nid: 7\nretry: 100\ndata: x\n\n", []string{"x"}},
		{"unknown field ignored", "foo: bar\ndata: x\n\n", []string{"x"}},
		{"field without colon", "data\n\n", []string{""}},
		{"no final blank line", "data: a\n\ndata: [DONE]\n", []string{"a", "[DONE]"}},
		{"no final newline", "data: a\n\ndata: [DONE]", []string{"a", "[DONE]"}},
		{"blank lines only", "\n\n\r\n", nil},
		{"big event", "data: " + big + "\n\n", []string{big}},
		{"utf8", "data: 你好，世界\n\n", []string{"你好，世界"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []string{"whole", "onebyte", "half"} {
				var r io.Reader = strings.NewReader(tt.in)
				switch mode {
				case "onebyte":
					r = iotest.OneByteReader(r)
				case "half":
					r = iotest.HalfReader(r)
				}
				got, _, err := readAllEvents(t, NewSSEReader(r, 0))
				if !errors.Is(err, io.EOF) {
					t.Fatalf("%s: err = %v, want io.EOF", mode, err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("%s: got %d events %q, want %q", mode, len(got), trunc(got), trunc(tt.want))
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Fatalf("%s: event %d = %q, want %q", mode, i, trunc1(got[i]), trunc1(tt.want[i]))
					}
				}
			}
		})
	}
}

func trunc1(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func trunc(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = trunc1(s)
	}
	return out
}

func TestSSEReaderEventFields(t *testing.T) {
	t.Parallel()
	in := "event: error\nid: 42\ndata: {\"error\":{}}\n\ndata: x\n\ndata: cut"
	_, evs, err := readAllEvents(t, NewSSEReader(strings.NewReader(in), 0))
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("got %d events", len(evs))
	}
	if evs[0].Event != "error" || evs[0].ID != "42" {
		t.Fatalf("event fields = %q %q", evs[0].Event, evs[0].ID)
	}
	if evs[1].Event != "" || evs[1].ID != "" || evs[1].Unterminated {
		t.Fatalf("second event fields leaked: %+v", evs[1])
	}
	if !evs[2].Unterminated || string(evs[2].Data) != "cut" {
		t.Fatalf("last event = %+v, want unterminated cut", evs[2])
	}
}

func TestSSEReaderTooLarge(t *testing.T) {
	t.Parallel()
	in := "data: " + strings.Repeat("y", 5000) + "\n\n"
	r := NewSSEReader(iotest.HalfReader(strings.NewReader(in)), 1024)
	_, err := r.Next()
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
	if _, err2 := r.Next(); !errors.Is(err2, ErrEventTooLarge) {
		t.Fatalf("sticky err = %v", err2)
	}
	// Many small data lines adding up past the bound.
	in = strings.Repeat("data: "+strings.Repeat("z", 100)+"\n", 50) + "\n"
	r = NewSSEReader(strings.NewReader(in), 1024)
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("multi-line err = %v, want ErrEventTooLarge", err)
	}
}

func TestSSEReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := NewSSEReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 0)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("first = %v %v", ev, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	// Data and error in the same Read.
	r = NewSSEReader(iotest.DataErrReader(strings.NewReader("data: a\n\n")), 0)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("data+EOF = %v %v", ev, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want EOF", err)
	}
}

func TestSSEReaderSplitCRLF(t *testing.T) {
	t.Parallel()
	// A CR at the end of one read and its LF at the start of the next must
	// count as one line ending, not two (which would dispatch early).
	chunks := []string{"data: a\r", "\ndata: b\r", "\n\r", "\n"}
	got, _, err := readAllEvents(t, NewSSEReader(&chunkReader{chunks: chunks}, 0))
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "a\nb" {
		t.Fatalf("got %q, want [\"a\\nb\"]", got)
	}
}

// Buffered is true only when the bytes already read hold an event Next
// will dispatch: what Next passes over (comments, blank lines, an event
// without data) must not keep a relay from flushing before it waits.
func TestSSEReaderBufferedOnlyForADispatchableEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rest string // what follows the first event in the one read
		want bool
	}{
		{"", false},
		{": keep-alive\n\n", false},
		{"\n\n", false},
		{"\r\n\r\n", false},
		{"event: ping\n\n", false},
		{"id: 7\nretry: 10\n\n", false},
		{"datum: x\n\n", false},
		{": data: x\n\n", false},
		{"data: b\n", false},
		{"data: b\r", false},
		{"data: b\n\n", true},
		{"data: b\r\n\r\n", true},
		{"data: b\r\r", true},
		{"data\n\n", true},
		{": c\n\n\nevent: x\ndata:b\n\n", true},
	} {
		// strings.Reader hands out everything in the first read, and the
		// end of the input only on the next one.
		r := NewSSEReader(strings.NewReader("data: a\n\n"+tc.rest), 0)
		if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
			t.Fatalf("%q: first event %v, %v", tc.rest, ev, err)
		}
		if got := r.Buffered(); got != tc.want {
			t.Errorf("after the first event, with %q still to read: Buffered() = %v, want %v", tc.rest, got, tc.want)
		}
	}
}

func TestSSEReaderSkipsOneLeadingBOM(t *testing.T) {
	t.Parallel()
	// The EventSource specification ignores one byte order mark at the
	// start of the stream; read as part of the first field's name, it
	// would lose the first event. Only one, and only at the start.
	const bom = "\xEF\xBB\xBF"
	tests := []struct {
		name, in string
		want     []string
	}{
		{"lf", bom + "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", bom + "data: a\r\n\r\n", []string{"a"}},
		{"comment first", bom + ": hi\n\ndata: a\n\n", []string{"a"}},
		{"two BOMs", bom + bom + "data: a\n\ndata: b\n\n", []string{"b"}},
		{"BOM later", "data: a\n\n" + bom + "data: b\n\n", []string{"a"}},
		{"BOM in data", "data: " + bom + "a\n\n", []string{bom + "a"}},
		{"BOM only", bom, nil},
		{"part of a BOM", "\xEF\xBB", nil},
		{"part of a BOM, then data", "\xEF\xBBdata: a\n\n", nil},
	}
	for _, tt := range tests {
		for _, mode := range []string{"whole", "onebyte", "half", "data+EOF"} {
			var r io.Reader = strings.NewReader(tt.in)
			switch mode {
			case "onebyte":
				r = iotest.OneByteReader(r)
			case "half":
				r = iotest.HalfReader(r)
			case "data+EOF":
				r = iotest.DataErrReader(r)
			}
			got, _, err := readAllEvents(t, NewSSEReader(r, 0))
			if !errors.Is(err, io.EOF) || strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("%s, %s: events %q (%v), want %q", tt.name, mode, got, err, tt.want)
			}
		}
	}
}

// chunkReader returns exactly one chunk per Read.
type chunkReader struct {
	chunks []string
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func FuzzSSE(f *testing.F) {
	seeds := []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		"data: a\r\rdata: b\r\n\r\n: c\n\n",
		"event: error\ndata: {\"error\":{\"message\":\"x\",\"code\":400}}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"<think>a</th\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"ink>b\"},\"finish_reason\":\"stop\"}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
		"data: {\"base_resp\":{\"status_code\":1002,\"status_msg\":\"rate\"}}\n\n",
		"data: {\"a\":\"\\ud83d\\ude00\\u00e9\"}\n\n",
		"data: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n\n",
		"\xEF\xBB\xBFdata: {\"choices\":[{\"delta\":{\"content\":\"Hello\"}}]}\n\ndata: [DONE]\n\n",
		"\xEF\xBBdata: a\n\n",
		"data: a\r\ndata: b\n\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(3))
		f.Add([]byte(s), uint8(0)) // one byte at a time
	}
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		n := int(step%16) + 1
		r := NewSSEReader(&stepReader{b: in, n: n}, 4096)
		var (
			c   wireChunk
			asm assembler
		)
		prof := openAIProfile()
		prof.ThinkingFields = append(prof.ThinkingFields, "think_tags")
		asm.reset(&prof, false, "m", nil)
		for i := 0; i < 10000; i++ {
			ev, err := r.Next()
			if err != nil {
				break
			}
			// CR always ends a line, so it never appears inside data.
			if bytes.IndexByte(ev.Data, '\r') >= 0 {
				t.Fatalf("CR inside data %q", ev.Data)
			}
			if decodeChunk(ev.Data, &c) {
				if _, err := asm.apply(&c); err != nil {
					t.Fatal(err)
				}
			}
			_ = parseEnvelope(ev.Data)
		}
		asm.end()
		// However the input is split, the reader sees the same events.
		if got, want := sseEvents(&stepReader{b: in, n: n}), sseEvents(bytes.NewReader(in)); !slices.Equal(got, want) {
			t.Fatalf("read %d bytes at a time: %q, read whole: %q", n, got, want)
		}
	})
}

// sseEvents returns the events of r, each as its name, id, data and
// whether it was terminated, up to the first error.
func sseEvents(r io.Reader) []string {
	sr := NewSSEReader(r, 4096)
	var out []string
	for range 10000 {
		ev, err := sr.Next()
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		out = append(out, fmt.Sprintf("%q %q %q %v", ev.Event, ev.ID, ev.Data, ev.Unterminated))
	}
	return out
}

// stepReader returns at most n bytes per Read.
type stepReader struct {
	b []byte
	n int
}

func (s *stepReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), s.n, len(s.b))
	copy(p, s.b[:k])
	s.b = s.b[k:]
	return k, nil
}
