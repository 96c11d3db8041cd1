package embed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// A small streaming JSON scanner for embeddings answers: it reads through
// a refillable buffer, so only the token being read (at most one base64
// vector, or a captured "error" value) must fit in memory at once.

// readError wraps a failure of the response body reader, so that it is
// classified as an I/O failure and not as malformed JSON.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// errTooLarge is returned by bodyReader past its limit.
var errTooLarge = errors.New("response body too large")

// bodyReader bounds the response body.
type bodyReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.n >= b.limit {
		return 0, errTooLarge
	}
	if rem := b.limit - b.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}

// Scanner limits.
const (
	scanChunk = 32 << 10
	// maxTokenBytes bounds one token (the largest is a base64 vector:
	// 16 KiB for 3072 dimensions) and a captured "error" value.
	maxTokenBytes = 16 << 20
	// maxPooledBytes is the largest scanner buffer kept for reuse.
	maxPooledBytes = 1 << 20
	// maxDepth bounds the nesting of skipped values.
	maxDepth = 256
)

var (
	errSyntax  = errors.New("invalid JSON")
	errTooDeep = errors.New("JSON nested too deeply")
	errToken   = errors.New("JSON token too large")
)

// scanner reads JSON from r through a refillable buffer. Token methods
// return slices of the buffer that stay valid until the next read.
type scanner struct {
	r        io.Reader
	buf      []byte
	pos, end int
	// off is the body offset of buf[0], for messages.
	off int64
	// mark, when ≥ 0, keeps buf[mark:] across refills (value capture).
	mark int
	err  error
	// scratch space reused across answers.
	floats []float32
	b64    []byte
}

var scanners = sync.Pool{New: func() any { return &scanner{buf: make([]byte, scanChunk)} }}

// more reads more input, keeping the unread bytes (and a marked value);
// false means there is no more (s.err says why).
func (s *scanner) more() bool {
	if s.err != nil {
		return false
	}
	keep := s.pos
	if s.mark >= 0 && s.mark < keep {
		keep = s.mark
	}
	if keep > 0 {
		s.off += int64(keep)
		s.end = copy(s.buf, s.buf[keep:s.end])
		s.pos -= keep
		if s.mark >= 0 {
			s.mark -= keep
		}
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= maxTokenBytes {
			s.err = errToken
			return false
		}
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.err = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// fail returns the error for input that ended or broke where a token
// was expected.
func (s *scanner) fail() error {
	switch {
	case s.err == nil:
		return &malformedError{msg: "malformed response body", err: errSyntax}
	case s.err == io.EOF:
		return &malformedError{msg: "response body cut short", err: io.ErrUnexpectedEOF}
	case s.err == errToken:
		return &malformedError{msg: "malformed response body", err: errToken}
	}
	return &readError{err: s.err}
}

func (s *scanner) syntax(what string) error {
	return &malformedError{msg: "malformed response body", err: fmt.Errorf("%w: %s at byte %d", errSyntax, what, s.off+int64(s.pos))}
}

// peek skips white space and returns the next byte.
func (s *scanner) peek() (byte, error) {
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			if !isSpace(c) {
				return c, nil
			}
			s.pos++
		}
		if !s.more() {
			return 0, s.fail()
		}
	}
}

// expect consumes the byte c after white space.
func (s *scanner) expect(c byte) error {
	got, err := s.peek()
	if err != nil {
		return err
	}
	if got != c {
		return s.syntax(fmt.Sprintf("expected %q, found %q", c, got))
	}
	s.pos++
	return nil
}

// next consumes ',' and reports true, or consumes the closing delimiter
// and reports false. first is true before the first element.
func (s *scanner) next(first bool, closing byte) (bool, error) {
	c, err := s.peek()
	if err != nil {
		return false, err
	}
	if c == closing {
		s.pos++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, s.syntax(fmt.Sprintf("expected ',' or %q, found %q", closing, c))
		}
		s.pos++
		if c, err = s.peek(); err != nil {
			return false, err
		}
		if c == closing {
			return false, s.syntax("trailing comma")
		}
	}
	return true, nil
}

// str reads a string at the current position (after peek returned '"')
// and returns its raw contents and whether they hold escapes. Escapes are
// checked as encoding/json checks them (one of \" \\ \/ \b \f \n \r \t
// or \u with four hex digits). Raw control characters (below 0x20), which
// JSON forbids, are checked when ctl is set; a caller that passes false
// must rule them out itself (base64Vector does, see there).
func (s *scanner) str(ctl bool) ([]byte, bool, error) {
	i := 1 // offset from s.pos; s.buf[s.pos] == '"'
	esc := false
	for {
		for s.pos+i < s.end {
			seg := s.buf[s.pos+i : s.end]
			q := bytes.IndexByte(seg, '"')
			plain := seg
			if q >= 0 {
				plain = seg[:q]
			}
			b := bytes.IndexByte(plain, '\\')
			if b >= 0 {
				plain = plain[:b]
			}
			if ctl && hasControl(plain) {
				return nil, false, s.syntax("control character in a string")
			}
			if b >= 0 {
				esc = true
				n := escapeLen(seg[b:])
				if n < 0 {
					return nil, false, s.syntax("invalid escape in a string")
				}
				if n == 0 {
					i += b
					break // the escape is not wholly read yet
				}
				i += b + n
				continue
			}
			if q >= 0 {
				out := s.buf[s.pos+1 : s.pos+i+q]
				s.pos += i + q + 1
				return out, esc, nil
			}
			i += len(seg)
		}
		if !s.more() {
			return nil, false, s.fail()
		}
	}
}

// escapeLen returns the length of the escape at b[0] == '\\': 2, or 6 for
// \uXXXX; 0 when b ends before the escape does; -1 for an invalid escape.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		for k := 2; k < 6; k++ {
			if k >= len(b) {
				return 0
			}
			if !isHex(b[k]) {
				return -1
			}
		}
		return 6
	}
	return -1
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// hasControl reports whether b holds a byte below 0x20, eight bytes at a
// time: a byte x is below 0x20 exactly when x - 0x20 borrows into its high
// bit while x's own high bit is clear.
func hasControl(b []byte) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if (x-ones*0x20)&^x&highs != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// key reads an object key and the ':' after it.
func (s *scanner) key() ([]byte, error) {
	c, err := s.peek()
	if err != nil {
		return nil, err
	}
	if c != '"' {
		return nil, s.syntax(fmt.Sprintf("expected a key, found %q", c))
	}
	k, _, err := s.str(true)
	if err != nil {
		return nil, err
	}
	return k, s.expect(':')
}

// number reads a number token (the caller has seen its first byte) and
// checks it against JSON's number grammar.
func (s *scanner) number() ([]byte, error) {
	i := 0
	for {
		for s.pos+i < s.end && isNumByte(s.buf[s.pos+i]) {
			i++
		}
		if s.pos+i < s.end {
			break
		}
		if !s.more() {
			if s.err != io.EOF {
				return nil, s.fail()
			}
			break
		}
	}
	tok := s.buf[s.pos : s.pos+i]
	if !validNumber(tok) {
		return nil, s.syntax(fmt.Sprintf("invalid number %q", clip(tok, 32)))
	}
	s.pos += i
	return tok, nil
}

// validNumber reports whether b is a JSON number: an optional minus, 0 or
// digits not starting with 0, an optional fraction and an optional
// exponent, each with at least one digit.
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// clip returns at most n bytes of b, for messages.
func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// literal consumes true, false or null.
func (s *scanner) literal() error {
	c := s.buf[s.pos]
	word := "null"
	switch c {
	case 't':
		word = "true"
	case 'f':
		word = "false"
	}
	for s.end-s.pos < len(word) {
		if !s.more() {
			return s.fail()
		}
	}
	if string(s.buf[s.pos:s.pos+len(word)]) != word {
		return s.syntax("invalid literal")
	}
	s.pos += len(word)
	return nil
}

// object reads the object at the current position (after peek returned
// '{'): for each member it reads the key and calls member, which must
// consume the value. The key is a slice of the buffer, valid until member
// reads on.
func (s *scanner) object(member func(key []byte) error) error {
	s.pos++
	for first := true; ; first = false {
		more, err := s.next(first, '}')
		if err != nil || !more {
			return err
		}
		k, err := s.key()
		if err != nil {
			return err
		}
		if err := member(k); err != nil {
			return err
		}
	}
}

// skip consumes one value of any kind.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return &malformedError{msg: "malformed response body", err: errTooDeep}
	}
	c, err := s.peek()
	if err != nil {
		return err
	}
	switch {
	case c == '"':
		_, _, err = s.str(true)
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, err = s.number()
		return err
	case c == 't' || c == 'f' || c == 'n':
		return s.literal()
	case c == '{':
		return s.object(func([]byte) error { return s.skip(depth + 1) })
	case c == '[':
		s.pos++
		for first := true; ; first = false {
			more, err := s.next(first, ']')
			if err != nil || !more {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	}
	return s.syntax(fmt.Sprintf("unexpected %q", c))
}

// finish requires that only white space follows the top-level value, as
// encoding/json does: it reads the body to its end.
func (s *scanner) finish() error {
	for {
		for ; s.pos < s.end; s.pos++ {
			if !isSpace(s.buf[s.pos]) {
				return s.syntax(fmt.Sprintf("unexpected %q after the top-level value", s.buf[s.pos]))
			}
		}
		if !s.more() {
			if s.err == io.EOF {
				return nil
			}
			return s.fail()
		}
	}
}

// capture consumes one value and returns a copy of its bytes.
func (s *scanner) capture() ([]byte, error) {
	if _, err := s.peek(); err != nil {
		return nil, err
	}
	s.mark = s.pos
	err := s.skip(0)
	var out []byte
	if err == nil {
		out = bytes.Clone(s.buf[s.mark:s.pos])
	}
	s.mark = -1
	return out, err
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func isNumByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
