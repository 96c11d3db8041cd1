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

// CutAtReader hands out B in two reads, split at offset At (one read when
// At is 0 or past the end). It is read by one goroutine at a time.
type CutAtReader struct {
	B  []byte
	At int
}

// Read hands out the part before At, then the rest.
func (c *CutAtReader) Read(p []byte) (int, error) {
	if len(c.B) == 0 {
		return 0, io.EOF
	}
	n := len(c.B)
	if c.At > 0 && c.At < n {
		n = c.At
	}
	n = min(n, len(p))
	copy(p, c.B[:n])
	c.B = c.B[n:]
	c.At -= n
	return n, nil
}

// FailAtReader hands out the first At bytes of B, then fails with Err. It
// is read by one goroutine at a time.
type FailAtReader struct {
	B   []byte
	At  int
	Err error
}

// Read hands out what is left of the first At bytes, then Err.
func (f *FailAtReader) Read(p []byte) (int, error) {
	if f.At <= 0 {
		return 0, f.Err
	}
	n := min(len(p), f.At, len(f.B))
	copy(p, f.B[:n])
	f.B, f.At = f.B[n:], f.At-n
	return n, nil
}
