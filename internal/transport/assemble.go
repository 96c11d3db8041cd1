package transport

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// ThinkingFieldReasoningDetails is an extra ThinkingFields value understood
// by the transport: thinking text in reasoning_details[].text (MiniMax with
// reasoning_split, OpenRouter).
const ThinkingFieldReasoningDetails = "reasoning_details"

// Thinking sources in a chunk, in the order tried when a profile says nothing.
const (
	thinkSrcReasoningContent = iota
	thinkSrcReasoning
	thinkSrcDetails
	numThinkSrc
)

// modelNames are the model names upstreams reported, by their JSON text:
// a name is decoded by encoding/json once, not on every call.
var modelNames modelCache

// maxModelNames bounds modelNames; when full it starts over.
const maxModelNames = 256

// modelCache maps a model's JSON text to its name. Safe for concurrent
// use.
type modelCache struct {
	mu sync.RWMutex
	m  map[string]string
}

// name returns the model raw names ("" when it is not a string).
func (c *modelCache) name(raw []byte) string {
	c.mu.RLock()
	name, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return name
	}
	if json.Unmarshal(raw, &name) != nil {
		return ""
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxModelNames {
		c.m = make(map[string]string)
	}
	c.m[string(raw)] = name
	c.mu.Unlock()
	return name
}

// toolAcc accumulates one tool call across deltas.
type toolAcc struct {
	index         int
	id, typ, name string
	args          []byte
}

// text accumulates one text of an answer. A text made of one piece is that
// piece (a non-streamed answer's content is the string encoding/json
// decoded, never copied); more pieces are joined in a builder, whose
// String does not copy either.
type text struct {
	one string
	b   strings.Builder
}

func (t *text) add(s string) {
	switch {
	case s == "":
	case t.one == "" && t.b.Len() == 0:
		t.one = s
	default:
		if t.one != "" {
			t.b.Grow(2 * (len(t.one) + len(s)))
			t.b.WriteString(t.one)
			t.one = ""
		}
		t.b.WriteString(s)
	}
}

func (t *text) String() string {
	if t.one != "" {
		return t.one
	}
	return t.b.String()
}

func (t *text) Len() int { return len(t.one) + t.b.Len() }

// assembler builds one answer from decoded chunks (streaming) or from the
// single response body (non-streaming). The text is kept once: by the
// assembler, or — when the call's delta sink keeps every delta itself (a
// core.DeltaKeeper) — by the sink, the answer then being what the sink kept
// during the attempt.
type assembler struct {
	// order is the preference order of thinking sources; only the first
	// non-empty source of a chunk is used, because some servers send the
	// same text in two fields.
	order  [numThinkSrc]int
	filter thinkFilter

	// content and thinking are the answer's text (without a keeper).
	content, thinking text
	// keeper keeps the text instead; keptContent and keptThinking are the
	// lengths of its text when the attempt began, moved the part of its
	// content of this attempt that a bare close tag made thinking.
	keeper                    core.DeltaKeeper
	keptContent, keptThinking int
	moved                     int
	// dc and dt are the pieces of content and thinking of the chunk being
	// applied: its delta.
	dc, dt []string

	tools []toolAcc
	// toolAt maps a tool-call index as sent (or, without one, a position
	// in a message's array) to the position in tools of the call its
	// deltas feed; toolIndex maps a call's index, as reported, to its
	// position; toolID maps a call's id to its position; nextTool is one
	// past the highest index reported. Each fragment finds its call at
	// once, however many there are.
	toolAt, toolIndex map[int]int
	toolID            map[string]int
	nextTool          int
	mem               memReserve

	finish string
	model  string
	// modelRaw is the JSON text of the model the upstream last named.
	modelRaw []byte
	usage    usageVals
	usageOK  bool
	gotToken bool
	// positional: tool calls without an index take their array position
	// (non-streaming message); otherwise they continue the last call.
	positional bool
}

// reset prepares the assembler for a new answer under profile p; model is
// the configured model name, kept unless the upstream reports another.
// keeper, when not nil, keeps the text of the deltas.
func (a *assembler) reset(p *core.ProviderProfile, positional bool, model string, keeper core.DeltaKeeper) {
	a.content, a.thinking = text{}, text{}
	a.keeper, a.keptContent, a.keptThinking, a.moved = keeper, 0, 0, 0
	if keeper != nil {
		c, t := keeper.Kept()
		a.keptContent, a.keptThinking = len(c), len(t)
	}
	clear(a.dc)
	clear(a.dt)
	a.dc, a.dt = a.dc[:0], a.dt[:0]
	clear(a.tools)
	a.tools = a.tools[:0]
	clear(a.toolAt)
	clear(a.toolIndex)
	clear(a.toolID)
	a.nextTool = 0
	a.finish = ""
	a.model, a.modelRaw = model, a.modelRaw[:0]
	a.usage = usageVals{}
	a.usageOK = false
	a.gotToken = false
	a.positional = positional

	n := 0
	seen := [numThinkSrc]bool{}
	add := func(src int) {
		if !seen[src] {
			seen[src] = true
			a.order[n] = src
			n++
		}
	}
	mode := thinkLeading
	for _, f := range p.ThinkingFields {
		switch f {
		case core.ThinkingFieldReasoningContent:
			add(thinkSrcReasoningContent)
		case core.ThinkingFieldReasoning:
			add(thinkSrcReasoning)
		case ThinkingFieldReasoningDetails:
			add(thinkSrcDetails)
		case core.ThinkingFieldThinkTags:
			mode = thinkAnywhere
		}
	}
	add(thinkSrcReasoningContent)
	add(thinkSrcReasoning)
	add(thinkSrcDetails)
	a.filter.reset(mode)
}

// answer, think and moveAnswer receive the text of the chunk being
// applied (thinkOut).
func (a *assembler) answer(s string) {
	a.dc = append(a.dc, s)
	if a.keeper == nil {
		a.content.add(s)
	}
}

func (a *assembler) think(s string) {
	a.dt = append(a.dt, s)
	if a.keeper == nil {
		a.thinking.add(s)
	}
}

// moveAnswer makes all the answer text so far thinking: the text already
// passed on as content goes out again as thinking.
func (a *assembler) moveAnswer() {
	var so string
	if a.keeper == nil {
		so = a.content.String()
		a.content = text{}
	} else {
		c, _ := a.keeper.Kept()
		so = c[a.keptContent+a.moved:] + strings.Join(a.dc, "")
		a.moved = len(c) - a.keptContent
	}
	clear(a.dc)
	a.dc = a.dc[:0]
	a.think(so)
}

// apply folds one chunk into the answer and reports whether it carried a
// token (content, thinking or tool-call delta). Its text is the chunk's
// delta (see delta). err is set when the text does not fit the call's
// memory budget.
func (a *assembler) apply(c *wireChunk) (token bool, err error) {
	clear(a.dc)
	clear(a.dt)
	a.dc, a.dt = a.dc[:0], a.dt[:0]
	// Usage: the last complete one wins (top level, else inside the choice).
	ch := c.picked()
	if u := c.Usage.vals(); u.complete() {
		a.usage, a.usageOK = u, true
	} else if ch != nil {
		if u := ch.Usage.vals(); u.complete() {
			a.usage, a.usageOK = u, true
		}
	}
	if m := c.Model.raw; len(m) > 2 && !bytes.Equal(m, a.modelRaw) {
		// Another model named: decoded once, not per chunk.
		if name := modelNames.name(m); name != "" {
			a.model = name
		}
		a.modelRaw = append(a.modelRaw[:0], m...)
	}
	if ch == nil {
		return false, nil
	}
	// The text is reserved before it is kept: at most what the choice
	// holds and what the think filter holds back.
	need := len(a.filter.pending) + len(ch.Text.s)
	for _, d := range [...]*wireDelta{ch.Delta, ch.Message} {
		if d != nil {
			need += d.size()
		}
	}
	if err := a.mem.grow(int64(need)); err != nil {
		return false, err
	}
	for _, d := range [...]*wireDelta{ch.Delta, ch.Message} {
		if d != nil && a.applyDelta(d) {
			token = true
		}
	}
	if ch.Text.s != "" {
		token = true
		a.filter.feed(ch.Text.s, a)
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
	}
	if token {
		a.gotToken = true
	}
	return token, nil
}

// size returns the bytes of text d holds: at most what it adds to an
// answer.
func (d *wireDelta) size() int {
	n := len(d.Content) + len(d.Refusal) + len(d.ReasoningContent) + len(d.Reasoning)
	for _, s := range d.parts {
		n += len(s)
	}
	for _, r := range d.ReasoningDetails {
		n += len(r.Text)
	}
	for i := range d.ToolCalls {
		n += d.ToolCalls[i].size()
	}
	if d.FunctionCall != nil {
		n += len(d.FunctionCall.Name) + len(d.FunctionCall.Arguments)
	}
	return n
}

func (t *wireToolCall) size() int {
	return len(t.ID) + len(t.Type) + len(t.Function.Name) + len(t.Function.Arguments)
}

// applyDelta folds one delta or message.
func (a *assembler) applyDelta(d *wireDelta) bool {
	token := false
	if d.Content != "" {
		token = true
		a.filter.feed(d.Content, a)
	}
	for _, s := range d.parts {
		if s != "" {
			token = true
			a.filter.feed(s, a)
		}
	}
	if d.Refusal != "" {
		token = true
		a.answer(d.Refusal)
	}
	for _, src := range a.order {
		if a.applyThinking(d, src) {
			token = true
			break
		}
	}
	for i := range d.ToolCalls {
		a.applyTool(&d.ToolCalls[i], i)
		token = true
	}
	if d.FunctionCall != nil {
		// The legacy single function call: one tool call at index 0.
		a.applyTool(&wireToolCall{Index: count{ok: true}, Function: *d.FunctionCall}, 0)
		token = true
	}
	return token
}

func (a *assembler) applyThinking(d *wireDelta, src int) bool {
	switch src {
	case thinkSrcReasoningContent:
		if d.ReasoningContent != "" {
			a.think(d.ReasoningContent)
			return true
		}
	case thinkSrcReasoning:
		if d.Reasoning != "" {
			a.think(d.Reasoning)
			return true
		}
	case thinkSrcDetails:
		got := false
		for _, r := range d.ReasoningDetails {
			if r.Text != "" {
				a.think(r.Text)
				got = true
			}
		}
		return got
	}
	return false
}

// applyTool merges one tool-call delta, the pos-th of its array: by
// index; "id":"" counts as absent; the name is set once; arguments
// accumulate. A delta that names another call — another id and a name —
// at an index whose call has both already is a new call (Ollama sends
// every call whole at index 0, each with its own id): it takes the next
// free index, and the deltas of its index feed it from then on. Another
// id without a name continues the call (some servers change the id after
// the first chunk).
func (a *assembler) applyTool(td *wireToolCall, pos int) {
	var i int
	switch {
	case td.Index.ok:
		i = a.toolFor(int(min(td.Index.n, 1<<20)), td)
	case a.positional:
		i = a.toolFor(pos, td)
	case td.ID != "":
		var ok bool
		if i, ok = a.toolID[td.ID]; !ok {
			i = a.newTool(a.nextTool)
		}
	case len(a.tools) > 0:
		i = len(a.tools) - 1
	default:
		i = a.toolFor(0, td)
	}
	t := &a.tools[i]
	if t.id == "" && td.ID != "" {
		t.id = td.ID
		if _, ok := a.toolID[td.ID]; !ok {
			a.toolID[td.ID] = i
		}
	}
	if t.typ == "" {
		t.typ = td.Type
	}
	if t.name == "" {
		t.name = td.Function.Name
	}
	t.args = append(t.args, string(td.Function.Arguments)...)
}

// toolFor returns the position of the call the deltas of index (as sent)
// feed, starting a new one for td when it names another call (see
// applyTool).
func (a *assembler) toolFor(index int, td *wireToolCall) int {
	i, ok := a.toolAt[index]
	switch {
	case !ok:
		at := index
		if _, taken := a.toolIndex[at]; taken {
			at = a.nextTool
		}
		i = a.newTool(at)
	case td.ID != "" && td.Function.Name != "" && a.tools[i].id != "" && a.tools[i].name != "" && td.ID != a.tools[i].id:
		i = a.newTool(a.nextTool)
	default:
		return i
	}
	a.toolAt[index] = i
	return i
}

// newTool adds the accumulator of a new call reported at index and
// returns its position.
func (a *assembler) newTool(index int) int {
	if a.toolAt == nil {
		a.toolAt, a.toolIndex, a.toolID = make(map[int]int), make(map[int]int), make(map[string]int)
	}
	a.tools = append(a.tools, toolAcc{index: index})
	a.toolIndex[index] = len(a.tools) - 1
	a.nextTool = max(a.nextTool, index+1)
	return len(a.tools) - 1
}

// delta returns the content and thinking the last applied chunk added,
// each one string (a single piece is not copied).
func (a *assembler) delta() (content, thinking string) {
	return joinPieces(a.dc), joinPieces(a.dt)
}

func joinPieces(p []string) string {
	if len(p) == 1 {
		return p[0]
	}
	return strings.Join(p, "")
}

// end flushes held-back bytes of the think filter; their text is the last
// delta.
func (a *assembler) end() {
	clear(a.dc)
	clear(a.dt)
	a.dc, a.dt = a.dc[:0], a.dt[:0]
	a.filter.flush(a)
}

// text returns the answer's content and thinking.
func (a *assembler) text() (content, thinking string) {
	if a.keeper == nil {
		return a.content.String(), a.thinking.String()
	}
	c, t := a.keeper.Kept()
	return c[a.keptContent+a.moved:], t[a.keptThinking:]
}

// fill writes the assembled answer into r. The white space around
// stripped think blocks is trimmed unless the answer's deltas went to a
// sink (delivered): the answer is then the text of those deltas, as the
// caller has it.
func (a *assembler) fill(r *core.LLMResponse, delivered bool) {
	content, thinking := a.text()
	if a.filter.stripped && !delivered {
		content = strings.TrimLeft(content, " \t\r\n")
		thinking = strings.TrimSpace(thinking)
	}
	r.Content = content
	if thinking != "" {
		r.Thinking = thinking
	}
	r.FinishReason = a.finish
	if len(a.tools) > 0 {
		tools := make([]core.ToolCall, len(a.tools))
		for i := range a.tools {
			t := &a.tools[i]
			tools[i] = core.ToolCall{Index: t.index, ID: t.id, Type: cmpOr(t.typ, "function"), Name: t.name, Arguments: string(t.args)}
		}
		slices.SortStableFunc(tools, func(x, y core.ToolCall) int { return x.Index - y.Index })
		r.ToolCalls = tools
	}
}
