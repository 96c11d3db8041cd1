package transport

import (
	"unicode"
	"unicode/utf8"

	"github.com/polygateway/polygateway/core"
)

// Estimation constants (see EstimateTokens).
const (
	// perMessageTokens approximates the chat template's overhead per message.
	perMessageTokens = 4
	// imageTokens is charged per image part (OpenAI's low-detail base cost).
	imageTokens = 85
)

// EstimateTokens estimates the token count of text when the upstream
// reports no usage. Heuristic: ASCII runs cost one token per 4 bytes
// (rounded up per text), each CJK rune (Han, Hiragana, Katakana, Hangul)
// one token, every other non-ASCII rune half a token. It never returns less
// than 1 for non-empty text.
func EstimateTokens(text string) int {
	if text == "" {
		return 0
	}
	ascii, cjk, other := 0, 0, 0
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if isCJK(r) {
			cjk++
		} else {
			other++
		}
	}
	n := (ascii+3)/4 + cjk + (other+1)/2
	return max(n, 1)
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// EstimatePromptTokens estimates the prompt tokens of msgs: per message
// a fixed overhead of 4 tokens plus EstimateTokens of its text (content or
// text parts, name), and 85 tokens per image part.
func EstimatePromptTokens(msgs []core.Message) int {
	n := 0
	for i := range msgs {
		m := &msgs[i]
		n += perMessageTokens + EstimateTokens(m.Name)
		if len(m.Parts) == 0 {
			n += EstimateTokens(m.Content)
			continue
		}
		for _, p := range m.Parts {
			if p.IsImage() {
				n += imageTokens
				continue
			}
			n += EstimateTokens(p.Text)
		}
	}
	return n
}

// estimateCompletion estimates the completion tokens of an answer.
func estimateCompletion(r *core.LLMResponse) int {
	n := EstimateTokens(r.Content) + EstimateTokens(r.Thinking)
	for _, t := range r.ToolCalls {
		n += EstimateTokens(t.Name) + EstimateTokens(t.Arguments)
	}
	return n
}
