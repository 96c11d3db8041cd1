package engine

import (
	"errors"
	"strings"

	"github.com/polygateway/polygateway/core"
)

// A continuation's first bytes are compared with the start of the words
// already relayed: a source that ignores the prefill and answers anew
// would send the caller those words a second time. echoProbe is how many
// bytes are compared at most (held back from the caller until they are
// in); a shorter prefix is compared whole. A continuation that truly
// begins with the whole of a short prefix ("ha" going on "ha") is taken
// for an echo: the stream then ends with its cut, an honest error, where
// the other mistake would relay a garbled answer.
const echoProbe = 64

// errAnsweredAnew ends a continuation whose source began the answer again
// instead of going on from the prefill.
var errAnsweredAnew = errors.New("the source answered anew instead of continuing the prefill")

// echoGuard is the DeltaSink of one continuation attempt: it passes
// thinking on at once and holds the first content back until it can tell
// whether the source repeats the relayed prefix; then it relays it and
// everything after. Used by one attempt's goroutine only.
type echoGuard struct {
	core.DeltaSink
	probe   string // the start of the relayed content to compare with
	held    []byte
	decided bool
}

// newEchoGuard guards the caller's sink next for a continuation from the
// relayed content.
func newEchoGuard(next core.DeltaSink, content string) *echoGuard {
	g := &echoGuard{DeltaSink: next, probe: content[:min(len(content), echoProbe)]}
	g.decided = g.probe == "" // nothing relayed to repeat
	return g
}

// Delta holds content back until len(probe) bytes are in, then fails with
// errAnsweredAnew if they repeat the probe, or relays them.
func (g *echoGuard) Delta(content, thinking string) error {
	if g.decided {
		return g.DeltaSink.Delta(content, thinking)
	}
	if thinking != "" {
		if err := g.DeltaSink.Delta("", thinking); err != nil {
			return err
		}
	}
	g.held = append(g.held, content...)
	if len(g.held) < len(g.probe) {
		return nil
	}
	g.decided = true
	if string(g.held[:len(g.probe)]) == g.probe {
		return errAnsweredAnew
	}
	return g.flush()
}

// flush relays the content still held back (an answer shorter than the
// probe ends with it), or fails with errAnsweredAnew when all of it
// repeats the start of the probe: a whole answer anew shorter than the
// relayed text.
func (g *echoGuard) flush() error {
	if !g.decided && len(g.held) > 0 && strings.HasPrefix(g.probe, string(g.held)) {
		g.decided = true
		return errAnsweredAnew
	}
	g.decided = true
	if len(g.held) == 0 {
		return nil
	}
	held := string(g.held)
	g.held = nil
	return g.DeltaSink.Delta(held, "")
}

// FlushDeltas passes the transport's flush on to the caller's sink when it
// is a core.DeltaFlusher: a relay that flushes only when told to must
// still push a continuation's deltas out as they come.
func (g *echoGuard) FlushDeltas() error {
	if f, ok := g.DeltaSink.(core.DeltaFlusher); ok {
		return f.FlushDeltas()
	}
	return nil
}

// SetModel passes the model the continuation's answer names on to the
// caller's sink when it is a core.DeltaModel. (core.DeltaKeeper is not
// passed on: the content held back is not in the sink when the stream
// ends.)
func (g *echoGuard) SetModel(model string) {
	if m, ok := g.DeltaSink.(core.DeltaModel); ok {
		m.SetModel(model)
	}
}

var (
	_ core.DeltaSink    = (*echoGuard)(nil)
	_ core.DeltaFlusher = (*echoGuard)(nil)
	_ core.DeltaModel   = (*echoGuard)(nil)
)
