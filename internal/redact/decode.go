package redact

import (
	"unicode/utf16"
	"unicode/utf8"
)

// view is a text with one level of escapes undone: b[i] came from the
// bytes [start[i], end[i]) of the original text.
type view struct {
	b          []byte
	start, end []int32
}

// origin maps the range [i, j) of the text v describes (the original
// text itself when v is nil) to offsets in the original.
func (v *view) origin(i, j int) (int32, int32) {
	if v == nil {
		return int32(i), int32(j)
	}
	return v.start[i], v.end[j-1]
}

// decode undoes one level of escapes of text (whose offsets v maps to
// the original): %XX, \uXXXX (surrogate pairs joined), \xXX, and \/, \\,
// \", \'. Anything else is kept as it is.
func (v *view) decode(text string) *view {
	d := &view{
		b:     make([]byte, 0, len(text)),
		start: make([]int32, 0, len(text)),
		end:   make([]int32, 0, len(text)),
	}
	emit := func(bs []byte, i, j int) {
		from, to := v.origin(i, j)
		for _, c := range bs {
			d.b = append(d.b, c)
			d.start = append(d.start, from)
			d.end = append(d.end, to)
		}
	}
	var one [1]byte
	var enc [utf8.UTFMax]byte
	for i := 0; i < len(text); {
		c, n := escapeAt(text, i)
		switch {
		case n == 0:
			one[0] = text[i]
			emit(one[:], i, i+1)
			i++
		case n < 6: // \/ and the like, %XX, \xXX: one byte
			one[0] = byte(c)
			emit(one[:], i, i+n)
			i += n
		default:
			k := utf8.EncodeRune(enc[:], c)
			emit(enc[:k], i, i+n)
			i += n
		}
	}
	return d
}

// hasEscape reports whether text holds an escape decode would undo.
func hasEscape(text string) bool {
	for i := 0; i < len(text); i++ {
		if c := text[i]; c == '%' || c == '\\' {
			if _, n := escapeAt(text, i); n > 0 {
				return true
			}
		}
	}
	return false
}

// escapeAt decodes the escape at text[i], returning the character and the
// length of the escape; n is 0 when there is none. A \u escape is 6 bytes
// (12 for a surrogate pair); %XX and \xXX give a byte (a rune below 0x80
// or a raw byte of a multi-byte sequence).
func escapeAt(text string, i int) (c rune, n int) {
	switch text[i] {
	case '%':
		if b, ok := hex2(text, i+1); ok {
			return rune(b), 3
		}
	case '\\':
		if i+1 >= len(text) {
			return 0, 0
		}
		switch text[i+1] {
		case '/', '\\', '"', '\'':
			return rune(text[i+1]), 2
		case 'x':
			if b, ok := hex2(text, i+2); ok {
				return rune(b), 4
			}
		case 'u':
			r, ok := hex4(text, i+2)
			if !ok {
				return 0, 0
			}
			if utf16.IsSurrogate(r) {
				if i+11 < len(text) && text[i+6] == '\\' && text[i+7] == 'u' {
					if r2, ok := hex4(text, i+8); ok {
						if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
							return p, 12
						}
					}
				}
				return utf8.RuneError, 6
			}
			return r, 6
		}
	}
	return 0, 0
}

func hex2(s string, i int) (byte, bool) {
	if i+2 > len(s) {
		return 0, false
	}
	h, ok1 := unhex(s[i])
	l, ok2 := unhex(s[i+1])
	return h<<4 | l, ok1 && ok2
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for k := range 4 {
		h, ok := unhex(s[i+k])
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
