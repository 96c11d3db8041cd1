package embed

import (
	"errors"
	"testing"

	"github.com/polygateway/polygateway/core"
)

func TestEncodeRequestBody(t *testing.T) {
	t.Parallel()
	u := &upstream{format: EncodingBase64}
	src := &core.SourceConfig{Model: "emb-1"}
	got, err := u.encode(src, nil, []string{"a <b>", `q"uote`})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"emb-1","input":["a <b>","q\"uote"],"encoding_format":"base64"}`; string(got) != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	params := map[string]any{"dimensions": 64, "model": "x", "encoding_format": "float", "user": "p"}
	src.ExtraBody = map[string]any{"user": "e", "input": "y"}
	got, err = u.encode(src, params, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"emb-1","input":["a"],"dimensions":64,"encoding_format":"float","user":"e"}`; string(got) != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	if _, err := u.encode(src, map[string]any{"bad": func() {}}, []string{"a"}); err == nil {
		t.Error("an unencodable param was accepted")
	}
}

func TestUpstreamRejectsAnEmptyBatch(t *testing.T) {
	t.Parallel()
	u := &upstream{}
	src := &core.SourceConfig{Name: "s_1"}
	for _, texts := range [][]string{nil, {}} {
		_, _, err := u.embed(t.Context(), src, texts, nil)
		var rej *core.RequestRejectedError
		if !errors.As(err, &rej) {
			t.Errorf("embed(%v) = %v, want a RequestRejectedError", texts, err)
		}
	}
}
