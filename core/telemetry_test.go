package core_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

func TestMessagesJSONStoresInlineImagesAsDigests(t *testing.T) {
	t.Parallel()
	data := []byte("raw-image-bytes-that-must-not-leak")
	dataURL := core.ImageBytesPart("image/png", data).ImageURL
	msgs := []core.Message{
		core.System("be brief"),
		core.UserParts(core.TextPart("what is this?"), core.ImageBytesPart("image/png", data), core.ImageURLPart("https://example.com/cat.png")),
		{Role: core.RoleTool, Content: "42", Name: "calc", ToolCallID: "call_1"},
	}
	out := core.MessagesJSON(msgs)
	if strings.Contains(out, dataURL[len(dataURL)-20:]) || strings.Contains(out, "data:") {
		t.Fatalf("inline image leaked into telemetry: %s", out)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, out)
	}
	if len(got) != 3 {
		t.Fatalf("%d messages, want 3: %s", len(got), out)
	}
	if got[0]["role"] != "system" || got[0]["content"] != "be brief" {
		t.Errorf("message 0 = %v", got[0])
	}
	if _, has := got[0]["name"]; has {
		t.Errorf("empty name not omitted: %v", got[0])
	}
	parts, ok := got[1]["content"].([]any)
	if !ok || len(parts) != 3 {
		t.Fatalf("message 1 content = %v, want 3 parts", got[1]["content"])
	}
	sum := sha256.Sum256([]byte(dataURL))
	wantDigest := "sha256:" + hex.EncodeToString(sum[:])
	want := []map[string]any{
		{"type": "text", "text": "what is this?"},
		{"type": "image_url", "image_digest": wantDigest},
		{"type": "image_url", "image_url": "https://example.com/cat.png"},
	}
	for i, w := range want {
		p := parts[i].(map[string]any)
		if len(p) != len(w) {
			t.Errorf("part %d = %v, want %v", i, p, w)
			continue
		}
		for k, v := range w {
			if p[k] != v {
				t.Errorf("part %d %s = %v, want %v", i, k, p[k], v)
			}
		}
	}
	if got[2]["name"] != "calc" || got[2]["tool_call_id"] != "call_1" || got[2]["role"] != "tool" {
		t.Errorf("message 2 = %v", got[2])
	}
}

func TestMessagesJSONOfNoMessagesIsAnEmptyArray(t *testing.T) {
	t.Parallel()
	for _, msgs := range [][]core.Message{nil, {}} {
		if got := core.MessagesJSON(msgs); got != "[]" {
			t.Errorf("core.MessagesJSON(%v) = %q, want []", msgs, got)
		}
	}
}

func TestImageDigestIsTheSHA256OfTheURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tc := range tests {
		if got := core.ImageDigest(tc.url); got != tc.want {
			t.Errorf("imageDigest(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

// TestMessagesJSONRendersUntypedImagePartsAsImages: a part without a Type
// but with an ImageURL goes upstream as an image, so the row shows it as
// one — an inline one as its digest — not as an empty text part.
func TestMessagesJSONRendersUntypedImagePartsAsImages(t *testing.T) {
	t.Parallel()
	dataURL := core.ImageBytesPart("image/png", []byte("untyped-pixels")).ImageURL
	msgs := []core.Message{{Role: core.RoleUser, Parts: []core.ContentPart{{ImageURL: dataURL}, {ImageURL: "https://example.com/cat.png"}}}}
	var got []struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal([]byte(core.MessagesJSON(msgs)), &got); err != nil || len(got) != 1 || len(got[0].Content) != 2 {
		t.Fatalf("= %s (%v), want one message of two parts", core.MessagesJSON(msgs), err)
	}
	want := []map[string]any{
		{"type": "image_url", "image_digest": core.ImageDigest(dataURL)},
		{"type": "image_url", "image_url": "https://example.com/cat.png"},
	}
	for i, w := range want {
		if p := got[0].Content[i]; len(p) != len(w) || p["type"] != w["type"] || p["image_digest"] != w["image_digest"] || p["image_url"] != w["image_url"] {
			t.Errorf("part %d = %v, want %v", i, p, w)
		}
	}
}
