package ocr_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
)

// TestParseLayoutRefusesALayoutPastItsLimits: through ocr.FromEnv against
// the fake server, a *_middle.json of more blocks than MaxLayoutBlocks is
// a *polygateway.ResultInvalidError wrapping ErrBadLayout and ErrTooLarge
// that names Config.MaxLayoutBlocks (not retried: one /parse); at the
// limit the same layout is read whole. (TestAMillionBlockLayoutIsRefusedFast
// measures a million blocks under the default limit.)
func TestParseLayoutRefusesALayoutPastItsLimits(t *testing.T) {
	t.Parallel()
	doc := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"pdf_info":[{"page_idx":0,"page_size":[612,792],"para_blocks":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"type":"text","bbox":[1,1,2,2]}`)
		}
		b.WriteString(`]}]}`)
		return b.Bytes()
	}
	f := newFake(t)
	f.SetFaults(ocrfake.Faults{MiddleJSON: doc(20_000)})
	c := newClient(t, ocr.Config{MaxLayoutBlocks: 500}, nil, urls(f))
	_, err := c.ParseLayout(t.Context(), pngBytes)
	var invalid *polygateway.ResultInvalidError
	if !errors.As(err, &invalid) || !errors.Is(err, ocr.ErrTooLarge) || !errors.Is(err, ocr.ErrBadLayout) ||
		!strings.Contains(err.Error(), "MaxLayoutBlocks") {
		t.Fatalf("ParseLayout = %v, want a ResultInvalidError of ErrTooLarge naming MaxLayoutBlocks", err)
	}
	if n := f.Count(ocrfake.EndpointParse); n != 1 {
		t.Errorf("/parse was asked %d times, want 1 (an invalid result is not retried)", n)
	}

	f.SetFaults(ocrfake.Faults{MiddleJSON: doc(500)})
	res, err := c.ParseLayout(t.Context(), pngBytes)
	if err != nil || len(res.Elements) != 500 {
		t.Fatalf("at the limit: %v", err)
	}
}
