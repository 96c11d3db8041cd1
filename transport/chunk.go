package transport

// usageVals is one usage object as sent (OpenAI or Anthropic-style names).
type usageVals struct {
	prompt, completion, total          int64
	hasPrompt, hasCompletion, hasTotal bool
	// cached is the part of prompt served from the provider's prompt cache
	// (OpenAI prompt_tokens_details.cached_tokens, DeepSeek
	// prompt_cache_hit_tokens).
	cached int64
}

// complete reports whether the usage object carries both halves (completion
// may be derived from total − prompt).
func (u usageVals) complete() bool {
	return u.hasPrompt && (u.hasCompletion || u.hasTotal)
}

// tokens returns prompt and completion tokens of a complete usage object.
func (u usageVals) tokens() (prompt, completion int) {
	c := u.completion
	if !u.hasCompletion {
		c = max(u.total-u.prompt, 0)
	}
	return int(u.prompt), int(c)
}

// toolDelta is one element of a delta's (or message's) tool_calls.
type toolDelta struct {
	index    int
	hasIndex bool
	// pos is the element's position in its array.
	pos                 int
	id, typ, name, args span
}

// chunk is one decoded streaming chunk or non-streaming response body,
// reduced to the fields the transport uses. Its spans refer to the lexer's
// data and are valid until the lexer is reset.
type chunk struct {
	// isError: a top-level "error" (non-null) or "type":"error" was present.
	isError bool
	// baseCode is MiniMax's base_resp.status_code (0 = success).
	baseCode int64
	model    span
	usage    usageVals

	// Fields of the picked choice (index 0, or the first without an index).
	picked bool
	// message: the picked choice carries its answer — a "message" or
	// "delta" object, or a legacy "text" string. A non-stream body whose
	// choice has none holds no answer.
	message     bool
	content     []span
	refusal     span
	reasoningC  span // reasoning_content
	reasoning   span // reasoning
	details     []span
	finish      span
	tools       []toolDelta
	choiceUsage usageVals
}

func (c *chunk) reset() {
	c.isError = false
	c.baseCode = 0
	c.model = span{}
	c.usage = usageVals{}
	c.resetChoice()
}

func (c *chunk) resetChoice() {
	c.picked = false
	c.message = false
	c.content = c.content[:0]
	c.refusal = span{}
	c.reasoningC = span{}
	c.reasoning = span{}
	c.details = c.details[:0]
	c.finish = span{}
	c.tools = c.tools[:0]
	c.choiceUsage = usageVals{}
}

// parseChunk decodes data (one JSON object) into c. It returns false when
// data is not a well-formed JSON object.
func parseChunk(l *lexer, c *chunk, data []byte) bool {
	l.reset(data)
	c.reset()
	if !l.open('{') {
		return false
	}
	first := true
	for l.more('}', &first) {
		switch string(l.key()) {
		case "error":
			switch l.peek() {
			case 'n', 'f':
				l.skip()
			case '"':
				if !l.str().empty() {
					c.isError = true
				}
			default:
				c.isError = true
				l.skip()
			}
		case "type":
			if s := l.strOrNull(); l.equal(s, "error") {
				c.isError = true
			}
		case "object":
			if s := l.strOrNull(); l.equal(s, "error") {
				c.isError = true
			}
		case "base_resp":
			parseBaseResp(l, c)
		case "choices":
			parseChoices(l, c)
		case "usage":
			parseUsage(l, &c.usage)
		case "model":
			c.model = l.strOrNull()
		default:
			l.skip()
		}
	}
	l.finish()
	return !l.err
}

func parseBaseResp(l *lexer, c *chunk) {
	if !l.open('{') {
		return
	}
	first := true
	for l.more('}', &first) {
		if string(l.key()) == "status_code" {
			if n, ok := l.int(); ok {
				c.baseCode = n
			}
			continue
		}
		l.skip()
	}
}

func parseUsage(l *lexer, u *usageVals) {
	if !l.open('{') {
		return
	}
	var v usageVals
	first := true
	for l.more('}', &first) {
		switch string(l.key()) {
		case "prompt_tokens", "input_tokens":
			v.prompt, v.hasPrompt = l.int()
		case "completion_tokens", "output_tokens":
			v.completion, v.hasCompletion = l.int()
		case "total_tokens":
			v.total, v.hasTotal = l.int()
		case "prompt_cache_hit_tokens":
			v.cached, _ = l.int()
		case "prompt_tokens_details":
			parseCachedDetails(l, &v)
		default:
			l.skip()
		}
	}
	*u = v
}

// parseCachedDetails reads cached_tokens out of prompt_tokens_details.
func parseCachedDetails(l *lexer, v *usageVals) {
	if !l.open('{') {
		return
	}
	first := true
	for l.more('}', &first) {
		if string(l.key()) == "cached_tokens" {
			v.cached, _ = l.int()
			continue
		}
		l.skip()
	}
}

func parseChoices(l *lexer, c *chunk) {
	if !l.open('[') {
		return
	}
	first := true
	for l.more(']', &first) {
		if c.picked {
			l.skip()
			continue
		}
		if idx := parseChoice(l, c); idx <= 0 {
			c.picked = true
		} else {
			c.resetChoice()
		}
	}
}

// parseChoice reads one choice into c and returns its index (-1 if absent).
func parseChoice(l *lexer, c *chunk) int64 {
	idx := int64(-1)
	if !l.open('{') {
		return 1 // not an object: never picked
	}
	first := true
	for l.more('}', &first) {
		switch string(l.key()) {
		case "index":
			if n, ok := l.int(); ok {
				idx = n
			}
		case "delta", "message":
			if parseDelta(l, c) {
				c.message = true
			}
		case "text":
			if s := l.strOrNull(); s.set {
				c.content = append(c.content, s)
				c.message = true
			}
		case "finish_reason":
			c.finish = l.strOrNull()
		case "usage":
			parseUsage(l, &c.choiceUsage)
		default:
			l.skip()
		}
	}
	return idx
}

// parseDelta reads a delta or message object into c; it reports whether
// the value was an object.
func parseDelta(l *lexer, c *chunk) bool {
	if !l.open('{') {
		return false
	}
	first := true
	for l.more('}', &first) {
		switch string(l.key()) {
		case "content":
			parseContent(l, c)
		case "refusal":
			c.refusal = l.strOrNull()
		case "reasoning_content":
			c.reasoningC = l.strOrNull()
		case "reasoning":
			c.reasoning = l.strOrNull()
		case "reasoning_details":
			parseDetails(l, c)
		case "tool_calls":
			parseTools(l, c)
		case "function_call":
			// Legacy single function call: one tool call at index 0.
			td := toolDelta{index: 0, hasIndex: true}
			parseFunction(l, &td)
			c.tools = append(c.tools, td)
		default:
			l.skip()
		}
	}
	return true
}

// parseContent accepts a string, null, or an array of {type:"text",text}
// parts (some servers answer with content arrays).
func parseContent(l *lexer, c *chunk) {
	switch l.peek() {
	case '"':
		c.content = append(c.content, l.str())
		return
	case '[':
	default:
		l.skip()
		return
	}
	l.open('[')
	first := true
	for l.more(']', &first) {
		if !l.open('{') {
			continue
		}
		var text span
		textType := true
		f := true
		for l.more('}', &f) {
			switch string(l.key()) {
			case "text":
				text = l.strOrNull()
			case "type":
				if s := l.strOrNull(); s.set && !l.equal(s, "text") && !l.equal(s, "output_text") {
					textType = false
				}
			default:
				l.skip()
			}
		}
		if textType && text.set {
			c.content = append(c.content, text)
		}
	}
}

func parseDetails(l *lexer, c *chunk) {
	if !l.open('[') {
		return
	}
	first := true
	for l.more(']', &first) {
		if !l.open('{') {
			continue
		}
		f := true
		for l.more('}', &f) {
			if string(l.key()) == "text" {
				if s := l.strOrNull(); s.set {
					c.details = append(c.details, s)
				}
				continue
			}
			l.skip()
		}
	}
}

func parseTools(l *lexer, c *chunk) {
	if !l.open('[') {
		return
	}
	first := true
	pos := 0
	for l.more(']', &first) {
		td := toolDelta{pos: pos}
		pos++
		if !l.open('{') {
			continue
		}
		f := true
		for l.more('}', &f) {
			switch string(l.key()) {
			case "index":
				if n, ok := l.int(); ok {
					td.index, td.hasIndex = int(min(n, 1<<20)), true
				}
			case "id":
				td.id = l.strOrNull()
			case "type":
				td.typ = l.strOrNull()
			case "function":
				parseFunction(l, &td)
			default:
				l.skip()
			}
		}
		c.tools = append(c.tools, td)
	}
}

// parseFunction reads {name, arguments}; arguments may be a JSON string
// (OpenAI) or an object (some servers), kept verbatim then.
func parseFunction(l *lexer, td *toolDelta) {
	if !l.open('{') {
		return
	}
	first := true
	for l.more('}', &first) {
		switch string(l.key()) {
		case "name":
			td.name = l.strOrNull()
		case "arguments":
			switch l.peek() {
			case '"':
				td.args = l.str()
			case '{', '[':
				td.args = l.rawValue()
			default:
				l.skip()
			}
		default:
			l.skip()
		}
	}
}
