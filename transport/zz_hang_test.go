package transport

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestZZHang(t *testing.T) {
	files, _ := filepath.Glob("/tmp/fz/*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		if len(lines) < 2 {
			continue
		}
		arg := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		s, err := strconv.Unquote(arg)
		if err != nil {
			t.Logf("skip %s: %v", f, err)
			continue
		}
		done := make(chan struct{})
		go func() {
			var l lexer
			var c chunk
			if parseChunk(&l, &c, []byte(s)) {
				var a assembler
				p := openAIProfile()
				a.reset(&p, false, "m")
				a.apply(&l, &c)
				a.end()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatalf("hang on %q", s)
		}
	}
}
