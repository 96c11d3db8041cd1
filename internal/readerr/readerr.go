// Package readerr tells a failed read from a body that does not parse: a
// decoder reading through a Recorder reports a syntax error for a body cut
// by its reader's failure, and the Recorder keeps that failure.
package readerr

import (
	"errors"
	"io"
)

// Recorder reads R and remembers the first error other than io.EOF that R
// returned. It is used by one goroutine at a time.
type Recorder struct {
	// R is the reader read through.
	R io.Reader
	// Err is R's first error other than io.EOF (nil while there is none).
	Err error
}

// Read implements io.Reader.
func (r *Recorder) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && r.Err == nil {
		r.Err = err
	}
	return n, err
}
