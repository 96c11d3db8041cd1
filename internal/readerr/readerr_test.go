package readerr_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/polygateway/polygateway/internal/readerr"
)

func TestRecorderKeepsTheFirstFailureAndNotEOF(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name string
		r    io.Reader
		want error
	}{
		{"whole body", strings.NewReader(`{"a":1}`), nil},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(`{"a":1}`)), nil},
		{"error mid-body", io.MultiReader(strings.NewReader(`{"a"`), iotest.ErrReader(boom)), boom},
		{"error with the last data", iotest.DataErrReader(io.MultiReader(strings.NewReader(`{}`), iotest.ErrReader(boom))), boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &readerr.Recorder{R: tc.r}
			_, _ = io.ReadAll(rec)
			if !errors.Is(rec.Err, tc.want) || (tc.want == nil && rec.Err != nil) {
				t.Fatalf("Err = %v, want %v", rec.Err, tc.want)
			}
		})
	}
}
