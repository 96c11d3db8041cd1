package core

import (
	"slices"
	"testing"
)

func TestImageBytesPartIsABase64DataURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mime string
		data []byte
		want string
	}{
		{"image/png", []byte{1, 2, 3}, "data:image/png;base64,AQID"},
		{"image/jpeg", []byte("hello"), "data:image/jpeg;base64,aGVsbG8="},
		{"image/webp", nil, "data:image/webp;base64,"},
	}
	for _, tc := range tests {
		p := ImageBytesPart(tc.mime, tc.data)
		if p.Type != PartImageURL || p.ImageURL != tc.want || p.Text != "" {
			t.Errorf("ImageBytesPart(%q, %v) = %+v, want image_url %q", tc.mime, tc.data, p, tc.want)
		}
	}
}

func TestMessageConstructors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got  Message
		role string
		text string
	}{
		{System("s"), RoleSystem, "s"},
		{User("u"), RoleUser, "u"},
		{Assistant("a"), RoleAssistant, "a"},
	}
	for _, tc := range tests {
		if tc.got.Role != tc.role || tc.got.Content != tc.text || tc.got.Parts != nil {
			t.Errorf("got %+v, want role %q content %q", tc.got, tc.role, tc.text)
		}
	}
	if p := TextPart("t"); p != (ContentPart{Type: PartText, Text: "t"}) {
		t.Errorf("TextPart = %+v", p)
	}
	if p := ImageURLPart("https://x/y.png"); p != (ContentPart{Type: PartImageURL, ImageURL: "https://x/y.png"}) {
		t.Errorf("ImageURLPart = %+v", p)
	}
}

func TestUserPartsCopiesItsParts(t *testing.T) {
	t.Parallel()
	parts := []ContentPart{TextPart("a"), ImageURLPart("https://x")}
	m := UserParts(parts...)
	if m.Role != RoleUser || !slices.Equal(m.Parts, parts) {
		t.Fatalf("UserParts = %+v", m)
	}
	parts[0].Text = "changed"
	if m.Parts[0].Text != "a" {
		t.Error("UserParts shares the caller's backing array")
	}
}
