package kernel

import (
	"context"

	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/polygateway/polygateway/internal/redact"
	"github.com/polygateway/polygateway/internal/transport"

	"github.com/polygateway/polygateway/core"
)

// refusalPhrases are the openings of a refusal. They are only looked for in
// short answers, where a refusal is the whole answer.
var refusalPhrases = [...]string{
	"i can't help with", "i cannot help with", "i can't assist", "i cannot assist",
	"i'm sorry, but i can't", "i'm sorry, but i cannot", "i am sorry, but i cannot",
	"i'm unable to help", "i am unable to help", "as an ai language model",
	"抱歉，我无法", "对不起，我无法", "我无法回答", "作为一个ai",
}

// refusalMaxChars bounds the answers checked for refusal phrases.
const refusalMaxChars = 300

// qualityProblem returns why resp fails the quality guard, or "".
func qualityProblem(resp *core.LLMResponse, q core.QualitySettings) string {
	if resp.FinishReason == "length" {
		return "the answer was cut at the token limit (finish_reason length)"
	}
	if len(resp.ToolCalls) > 0 {
		return ""
	}
	text := strings.TrimSpace(resp.Content)
	n := utf8.RuneCountInString(text)
	if n < q.MinChars || n == 0 {
		return fmt.Sprintf("the answer has %d characters, fewer than %d", n, max(q.MinChars, 1))
	}
	if n <= refusalMaxChars {
		// Models write the apostrophe typographically too ("I’m sorry,
		// but I can’t"): read as the straight one.
		lower := strings.ToLower(strings.ReplaceAll(text, "\u2019", "'"))
		for _, p := range refusalPhrases {
			if strings.HasPrefix(lower, p) {
				return "the answer is a refusal"
			}
		}
	}
	if p, k := repetitionTail(text); k > 0 {
		return fmt.Sprintf("the answer ends in a repetition loop (%d repeats of a %d-byte unit)", k, p)
	}
	return ""
}

// Repetition-loop thresholds: the tail of an answer that repeats a unit of
// up to maxLoopUnit bytes at least minLoopRepeats times, covering at least
// minLoopBytes, is a generation loop.
const (
	maxLoopUnit    = 200
	minLoopRepeats = 4
	minLoopBytes   = 120
	loopScanBytes  = 4096
)

// repetitionTail looks for a unit repeated at the end of text and returns
// its length and repeat count (0, 0 when there is no loop).
func repetitionTail(text string) (unit, repeats int) {
	if len(text) > loopScanBytes {
		text = text[len(text)-loopScanBytes:]
	}
	for p := 1; p <= maxLoopUnit && 2*p <= len(text); p++ {
		k := 1
		for end := len(text) - p; end-p >= 0 && text[end-p:end] == text[end:end+p]; end -= p {
			k++
		}
		if k >= minLoopRepeats && k*p >= minLoopBytes {
			return p, k
		}
	}
	return 0, 0
}

// chatUpstream is the engine's chat upstream: the OpenAI transport, then the
// quality guard (when the scope turns it on) and the call's own check. A
// refused answer is a ResultInvalidError carrying the answer: reason
// low_quality for the guard (the engine tries another source), none for a
// failed check (the call ends with it).
type chatUpstream struct {
	t       *transport.Client
	quality core.QualitySettings
}

var _ core.Upstream = chatUpstream{}

// Do implements core.Upstream.
func (u chatUpstream) Do(ctx context.Context, src *core.SourceConfig, call *core.Call) (*core.LLMResponse, error) {
	resp, err := u.t.Do(ctx, src, call)
	if err != nil || resp == nil {
		return resp, err
	}
	whole := resp
	if call.Continuation && len(call.Messages) > 0 {
		// A continuation's answer is the tail of its trailing assistant
		// prefill: the guard and the check judge the whole answer.
		w := *resp
		w.Content = call.Messages[len(call.Messages)-1].Content + resp.Content
		whole = &w
	}
	if u.quality.Guard {
		if problem := qualityProblem(whole, u.quality); problem != "" {
			return resp, refused(src, core.ReasonLowQuality, whole.Content, problem, nil)
		}
	}
	if call.Check != nil {
		if cerr := call.Check(whole); cerr != nil {
			return resp, refused(src, "", whole.Content, cerr.Error(), cerr)
		}
		resp.StructuredData = whole.StructuredData // what the check decoded
	}
	return resp, nil
}

// chatTokens estimates a chat call's size for the context windows and the
// budget reservations: its prompt plus the most tokens it may generate
// (max_completion_tokens or max_tokens, when given), and that most.
func chatTokens(call *core.Call) (total, output int) {
	n := transport.EstimatePromptTokens(call.Messages)
	if out, ok := core.OutputLimit(call.Params); ok {
		return n + out, out
	}
	return n, 0
}

// maxRawInError bounds the answer kept in the Raw of a ResultInvalidError
// (the whole answer is returned beside the error).
const maxRawInError = 4 << 10

// maxMessageInError bounds the Message of a ResultInvalidError: a check's
// error may list every fault of a long answer, or quote its values, and
// the message goes into the error text, the telemetry row and a
// structured call's re-ask.
const maxMessageInError = 1 << 10

// refused returns the ResultInvalidError of an answer of src that failed a
// check (reason "") or the quality guard (ReasonLowQuality), by the
// library's one redaction rule: src's API key is removed from the message
// and the cause, and from the answer and the message before they are cut
// to maxRawInError for Raw and maxMessageInError for Message. The answer
// returned beside the error stays as the source sent it.
func refused(src *core.SourceConfig, reason core.Reason, raw, msg string, cause error) error {
	r := redact.New(src.APIKey)
	return &core.ResultInvalidError{Source: src.Name, Reason: reason, Raw: r.Cut(raw, maxRawInError),
		Message: r.Cut(msg, maxMessageInError), Err: r.Error(cause)}
}
