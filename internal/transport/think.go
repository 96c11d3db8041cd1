package transport

import "strings"

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
// a tag is held back until the next delta (or flush) decides it. Its output
// goes to a thinkOut as pieces of the text fed (no copies, except when a
// held-back suffix is joined to the next delta).
type thinkFilter struct {
	mode  int
	state int
	// pending holds held-back bytes (a possible partial tag).
	pending string
	// stripped is true once any tag was consumed.
	stripped bool
	// sawBlock is true once a think block (or a bare close tag) was seen.
	sawBlock bool
}

// thinkOut receives what the filter makes of the content: answer text,
// thinking text, and (at a bare close tag) the order to move all the
// answer text so far behind the thinking text.
type thinkOut interface {
	answer(s string)
	think(s string)
	moveAnswer()
}

func (f *thinkFilter) reset(mode int) {
	*f = thinkFilter{mode: mode, state: tsStart}
}

// feed processes one content delta.
func (f *thinkFilter) feed(s string, out thinkOut) {
	if f.state == tsFinal && f.pending == "" {
		out.answer(s)
		return
	}
	d := s
	if f.pending != "" {
		d, f.pending = f.pending+s, ""
	}
	for len(d) > 0 {
		var more bool
		switch f.state {
		case tsFinal:
			out.answer(d)
			return
		case tsStart:
			d, more = f.feedStart(d, out)
		case tsOutside:
			d, more = f.feedOutside(d, out)
		case tsInside:
			d, more = f.feedInside(d, out)
		}
		if !more {
			return
		}
	}
}

// The feed steps below handle d in the filter's current state: each
// sends what it decides to out and returns the rest of d to go on with
// (in the state it leaves) and whether there is more to do; when there is
// not, any undecided suffix is held in pending.

// feedStart handles d before anything but white space was seen: an
// opening tag there starts a block; otherwise the text decides the state.
func (f *thinkFilter) feedStart(d string, out thinkOut) (string, bool) {
	i := 0
	for i < len(d) && isSpace(d[i]) {
		i++
	}
	if i == len(d) {
		out.answer(d)
		return "", false
	}
	if strings.HasPrefix(d[i:], openTag) {
		if i > 0 {
			out.answer(d[:i])
		}
		f.enterBlock()
		return d[i+len(openTag):], true
	}
	if len(d)-i < len(openTag) && strings.HasPrefix(openTag, d[i:]) {
		if i > 0 {
			out.answer(d[:i])
		}
		f.pending = d[i:]
		return "", false
	}
	// No tag: the white space stays with the text that follows.
	f.state = f.afterBlock()
	return d, true
}

// feedOutside handles d in answer text: it looks for an opening tag, and
// for a bare close tag while no block was seen.
func (f *thinkFilter) feedOutside(d string, out thinkOut) (string, bool) {
	open := strings.Index(d, openTag)
	closeAt := -1
	if !f.sawBlock {
		closeAt = strings.Index(d, closeTag)
	}
	if closeAt >= 0 && (open < 0 || closeAt < open) {
		// A bare close tag: everything before it was thinking.
		out.moveAnswer()
		if closeAt > 0 {
			out.think(d[:closeAt])
		}
		f.stripped = true
		f.sawBlock = true
		return d[closeAt+len(closeTag):], true
	}
	if open >= 0 {
		if open > 0 {
			out.answer(d[:open])
		}
		f.enterBlock()
		return d[open+len(openTag):], true
	}
	keep := partialSuffix(d, openTag)
	if !f.sawBlock {
		keep = max(keep, partialSuffix(d, closeTag))
	}
	if keep < len(d) {
		out.answer(d[:len(d)-keep])
	}
	f.pending = d[len(d)-keep:]
	return "", false
}

// feedInside handles d inside a think block, up to its close tag.
func (f *thinkFilter) feedInside(d string, out thinkOut) (string, bool) {
	if i := strings.Index(d, closeTag); i >= 0 {
		if i > 0 {
			out.think(d[:i])
		}
		f.state = f.afterBlock()
		return d[i+len(closeTag):], true
	}
	keep := partialSuffix(d, closeTag)
	if keep < len(d) {
		out.think(d[:len(d)-keep])
	}
	f.pending = d[len(d)-keep:]
	return "", false
}

// enterBlock records an opening tag just consumed.
func (f *thinkFilter) enterBlock() {
	f.state = tsInside
	f.stripped = true
	f.sawBlock = true
}

// afterBlock is the state once answer text or the end of a block is
// reached: more tags are looked for only in thinkAnywhere mode.
func (f *thinkFilter) afterBlock() int {
	if f.mode == thinkAnywhere {
		return tsOutside
	}
	return tsFinal
}

// flush releases held-back bytes at the end of the answer: inside an
// unclosed block they are thinking, otherwise content.
func (f *thinkFilter) flush(out thinkOut) {
	if f.pending == "" {
		return
	}
	if f.state == tsInside {
		out.think(f.pending)
	} else {
		out.answer(f.pending)
	}
	f.pending = ""
}

// partialSuffix returns the length of the longest proper suffix of d that
// is a prefix of tag.
func partialSuffix(d, tag string) int {
	n := min(len(d), len(tag)-1)
	for k := n; k > 0; k-- {
		if d[len(d)-k:] == tag[:k] {
			return k
		}
	}
	return 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }
