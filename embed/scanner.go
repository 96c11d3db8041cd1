package embed

import (
	"bytes"
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
	return &malformedError{msg: "malformed response body", err: fmt.Errorf("%w: %s at byte %d", errSyntax, what, s.pos)}
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
// and returns its raw contents and whether they hold escapes.
func (s *scanner) str() ([]byte, bool, error) {
	i := 1 // offset from s.pos; s.buf[s.pos] == '"'
	esc := false
	for {
		for s.pos+i < s.end {
			seg := s.buf[s.pos+i : s.end]
			q := bytes.IndexByte(seg, '"')
			lim := seg
			if q >= 0 {
				lim = seg[:q]
			}
			if b := bytes.IndexByte(lim, '\\'); b >= 0 {
				esc = true
				if s.pos+i+b+1 >= s.end {
					i += b
					break // the escaped byte is not read yet
				}
				i += b + 2
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

// key reads an object key and the ':' after it.
func (s *scanner) key() ([]byte, error) {
	c, err := s.peek()
	if err != nil {
		return nil, err
	}
	if c != '"' {
		return nil, s.syntax(fmt.Sprintf("expected a key, found %q", c))
	}
	k, _, err := s.str()
	if err != nil {
		return nil, err
	}
	return k, s.expect(':')
}

// number reads a number token (the caller has seen its first byte).
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
	if i == 0 {
		return nil, s.syntax("expected a number")
	}
	tok := s.buf[s.pos : s.pos+i]
	s.pos += i
	return tok, nil
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
		_, _, err = s.str()
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
