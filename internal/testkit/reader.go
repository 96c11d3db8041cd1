package testkit

import "io"

// SplitReader hands out Data in reads of the sizes Sizes gives in turn
// (cycling); without Sizes, everything at once. A size byte s reads
// s%Mod+1 bytes when Mod > 0, else max(s, 1) bytes (never more than the
// caller asked for). It is how the decoders' tests and fuzz targets make
// an answer arrive in pieces. A SplitReader is read by one goroutine at a
// time.
type SplitReader struct {
	Data  []byte
	Sizes []byte
	Mod   int
	i     int
}

// Read hands out the next piece of Data.
func (r *SplitReader) Read(p []byte) (int, error) {
	if len(r.Data) == 0 {
		return 0, io.EOF
	}
	n := len(r.Data)
	if len(r.Sizes) > 0 {
		s := int(r.Sizes[r.i%len(r.Sizes)])
		if r.Mod > 0 {
			n = s%r.Mod + 1
		} else {
			n = max(s, 1)
		}
		r.i++
	}
	n = min(n, len(p), len(r.Data))
	copy(p, r.Data[:n])
	r.Data = r.Data[n:]
	return n, nil
}
