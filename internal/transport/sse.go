package transport

import (
	"bytes"
	"errors"
	"io"
)

// DefaultMaxEventBytes is the default bound on one SSE event (8 MiB).
const DefaultMaxEventBytes = 8 << 20

// ErrEventTooLarge is returned by SSEReader.Next when one line or one event
// exceeds the reader's bound.
var ErrEventTooLarge = errors.New("polygateway: sse event too large")

// SSEEvent is one dispatched server-sent event. Data and the string fields
// are valid until the next call of Next.
type SSEEvent struct {
	// Event is the value of the last "event:" field ("" = message).
	Event string
	// ID is the value of the last "id:" field of the event, if any.
	ID string
	// Data is the event's data: multiple "data:" lines joined with "\n".
	Data []byte
	// Unterminated is true for an event flushed at the end of the input
	// whose last line had no line ending: the stream may have been cut
	// inside it.
	Unterminated bool
}

// SSEReader reads server-sent events from a byte stream as the
// EventSource specification describes: lines end in LF, CRLF or a bare CR
// (also split across reads), "data:" with or without the single leading
// space, multi-line data joined with "\n", comment lines (":…") skipped,
// "event:" and "id:" recorded, other fields ignored, and an event is
// dispatched at a blank line. One UTF-8 byte order mark at the start of
// the input is skipped. Lines and events are bounded (not by
// bufio.Scanner's 64 KiB, but by a configurable limit, default 8 MiB).
//
// At the end of the input an event whose blank line never came is still
// dispatched when it has data (servers often omit the final blank line);
// Unterminated marks one whose last line was cut.
//
// An SSEReader does not depend on HTTP; it is not safe for concurrent use.
type SSEReader struct {
	r   io.Reader
	max int

	buf        []byte
	start, end int
	eof        bool
	err        error
	// scanned counts the bytes after start already known to hold no line
	// ending (so that byte-sized reads of a long line stay linear).
	scanned int
	// skipLF is set after a CR that ended a line at the end of the buffer:
	// a following LF belongs to it.
	skipLF bool
	// bomDone is set once the start of the input was checked for a byte
	// order mark.
	bomDone bool

	data    []byte
	hasData bool
	event   []byte
	id      []byte
	ev      SSEEvent
}

// Reset makes s read from r, keeping its buffers.
func (s *SSEReader) Reset(r io.Reader, maxEvent int) {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEventBytes
	}
	s.r = r
	s.max = maxEvent
	if s.buf == nil {
		s.buf = make([]byte, 0, min(32<<10, maxEvent+2))
	}
	s.buf = s.buf[:cap(s.buf)]
	s.start, s.end = 0, 0
	s.scanned = 0
	s.eof = false
	s.err = nil
	s.skipLF = false
	s.bomDone = false
	s.data = s.data[:0]
	s.hasData = false
	s.event = s.event[:0]
	s.id = s.id[:0]
}

// Next returns the next event. At the end of the input it returns io.EOF;
// a read error is returned as is (after any complete event before it), and
// a line or event over the bound yields ErrEventTooLarge. After an error,
// Next keeps returning it.
func (s *SSEReader) Next() (*SSEEvent, error) {
	if s.err != nil {
		return nil, s.err
	}
	for {
		line, ok, terminated := s.line()
		if !ok {
			if s.err != nil && !errors.Is(s.err, io.EOF) {
				return nil, s.err
			}
			// End of input after a line ending: flush a pending event
			// whose blank line never came.
			if s.hasData {
				return s.dispatch(false), nil
			}
			s.err = io.EOF
			return nil, io.EOF
		}
		if len(line) == 0 {
			if s.hasData {
				return s.dispatch(false), nil
			}
			s.event = s.event[:0]
			s.id = s.id[:0]
			continue
		}
		s.field(line)
		if len(s.data) > s.max {
			s.err = ErrEventTooLarge
			return nil, s.err
		}
		if !terminated {
			// The last, unterminated line of the input.
			if s.hasData {
				return s.dispatch(true), nil
			}
			s.err = io.EOF
			return nil, io.EOF
		}
	}
}

// Buffered reports whether the next call of Next can return without
// reading: the input ended, or the bytes already read hold an event with
// data up to the blank line that ends it (comments, blank lines and events
// without data, which Next passes over, do not count). A relay flushes its
// client when it is false, before Next waits on the network.
func (s *SSEReader) Buffered() bool {
	if s.eof || s.err != nil {
		return true
	}
	b := s.buf[s.start:s.end]
	if s.skipLF && len(b) > 0 && b[0] == '\n' {
		b = b[1:]
	}
	data := s.hasData
	for {
		i := lineEnd(b)
		if i < 0 {
			return false
		}
		line := b[:i]
		switch {
		case len(line) == 0 && data:
			return true
		case string(line) == "data" || bytes.HasPrefix(line, dataColon):
			data = true
		}
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
}

var dataColon = []byte("data:")

func (s *SSEReader) dispatch(unterminated bool) *SSEEvent {
	s.ev = SSEEvent{Data: s.data, Unterminated: unterminated}
	if len(s.event) > 0 {
		s.ev.Event = string(s.event)
	}
	if len(s.id) > 0 {
		s.ev.ID = string(s.id)
	}
	s.hasData = false
	s.event = s.event[:0]
	s.id = s.id[:0]
	// The next event reuses the buffer once the caller is done.
	ev := &s.ev
	s.data = s.data[:0]
	return ev
}

// field applies one non-empty line.
func (s *SSEReader) field(line []byte) {
	if line[0] == ':' {
		return // comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "event":
		s.event = append(s.event[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.id = append(s.id[:0], value...)
		}
	}
}

// line returns the next line without its terminator. ok is false at the
// end of input (or on error) with no further bytes; terminated is false
// for a final line that had no line ending.
func (s *SSEReader) line() (line []byte, ok, terminated bool) {
	for {
		if !s.bomDone && !s.skipBOM() {
			if err := s.fill(); err != nil {
				s.err = err
				return nil, false, false
			}
			continue
		}
		if s.skipLF && s.start < s.end {
			if s.buf[s.start] == '\n' {
				s.start++
			}
			s.skipLF = false
		}
		if s.start+s.scanned < s.end {
			b := s.buf[s.start:s.end]
			if i := lineEnd(b[s.scanned:]); i >= 0 {
				i += s.scanned
				s.scanned = 0
				line = b[:i]
				s.start += i + 1
				if b[i] == '\r' {
					if i+1 < len(b) {
						if b[i+1] == '\n' {
							s.start++
						}
					} else {
						s.skipLF = true
					}
				}
				return line, true, true
			}
			s.scanned = len(b)
		}
		if s.eof {
			if s.start < s.end {
				line = s.buf[s.start:s.end]
				s.start = s.end
				s.scanned = 0
				return line, true, false
			}
			return nil, false, false
		}
		if err := s.fill(); err != nil {
			s.err = err
			return nil, false, false
		}
	}
}

// bom is the UTF-8 byte order mark.
var bom = []byte("\xEF\xBB\xBF")

// skipBOM skips one byte order mark at the start of the input, as the
// EventSource specification does (read as part of the first field's name,
// it would lose the first event). It reports false while the bytes read so
// far may still be the start of one.
func (s *SSEReader) skipBOM() bool {
	b := s.buf[s.start:s.end]
	switch {
	case bytes.HasPrefix(b, bom):
		s.start += len(bom)
	case len(b) < len(bom) && bytes.HasPrefix(bom, b) && !s.eof:
		return false
	}
	s.bomDone = true
	return true
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i >= 0 {
		b = b[:i]
	}
	if j := bytes.IndexByte(b, '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads more input, compacting or growing the buffer.
func (s *SSEReader) fill() error {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if len(s.buf) > s.max {
			return ErrEventTooLarge
		}
		nb := make([]byte, min(2*len(s.buf), s.max+2))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.end:])
		if n < 0 || n > len(s.buf)-s.end {
			return io.ErrShortBuffer
		}
		s.end += n
		if err == io.EOF {
			s.eof = true
			return nil
		}
		if err != nil {
			if n > 0 {
				// Hand out what arrived; report the error on the next fill.
				s.r = errReader{err}
				return nil
			}
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}

// errReader returns a stored error.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
