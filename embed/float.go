package embed

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// pow10 are the powers of ten exactly representable as float64.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat32 parses a JSON number as the nearest float32; ok is false
// for malformed or non-finite values.
func parseFloat32(tok []byte) (float32, bool) {
	if f, q, ok := fastFloat(tok, 0); ok && q == len(tok) {
		return f, true
	}
	return slowFloat32(tok)
}

// fastFloat parses the number starting at buf[p] and returns it with the
// index just past it. ok is false when the fast path does not apply (the
// caller then uses strconv): syntax outside JSON's number grammar, a mantissa above 2^53 (which
// includes more than 19 significant digits) or a decimal exponent beyond
// ±22, or a float64 result exactly on a float32 halfway point.
//
// Why it is exact (Clinger's fast path): a mantissa of at most 2^53 and a
// power of ten of at most 1e22 are exact float64 values, so one
// multiplication or division gives the correctly rounded float64 y of the
// decimal x. No float32 halfway point can lie strictly between x and y
// (it is itself a float64, and y is the float64 nearest x), so rounding y
// to float32 gives the float32 nearest x — unless y is such a halfway
// point, which is left to strconv. Results are never beyond float32's
// range (at most 2^53·1e22 < 3.4e38, at least 1e-22).
//
// Digits after the point are read eight at a time where eight are there
// (embeddings usually carry eight or nine), one at a time otherwise.
func fastFloat(buf []byte, p int) (float32, int, bool) {
	n := len(buf)
	neg := false
	if p < n && buf[p] == '-' {
		neg = true
		p++
	}
	var mant uint64
	exp := 0
	start := p
	for p < n {
		c := buf[p] - '0'
		if c > 9 {
			break
		}
		if mant > maxMantBefore1 {
			return 0, p, false
		}
		mant = mant*10 + uint64(c)
		p++
	}
	// JSON's integer part: one digit at least, and no leading zero.
	if intDigits := p - start; intDigits == 0 || intDigits > 1 && buf[start] == '0' {
		return 0, p, false
	}
	if p < n && buf[p] == '.' {
		p++
		fstart := p
		for p < n {
			if p+8 <= n && mant < maxMantBefore8 {
				if v, ok := eightDigits(buf[p:]); ok {
					mant = mant*1e8 + v
					exp -= 8
					p += 8
					continue
				}
			}
			c := buf[p] - '0'
			if c > 9 {
				break
			}
			if mant > maxMantBefore1 {
				return 0, p, false
			}
			mant = mant*10 + uint64(c)
			exp--
			p++
		}
		if p == fstart {
			return 0, p, false
		}
	}
	if p < n && (buf[p] == 'e' || buf[p] == 'E') {
		p++
		eneg := false
		if p < n && (buf[p] == '+' || buf[p] == '-') {
			eneg = buf[p] == '-'
			p++
		}
		estart, e := p, 0
		for ; p < n; p++ {
			c := buf[p] - '0'
			if c > 9 {
				break
			}
			if e < 10000 {
				e = e*10 + int(c)
			}
		}
		if p == estart {
			return 0, p, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if p < n && isNumByte(buf[p]) {
		return 0, p, false
	}
	if mant == 0 {
		if neg {
			return float32(math.Copysign(0, -1)), p, true
		}
		return 0, p, true
	}
	if mant > 1<<53 || exp < -22 || exp > 22 {
		return 0, p, false
	}
	f := float64(mant)
	if exp < 0 {
		f /= pow10[-exp]
	} else {
		f *= pow10[exp]
	}
	if math.Float64bits(f)&(1<<29-1) == 1<<28 {
		return 0, p, false
	}
	if neg {
		f = -f
	}
	return float32(f), p, true
}

// The largest mantissas that one more digit, or eight more, cannot make
// overflow a uint64.
const (
	maxMantBefore1 = (math.MaxUint64 - 9) / 10
	maxMantBefore8 = 1e11
)

// eightDigits reports whether b[:8] are eight ASCII digits and returns
// their value. b must hold at least eight bytes.
//
// The test and the conversion work on the eight bytes as one
// little-endian word: a byte is a digit when its high nibble is 3 and
// adding 6 keeps it 3; the conversion then combines neighbouring digits
// pairwise (tens and units, then hundreds, then ten-thousands) with three
// multiplications.
func eightDigits(b []byte) (uint64, bool) {
	v := binary.LittleEndian.Uint64(b)
	if v&0xF0F0F0F0F0F0F0F0|(v+0x0606060606060606)&0xF0F0F0F0F0F0F0F0>>4 != 0x3333333333333333 {
		return 0, false
	}
	v &= 0x0F0F0F0F0F0F0F0F
	v = v * (10<<8 + 1) >> 8                             // each 16-bit lane: two digits
	v = (v & 0x00FF00FF00FF00FF) * (100<<16 + 1) >> 16   // each 32-bit lane: four digits
	v = (v & 0x0000FFFF0000FFFF) * (10000<<32 + 1) >> 32 // eight digits
	return v, true
}

// slowFloat32 parses tok with strconv; underflow to zero or a denormal
// is kept, overflow and malformed numbers are not.
func slowFloat32(tok []byte) (float32, bool) {
	f, err := strconv.ParseFloat(string(tok), 32)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange || math.IsInf(f, 0) {
			return 0, false
		}
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return float32(f), true
}
