package middleware

import (
	"reflect"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// FuzzCacheEntry reads random bytes as a stored cache entry (a value from
// a shared backend may be anything: another program's, a truncated write).
// decode never panics, and what it accepts encodes into bytes that decode
// to the same entry (a varint may be spelt in more than one way, so the
// bytes themselves may differ).
func FuzzCacheEntry(f *testing.F) {
	seeds := []cacheEntry{
		{},
		{FreshUntil: 1 << 40, Content: "hello", Model: "m", Provider: "p", SourceName: "p_1", FinishReason: "stop"},
		{FreshUntil: -5, Thinking: "why", Content: "{\"a\":1}\x00\xff", ToolCalls: []core.ToolCall{{Index: 1, ID: "c1", Type: "function", Name: "f", Arguments: `{"x":[1,2]}`}}},
	}
	for _, e := range seeds {
		b, err := e.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{cacheFormat})
	f.Add([]byte(`{"content":"a json value of another format"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e cacheEntry
		if !e.decode(b) {
			return
		}
		again, err := e.encode()
		if err != nil {
			t.Fatalf("an accepted entry does not encode: %v", err)
		}
		var e2 cacheEntry
		if !e2.decode(again) || !reflect.DeepEqual(e, e2) {
			t.Fatalf("entry %+v read back as %+v", e, e2)
		}
	})
}
