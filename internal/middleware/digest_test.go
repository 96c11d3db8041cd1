package middleware

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// streamedKey is the cache key as the fields fed one by one to a hash
// compute it: the definition the buffered build must agree with, so that
// keys already in a shared cache stay valid.
func streamedKey(prefix, namespace string, call *core.Call) string {
	ns := call.CacheNamespace
	if ns == "" {
		ns = namespace
	}
	h := sha256.New()
	field := func(h hash.Hash, s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(h, prefix)
	field(h, ns)
	field(h, call.CacheSalt)
	field(h, call.Structured)
	for _, m := range call.Messages {
		field(h, m.Role)
		field(h, m.Name)
		field(h, m.ToolCallID)
		for _, tc := range m.ToolCalls {
			for _, s := range []string{"t", tc.ID, tc.Type, tc.Name, tc.Arguments} {
				field(h, s)
			}
		}
		if len(m.Parts) == 0 {
			field(h, "s")
			field(h, m.Content)
			continue
		}
		field(h, "p")
		for _, p := range m.Parts {
			// An untyped part with a URL is an image, as sent upstream.
			if p.Type == core.PartImageURL || p.Type == "" && p.ImageURL != "" {
				field(h, core.PartImageURL)
				sum := sha256.Sum256([]byte(p.ImageURL))
				h.Write(sum[:])
				field(h, p.Detail)
			} else {
				field(h, p.Type)
				field(h, p.Text)
			}
		}
	}
	if len(call.Params) > 0 {
		b, _ := json.Marshal(call.Params)
		field(h, string(b))
	}
	return "pgw:" + ns + ":" + hex.EncodeToString(h.Sum(nil))
}

// TestCacheKeysEqualTheFieldByFieldHash: the key built in one buffer is the
// hash of the same fields written one by one, for every kind of message
// part, tool calls, params, namespaces and a conversation larger than the
// pooled buffer.
func TestCacheKeysEqualTheFieldByFieldHash(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("long context ", 10000)
	calls := []*core.Call{
		{Messages: []core.Message{core.User("hello")}},
		{Messages: []core.Message{core.System("be brief"), core.User("hi")}, CacheSalt: "s1", Structured: `{"type":"object"}`},
		{Messages: []core.Message{{Role: core.RoleUser, Parts: []core.ContentPart{
			{Type: core.PartText, Text: "what is this?"},
			{Type: core.PartImageURL, ImageURL: "data:image/png;base64,AAAA", Detail: "low"},
			{ImageURL: "https://example.com/untyped.png"},
		}}}, CacheNamespace: "tenant-a"},
		{Messages: []core.Message{
			{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Type: "function", Name: "f", Arguments: `{"x":1}`}}},
			{Role: core.RoleTool, ToolCallID: "c1", Name: "f", Content: "42"},
		}, Params: map[string]any{"temperature": 0.2, "stop": []string{"\n"}}},
		{Messages: []core.Message{core.User(long)}},
		{},
	}
	for _, n := range []int{keyChunk - 73, keyChunk - 72, keyChunk - 64, keyChunk, keyChunk + 1, 2 * keyChunk} {
		// Sizes around the chunk: the field's length prefix or its
		// content straddles the edge, or the key ends exactly on it.
		calls = append(calls, &core.Call{Messages: []core.Message{core.User(strings.Repeat("x", n))}})
	}
	for i, call := range calls {
		for range 2 { // the second time through a reused buffer
			got := keyOf("pfx", "ns", call)
			if want := streamedKey("pfx", "ns", call); got != want {
				t.Fatalf("call %d: key %s, want %s", i, got, want)
			}
		}
		// A key abandoned halfway (params that cannot be encoded) leaves
		// nothing behind for the next one.
		bad := &core.Call{Messages: call.Messages, Params: map[string]any{"f": func() {}}}
		if _, ok := cacheKey("pfx", "ns", bad); ok {
			t.Fatal("a call whose params cannot be encoded got a key")
		}
		if got, want := keyOf("pfx", "ns", call), streamedKey("pfx", "ns", call); got != want {
			t.Fatalf("call %d after an abandoned key: key %s, want %s", i, got, want)
		}
	}
}
