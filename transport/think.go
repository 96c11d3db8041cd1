package transport

import "bytes"

const (
	openTag  = "<think>"
	closeTag = "</think>"
)

// Think filter modes.
const (
	// thinkLeading strips one <think>…</think> block only when the content
	// starts with it (after whitespace). Used for profiles that do not
	// declare think tags, so literal tags later in an answer survive.
	thinkLeading = iota
	// thinkAnywhere strips every <think>…</think> block, and treats a
	// "</think>" with no opening tag before it (templates that pre-fill
	// "<think>") as the end of thinking.
	thinkAnywhere
)

// Think filter states.
const (
	tsStart   = iota // nothing but whitespace seen yet
	tsOutside        // in answer text, still looking for tags
	tsInside         // inside a think block
	tsFinal          // leading mode after the first block or text: no more tags
)

// thinkFilter moves <think>…</think> blocks out of content deltas into the
// thinking text. Tags may be split across deltas: a suffix that could start
// a tag is held back until the next delta (or flush) decides it.
type thinkFilter struct {
	mode  int
	state int
	// pending holds held-back bytes (a possible partial tag) and is the
	// work buffer of feed.
	pending []byte
	// work is the buffer feed processes.
	work []byte
	// stripped is true once any tag was consumed.
	stripped bool
	// sawBlock is true once a think block (or a bare close tag) was seen.
	sawBlock bool
}

func (f *thinkFilter) reset(mode int) {
	f.mode = mode
	f.state = tsStart
	f.pending = f.pending[:0]
	f.work = f.work[:0]
	f.stripped = false
	f.sawBlock = false
}

// feed processes one content delta, appending to content and thinking.
func (f *thinkFilter) feed(s []byte, content, thinking *[]byte) {
	if f.state == tsFinal && len(f.pending) == 0 {
		*content = append(*content, s...)
		return
	}
	f.work = append(append(f.work[:0], f.pending...), s...)
	f.pending = f.pending[:0]
	d := f.work
	for len(d) > 0 {
		switch f.state {
		case tsFinal:
			*content = append(*content, d...)
			return
		case tsStart:
			i := 0
			for i < len(d) && isSpace(d[i]) {
				i++
			}
			*content = append(*content, d[:i]...)
			d = d[i:]
			if len(d) == 0 {
				return
			}
			if bytes.HasPrefix(d, []byte(openTag)) {
				d = d[len(openTag):]
				f.state = tsInside
				f.stripped = true
				f.sawBlock = true
				continue
			}
			if len(d) < len(openTag) && bytes.HasPrefix([]byte(openTag), d) {
				f.pending = append(f.pending, d...)
				return
			}
			if f.mode == thinkAnywhere {
				f.state = tsOutside
			} else {
				f.state = tsFinal
			}
		case tsOutside:
			open := bytes.Index(d, []byte(openTag))
			closeAt := -1
			if !f.sawBlock {
				closeAt = bytes.Index(d, []byte(closeTag))
			}
			if closeAt >= 0 && (open < 0 || closeAt < open) {
				// A bare close tag: everything before it was thinking.
				*thinking = append(*thinking, *content...)
				*thinking = append(*thinking, d[:closeAt]...)
				*content = (*content)[:0]
				d = d[closeAt+len(closeTag):]
				f.stripped = true
				f.sawBlock = true
				continue
			}
			if open >= 0 {
				*content = append(*content, d[:open]...)
				d = d[open+len(openTag):]
				f.state = tsInside
				f.stripped = true
				f.sawBlock = true
				continue
			}
			keep := partialSuffix(d, openTag)
			if !f.sawBlock {
				keep = max(keep, partialSuffix(d, closeTag))
			}
			*content = append(*content, d[:len(d)-keep]...)
			f.pending = append(f.pending, d[len(d)-keep:]...)
			return
		case tsInside:
			if i := bytes.Index(d, []byte(closeTag)); i >= 0 {
				*thinking = append(*thinking, d[:i]...)
				d = d[i+len(closeTag):]
				if f.mode == thinkAnywhere {
					f.state = tsOutside
				} else {
					f.state = tsFinal
				}
				continue
			}
			keep := partialSuffix(d, closeTag)
			*thinking = append(*thinking, d[:len(d)-keep]...)
			f.pending = append(f.pending, d[len(d)-keep:]...)
			return
		}
	}
}

// flush releases held-back bytes at the end of the answer: inside an
// unclosed block they are thinking, otherwise content.
func (f *thinkFilter) flush(content, thinking *[]byte) {
	if len(f.pending) == 0 {
		return
	}
	if f.state == tsInside {
		*thinking = append(*thinking, f.pending...)
	} else {
		*content = append(*content, f.pending...)
	}
	f.pending = f.pending[:0]
}

// partialSuffix returns the length of the longest proper suffix of d that
// is a prefix of tag.
func partialSuffix(d []byte, tag string) int {
	n := min(len(d), len(tag)-1)
	for k := n; k > 0; k-- {
		if string(d[len(d)-k:]) == tag[:k] {
			return k
		}
	}
	return 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }
