package transport

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxJSONDepth = 256

// span locates a JSON string (without its quotes) or a raw JSON value inside
// the lexer's data. A zero span is "absent" (missing key or null).
type span struct {
	start, end int
	// set is true when the value was present and of the expected kind.
	set bool
	// esc: the string contains backslash escapes; hi: it contains bytes ≥ 0x80.
	esc, hi bool
	// raw: the span is a raw JSON value (object/number), copied verbatim.
	raw bool
}

// empty reports whether the span is absent or zero-length.
func (s span) empty() bool { return !s.set || s.end <= s.start }

// lexer is a small, allocation-free, strict JSON reader tailored to the few
// fields the transport needs: callers walk objects and arrays, pick the
// members they want and skip the rest. It validates everything it passes
// over, so a malformed document is always detected (err), whatever its
// shape. Strings are returned as spans and decoded on demand.
type lexer struct {
	data  []byte
	pos   int
	err   bool
	depth int
	// scratch holds decoded keys that contained escapes.
	scratch []byte
}

func (l *lexer) reset(data []byte) {
	l.data = data
	l.pos = 0
	l.err = false
	l.depth = 0
}

func (l *lexer) fail() {
	l.err = true
	l.pos = len(l.data)
}

func (l *lexer) ws() {
	for l.pos < len(l.data) {
		switch l.data[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the end.
func (l *lexer) peek() byte {
	l.ws()
	if l.pos < len(l.data) {
		return l.data[l.pos]
	}
	return 0
}

// finish requires that only whitespace remains.
func (l *lexer) finish() {
	l.ws()
	if l.pos != len(l.data) {
		l.fail()
	}
}

func (l *lexer) literal(lit string) {
	if len(l.data)-l.pos >= len(lit) && string(l.data[l.pos:l.pos+len(lit)]) == lit {
		l.pos += len(lit)
		return
	}
	l.fail()
}

// open consumes c ('{' or '[') when it is next and returns true; otherwise
// it skips whatever value is next and returns false.
func (l *lexer) open(c byte) bool {
	if l.peek() == c {
		l.pos++
		l.depth++
		if l.depth > maxJSONDepth {
			l.fail()
			return false
		}
		return true
	}
	l.skip()
	return false
}

// more reports whether another member or element follows in the object or
// array being read, consuming the comma; at the closing byte it consumes it
// and returns false.
func (l *lexer) more(closing byte, first *bool) bool {
	if l.err {
		return false
	}
	c := l.peek()
	if c == closing {
		l.pos++
		l.depth--
		return false
	}
	if !*first {
		if c != ',' {
			l.fail()
			return false
		}
		l.pos++
	}
	*first = false
	return true
}

// key reads an object key and its colon and returns the key's bytes
// (decoded into scratch when it had escapes).
func (l *lexer) key() []byte {
	s := l.str()
	if l.err {
		return nil
	}
	if l.peek() != ':' {
		l.fail()
		return nil
	}
	l.pos++
	if !s.esc {
		return l.data[s.start:s.end]
	}
	l.scratch = l.appendStr(l.scratch[:0], s)
	return l.scratch
}

// str reads a JSON string; the next value must be a string. The closing
// quote and escapes are found with bytes.IndexByte; the plain runs between
// them are checked eight bytes at a time for control characters (invalid)
// and bytes ≥ 0x80 (noted for UTF-8 validation on decode).
func (l *lexer) str() span {
	if l.peek() != '"' {
		l.fail()
		return span{}
	}
	d := l.data
	i := l.pos + 1
	s := span{start: i}
	for {
		q := bytes.IndexByte(d[i:], '"')
		if q < 0 {
			l.fail()
			return span{}
		}
		seg := d[i : i+q]
		bs := bytes.IndexByte(seg, '\\')
		if bs < 0 {
			ctl, hi := scanPlain(seg)
			if ctl {
				l.fail()
				return span{}
			}
			s.hi = s.hi || hi
			s.end = i + q
			s.set = true
			l.pos = i + q + 1
			return s
		}
		ctl, hi := scanPlain(seg[:bs])
		if ctl {
			l.fail()
			return span{}
		}
		s.hi = s.hi || hi
		s.esc = true
		j := i + bs
		if j+1 >= len(d) {
			l.fail()
			return span{}
		}
		switch d[j+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = j + 2
		case 'u':
			if j+6 > len(d) || !isHex4(d[j+2:j+6]) {
				l.fail()
				return span{}
			}
			i = j + 6
		default:
			l.fail()
			return span{}
		}
	}
}

// scanPlain reports whether b holds a control character (< 0x20) and
// whether it holds a byte ≥ 0x80.
func scanPlain(b []byte) (ctl, hi bool) {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if x&highs != 0 {
			hi = true
		}
		// Some byte < 0x20 (exact for thresholds ≤ 0x80).
		if (x-ones*0x20)&^x&highs != 0 {
			return true, hi
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true, hi
		}
		if c >= 0x80 {
			hi = true
		}
	}
	return false, hi
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !isHexDigit(c) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	default:
		return rune(c-'A') + 10
	}
}

// num reads a JSON number and returns its span (raw).
func (l *lexer) num() span {
	l.ws()
	d := l.data
	i := l.pos
	start := i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		l.fail()
		return span{}
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			l.fail()
			return span{}
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			l.fail()
			return span{}
		}
	}
	l.pos = i
	return span{start: start, end: i, set: true, raw: true}
}

// skip consumes the next value of any kind, validating it.
func (l *lexer) skip() {
	if l.err {
		return
	}
	switch c := l.peek(); {
	case c == '{':
		l.pos++
		l.depth++
		if l.depth > maxJSONDepth {
			l.fail()
			return
		}
		first := true
		for l.more('}', &first) {
			l.key()
			l.skip()
		}
	case c == '[':
		l.pos++
		l.depth++
		if l.depth > maxJSONDepth {
			l.fail()
			return
		}
		first := true
		for l.more(']', &first) {
			l.skip()
		}
	case c == '"':
		l.str()
	case c == 't':
		l.literal("true")
	case c == 'f':
		l.literal("false")
	case c == 'n':
		l.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		l.num()
	default:
		l.fail()
	}
}

// rawValue consumes the next value and returns its raw span.
func (l *lexer) rawValue() span {
	l.ws()
	start := l.pos
	l.skip()
	if l.err {
		return span{}
	}
	return span{start: start, end: l.pos, set: true, raw: true}
}

// strOrNull reads a string; null or any other kind is consumed and yields an
// absent span (tolerating providers that send the wrong type).
func (l *lexer) strOrNull() span {
	if l.peek() == '"' {
		return l.str()
	}
	l.skip()
	return span{}
}

// text reads a string or a number as text (error codes arrive as both);
// anything else is consumed and absent.
func (l *lexer) text() span {
	switch c := l.peek(); {
	case c == '"':
		return l.str()
	case c == '-' || c >= '0' && c <= '9':
		return l.num()
	}
	l.skip()
	return span{}
}

// int reads a number as an integer (fractions truncated, negatives as 0);
// ok is false for null or another kind.
func (l *lexer) int() (n int64, ok bool) {
	c := l.peek()
	if c != '-' && (c < '0' || c > '9') {
		l.skip()
		return 0, false
	}
	s := l.num()
	if l.err {
		return 0, false
	}
	return parseIntSpan(l.data[s.start:s.end]), true
}

// parseIntSpan converts a validated JSON number to a non-negative int64,
// saturating instead of overflowing.
func parseIntSpan(b []byte) int64 {
	if len(b) > 0 && b[0] == '-' {
		return 0
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			if c == 'e' || c == 'E' || c == '.' {
				// Rare forms (1.0, 1e3): take the slow, exact path.
				f, err := strconv.ParseFloat(string(b), 64)
				if err != nil || f < 0 {
					return 0
				}
				if f > 1<<53 {
					return 1 << 53
				}
				return int64(f)
			}
			return n
		}
		if n > (1<<53)/10 {
			return 1 << 53
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// bytes returns the undecoded bytes of s.
func (l *lexer) bytes(s span) []byte {
	if !s.set || s.end > len(l.data) || s.start > s.end {
		return nil
	}
	return l.data[s.start:s.end]
}

// appendStr appends the decoded value of s to dst: strings are unescaped and
// invalid UTF-8 is replaced by U+FFFD (as encoding/json does); raw spans are
// copied verbatim.
func (l *lexer) appendStr(dst []byte, s span) []byte {
	raw := l.bytes(s)
	if raw == nil {
		return dst
	}
	if s.raw {
		return append(dst, raw...)
	}
	if !s.esc {
		if !s.hi || utf8.Valid(raw) {
			return append(dst, raw...)
		}
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw):
			switch raw[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				if i+6 > len(raw) {
					return dst
				}
				r := hex4(raw[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = hex4(raw[i+2 : i+6])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, raw[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

func hex4(b []byte) rune {
	return hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3])
}

// equal reports whether the decoded value of s equals t, without allocating
// in the common unescaped case.
func (l *lexer) equal(s span, t string) bool {
	raw := l.bytes(s)
	if !s.esc && !s.hi {
		return string(raw) == t
	}
	var tmp [64]byte
	return string(l.appendStr(tmp[:0], s)) == t
}

// string returns the decoded value of s as a new string.
func (l *lexer) string(s span) string {
	raw := l.bytes(s)
	if len(raw) == 0 {
		return ""
	}
	if !s.esc && (!s.hi || utf8.Valid(raw)) {
		return string(raw)
	}
	return string(l.appendStr(nil, s))
}
