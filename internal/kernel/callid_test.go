package kernel

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestCallIDsAre32HexDigitsAndDistinct: the id format telemetry and logs
// join on (32 lower-case hex digits), and no repeats in 100,000 ids.
func TestCallIDsAre32HexDigitsAndDistinct(t *testing.T) {
	t.Parallel()
	seen := make(map[string]struct{}, 100000)
	for range 100000 {
		id := NewCallID()
		if len(id) != 32 {
			t.Fatalf("id %q: %d characters, want 32", id, len(id))
		}
		if _, err := hex.DecodeString(id); err != nil || id != strings.ToLower(id) {
			t.Fatalf("id %q is not lower-case hex", id)
		}
		if _, dup := seen[id]; dup {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = struct{}{}
	}
}
