package transport

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestADocumentOfManyChoicesOrToolCallsIsRefusedBeforeItIsRead: an answer
// of a million empty choices ("{}," each) or of a hundred thousand empty
// tool calls would take a hundred times its bytes once read into structs;
// it is refused as malformed, at a cost that does not grow with the
// elements, while answers of up to maxChoices choices and maxToolCalls
// tool calls, and long ones, are read.
//
// Not parallel: it reads the allocations the refusal made.
func TestADocumentOfManyChoicesOrToolCallsIsRefusedBeforeItIsRead(t *testing.T) {
	many := func(n int, elem string) string { return strings.TrimSuffix(strings.Repeat(elem+",", n), ",") }
	message := `{"role":"assistant","content":"ok"}`
	for _, tc := range []struct {
		name, body string
		refused    bool
	}{
		{"a million choices", `{"choices":[` + many(1_000_000, "{}") + `]}`, true},
		{"a million choices, one of another kind", `{"choices":[` + many(1_000_000, "{}") + `,1]}`, true},
		{"a hundred thousand tool calls", `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[` + many(100_000, "{}") + `]}}]}`, true},
		{"maxChoices choices", `{"choices":[{"index":0,"message":` + message + `},` + many(maxChoices-1, `{"index":1,"message":{"content":"`+strings.Repeat("x", 64)+`"}}`) + `]}`, false},
		{"maxToolCalls tool calls", `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[` + many(maxToolCalls, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`) + `]},"finish_reason":"tool_calls"}]}`, false},
		{"a long answer", `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("word ", 100_000) + `"},"finish_reason":"stop"}]}`, false},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got := outcome(doWith(t, readerTransport{status: 200, ctype: "application/json", length: -1, body: func() io.Reader { return bytes.NewReader([]byte(tc.body)) }}, false))
		runtime.ReadMemStats(&after)
		if refused := got.class != ""; refused != tc.refused {
			t.Errorf("%s: %+v, want refused %v", tc.name, got, tc.refused)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; tc.refused && alloc > 16*uint64(len(tc.body)) {
			t.Errorf("%s: refusing %d bytes allocated %d", tc.name, len(tc.body), alloc)
		}
	}
}
