package transport

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodingJSONString is what an encoding/json Encoder without HTML
// escaping writes for s.
func encodingJSONString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "q\"b\\s/", "\x00\x01\x1f\x7f", "é中文🙂", "\u2028\u2029", "bad\xffutf8\xc3", "<>&", "\t\r\n\b\f", "\xed\xa0\x80"} {
		if got, want := AppendJSONString(nil, s), encodingJSONString(s); !bytes.Equal(got, want) {
			t.Errorf("AppendJSONString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x1f", "\u2028", "\xff", "中文", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendJSONString([]byte("x"), s), append([]byte("x"), encodingJSONString(s)...); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSONString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}
