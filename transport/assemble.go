package transport

import (
	"bytes"
	"slices"

	"github.com/polygateway/polygateway/internal/core"
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

// toolAcc accumulates one tool call across deltas.
type toolAcc struct {
	index               int
	id, typ, name, args []byte
}

// assembler builds one answer from decoded chunks (streaming) or from the
// single response body (non-streaming).
type assembler struct {
	// order is the preference order of thinking sources; only the first
	// non-empty source of a chunk is used, because some servers send the
	// same text in two fields.
	order  [numThinkSrc]int
	filter thinkFilter

	content, thinking []byte
	tools             []toolAcc
	scratch           []byte

	finish   string
	model    string
	usage    usageVals
	usageOK  bool
	gotToken bool
	// positional: tool calls without an index take their array position
	// (non-streaming message); otherwise they continue the last call.
	positional bool
}

// reset prepares the assembler for a new answer under profile p; model is
// the configured model name, kept unless the upstream reports another.
func (a *assembler) reset(p *core.ProviderProfile, positional bool, model string) {
	a.content = a.content[:0]
	a.thinking = a.thinking[:0]
	a.tools = a.tools[:0]
	a.finish = ""
	a.model = model
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

// apply folds one chunk into the answer and reports whether it carried a
// token (content, thinking or tool-call delta).
func (a *assembler) apply(l *lexer, c *chunk) bool {
	// Usage: the last complete one wins (top level, else inside the choice).
	if c.usage.complete() {
		a.usage, a.usageOK = c.usage, true
	} else if c.choiceUsage.complete() {
		a.usage, a.usageOK = c.choiceUsage, true
	}
	if !c.model.empty() && !l.equal(c.model, a.model) {
		a.model = l.string(c.model)
	}
	token := false
	for _, s := range c.content {
		if s.empty() {
			continue
		}
		a.scratch = l.appendStr(a.scratch[:0], s)
		if len(a.scratch) > 0 {
			token = true
			a.filter.feed(a.scratch, &a.content, &a.thinking)
		}
	}
	if !c.refusal.empty() {
		token = true
		a.content = l.appendStr(a.content, c.refusal)
	}
	for _, src := range a.order {
		if a.applyThinking(l, c, src) {
			token = true
			break
		}
	}
	for i := range c.tools {
		if a.applyTool(l, &c.tools[i]) {
			token = true
		}
	}
	if !c.finish.empty() {
		a.finish = internFinish(l.bytes(c.finish), l, c.finish)
	}
	if token {
		a.gotToken = true
	}
	return token
}

func (a *assembler) applyThinking(l *lexer, c *chunk, src int) bool {
	switch src {
	case thinkSrcReasoningContent:
		if !c.reasoningC.empty() {
			a.thinking = l.appendStr(a.thinking, c.reasoningC)
			return true
		}
	case thinkSrcReasoning:
		if !c.reasoning.empty() {
			a.thinking = l.appendStr(a.thinking, c.reasoning)
			return true
		}
	case thinkSrcDetails:
		got := false
		for _, s := range c.details {
			if !s.empty() {
				a.thinking = l.appendStr(a.thinking, s)
				got = true
			}
		}
		return got
	}
	return false
}

// applyTool merges one tool-call delta: by index; "id":"" counts as absent;
// the name is set once; arguments accumulate.
func (a *assembler) applyTool(l *lexer, td *toolDelta) bool {
	var t *toolAcc
	switch {
	case td.hasIndex:
		t = a.tool(td.index)
	case a.positional:
		t = a.tool(td.pos)
	case !td.id.empty():
		for i := range a.tools {
			if l.equal(td.id, string(a.tools[i].id)) {
				t = &a.tools[i]
				break
			}
		}
		if t == nil {
			t = a.tool(a.nextIndex())
		}
	case len(a.tools) > 0:
		t = &a.tools[len(a.tools)-1]
	default:
		t = a.tool(0)
	}
	if !td.id.empty() && len(t.id) == 0 {
		t.id = l.appendStr(t.id, td.id)
	}
	if !td.typ.empty() && len(t.typ) == 0 {
		t.typ = l.appendStr(t.typ, td.typ)
	}
	if !td.name.empty() && len(t.name) == 0 {
		t.name = l.appendStr(t.name, td.name)
	}
	if !td.args.empty() {
		t.args = l.appendStr(t.args, td.args)
	}
	return true
}

func (a *assembler) nextIndex() int {
	n := 0
	for i := range a.tools {
		n = max(n, a.tools[i].index+1)
	}
	return n
}

// tool returns the accumulator for index, creating it.
func (a *assembler) tool(index int) *toolAcc {
	for i := range a.tools {
		if a.tools[i].index == index {
			return &a.tools[i]
		}
	}
	if len(a.tools) < cap(a.tools) {
		a.tools = a.tools[:len(a.tools)+1]
		t := &a.tools[len(a.tools)-1]
		t.index = index
		t.id, t.typ, t.name, t.args = t.id[:0], t.typ[:0], t.name[:0], t.args[:0]
		return t
	}
	a.tools = append(a.tools, toolAcc{index: index})
	return &a.tools[len(a.tools)-1]
}

// end flushes held-back bytes of the think filter.
func (a *assembler) end() {
	a.filter.flush(&a.content, &a.thinking)
}

// fill writes the assembled answer into r.
func (a *assembler) fill(r *core.LLMResponse) {
	content := a.content
	thinking := a.thinking
	if a.filter.stripped {
		content = bytes.TrimLeft(content, " \t\r\n")
		thinking = bytes.TrimSpace(thinking)
	}
	r.Content = string(content)
	if len(thinking) > 0 {
		r.Thinking = string(thinking)
	}
	r.FinishReason = a.finish
	if len(a.tools) > 0 {
		tools := make([]core.ToolCall, len(a.tools))
		for i := range a.tools {
			t := &a.tools[i]
			typ := "function"
			if len(t.typ) > 0 {
				typ = string(t.typ)
			}
			tools[i] = core.ToolCall{
				Index:     t.index,
				ID:        string(t.id),
				Type:      typ,
				Name:      string(t.name),
				Arguments: string(t.args),
			}
		}
		slices.SortStableFunc(tools, func(x, y core.ToolCall) int { return x.Index - y.Index })
		r.ToolCalls = tools
	}
}

// internFinish returns a constant string for the common finish reasons.
func internFinish(b []byte, l *lexer, s span) string {
	if !s.esc {
		switch string(b) {
		case "stop":
			return "stop"
		case "length":
			return "length"
		case "tool_calls":
			return "tool_calls"
		case "content_filter":
			return "content_filter"
		case "function_call":
			return "function_call"
		case "end_turn":
			return "end_turn"
		}
	}
	return l.string(s)
}
