package configfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/configfile"
)

// splitReader returns data in two reads, split at offset at.
type splitReader struct {
	data []byte
	at   int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if r.at > 0 {
		n = min(n, r.at)
	}
	n = copy(p, r.data[:n])
	r.data, r.at = r.data[n:], max(0, r.at-n)
	return n, nil
}

// TestReadGivesWhatParseGivesHoweverTheBytesAreSplit: a file read from a
// reader, whatever its read boundaries, is the file Parse makes of its
// bytes; a read error mid-file is an error naming the file, never a file
// made of the bytes before it.
func TestReadGivesWhatParseGivesHoweverTheBytesAreSplit(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The scopes' settings are checked once: the reads are about bytes.
	opt, unchecked := configfile.WithVariables(vars), configfile.WithoutScopeCheck()
	for _, doc := range [][]byte{data, []byte(minimal)} {
		if _, err := configfile.Parse("gateway.yaml", doc, opt); err != nil {
			t.Fatal(err)
		}
		want, err := configfile.Parse("gateway.yaml", doc, opt, unchecked)
		if err != nil {
			t.Fatal(err)
		}
		readers := map[string]func() io.Reader{
			"one byte":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(doc)) },
			"half":      func() io.Reader { return iotest.HalfReader(bytes.NewReader(doc)) },
			"data, err": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(doc)) },
		}
		for at := 1; at < len(doc) && len(doc) < 1000; at++ {
			readers[fmt.Sprintf("split at %d", at)] = func() io.Reader { return &splitReader{data: doc, at: at} }
		}
		for name, r := range readers {
			got, err := configfile.Read("gateway.yaml", r(), opt, unchecked)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(got.Env(), want.Env()) || !reflect.DeepEqual(got.Scopes(), want.Scopes()) {
				t.Fatalf("%s: the file read differs from the file parsed", name)
			}
		}
	}
	for _, cut := range []int{0, 1, len(data) / 2, len(data) - 1} {
		r := io.MultiReader(bytes.NewReader(data[:cut]), iotest.ErrReader(errors.New("disk gone")))
		_, err := configfile.Read("gateway.yaml", r, opt)
		var ce *polygateway.ConfigError
		if !errors.As(err, &ce) || ce.Key != "gateway.yaml" || !strings.Contains(ce.Problem, "cannot read") || !strings.Contains(err.Error(), "disk gone") {
			t.Errorf("error after %d bytes: %v", cut, err)
		}
	}
	if _, err := configfile.Read("timeout.yaml", iotest.TimeoutReader(bytes.NewReader(data)), opt); err == nil {
		t.Error("a reader failing on its second read gave a file")
	}
	big := io.MultiReader(bytes.NewReader(data), strings.NewReader(strings.Repeat("#", configfile.MaxFileBytes)))
	var ce *polygateway.ConfigError
	if _, err := configfile.Read("big.yaml", big, opt); !errors.As(err, &ce) || !strings.Contains(ce.Problem, "larger than") {
		t.Errorf("a file beyond the limit: %v", err)
	}
}
