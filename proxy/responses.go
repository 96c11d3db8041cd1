package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/polygateway/polygateway"
)

// This file serves the OpenAI Responses API (POST /v1/responses) as a
// translation onto the chat call: the request becomes the chat request the
// chat completions endpoint builds (responses_request.go), served by the
// same serveChat — admission, routes, fallbacks, budgets, commit policy,
// governance, log line — and the answer goes back as a response object,
// or as the Responses event stream (responses_stream.go).

// handleResponses serves POST /v1/responses.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	s.serveChat(w, r, readResponses)
}

// readResponses is the chatAPI of the Responses API.
func readResponses(body []byte) (*chatRequest, chatAnswer, error) {
	req, ans, err := decodeResponses(bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	return req, ans, nil
}

// responseEcho is what a response object repeats of its request, as
// OpenAI's does.
type responseEcho struct {
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Metadata           map[string]string `json:"metadata"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              json.RawMessage   `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	User               *string           `json:"user,omitempty"`
}

// defaultEcho is the echo of a request that sets nothing.
func defaultEcho() responseEcho {
	return responseEcho{
		Metadata: map[string]string{}, ParallelToolCalls: true, Truncation: "disabled",
		Text: json.RawMessage(`{"format":{"type":"text"}}`), ToolChoice: json.RawMessage(`"auto"`), Tools: json.RawMessage(`[]`),
	}
}

// responseObject is a Responses API response object.
type responseObject struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	Error             *responseError     `json:"error"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Model             string             `json:"model"`
	Output            []responseItem     `json:"output"`
	// OutputText is the text of every output_text part, joined: the
	// convenience the SDKs offer, in the body for clients without one.
	OutputText string         `json:"output_text"`
	Usage      *responseUsage `json:"usage"`
	responseEcho
	Gateway *gatewayInfo `json:"gateway,omitempty"`
}

// responseError is the error of a failed response.
type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// incompleteDetails says why a response is incomplete.
type incompleteDetails struct {
	Reason string `json:"reason"`
}

// responseUsage is a response's token usage. The output tokens' details
// (reasoning tokens) are left out: the chat answer does not tell them.
type responseUsage struct {
	InputTokens        int               `json:"input_tokens"`
	InputTokensDetails inputTokenDetails `json:"input_tokens_details"`
	OutputTokens       int               `json:"output_tokens"`
	TotalTokens        int               `json:"total_tokens"`
}

// inputTokenDetails are the details of a response's input tokens.
type inputTokenDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// responseItem is one output item: a *messageItem, *reasoningItem or
// *functionCallItem.
type responseItem interface{ outputItem() }

// messageItem is an assistant message of the output.
type messageItem struct {
	Type    string       `json:"type"` // "message"
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// outputText is the output_text part of a message.
type outputText struct {
	Type        string     `json:"type"` // "output_text"
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

// reasoningItem carries the reasoning text an upstream sent, as its
// summary: the form the SDKs surface (it is the whole reasoning, not a
// summary of it).
type reasoningItem struct {
	Type    string        `json:"type"` // "reasoning"
	ID      string        `json:"id"`
	Summary []summaryText `json:"summary"`
}

// summaryText is a summary part of a reasoning item.
type summaryText struct {
	Type string `json:"type"` // "summary_text"
	Text string `json:"text"`
}

// functionCallItem is a function call the model asks for.
type functionCallItem struct {
	Type      string `json:"type"` // "function_call"
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

func (*messageItem) outputItem()      {}
func (*reasoningItem) outputItem()    {}
func (*functionCallItem) outputItem() {}

// newMessageItem returns a message item with one output_text part.
func newMessageItem(id, status, text string) *messageItem {
	return &messageItem{Type: "message", ID: id, Status: status, Role: "assistant", Content: []outputText{newOutputText(text)}}
}

// newOutputText returns an output_text part without annotations.
func newOutputText(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: []struct{}{}}
}

// newReasoningItem returns a reasoning item whose summary is text.
func newReasoningItem(id, text string) *reasoningItem {
	return &reasoningItem{Type: "reasoning", ID: id, Summary: []summaryText{{Type: "summary_text", Text: text}}}
}

// newFunctionCallItem returns the item of tool call i of the answer of
// call callID, at output index index.
func newFunctionCallItem(callID string, index, i int, tc polygateway.ToolCall, status string) *functionCallItem {
	id := tc.ID
	if id == "" {
		id = "call_" + callID + "_" + strconv.Itoa(i)
	}
	return &functionCallItem{Type: "function_call", ID: itemID("fc", callID, index), CallID: id, Name: tc.Name, Arguments: tc.Arguments, Status: status}
}

// itemID names the output item at index of the answer of call callID.
func itemID(prefix, callID string, index int) string {
	return prefix + "_" + callID + "_" + strconv.Itoa(index)
}

// responseStatus is the status of a response to resp: incomplete when the
// answer stopped at its token limit or at a content filter.
func responseStatus(resp *polygateway.LLMResponse) (string, *incompleteDetails) {
	switch resp.FinishReason {
	case "length":
		return "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		return "incomplete", &incompleteDetails{Reason: "content_filter"}
	}
	return "completed", nil
}

// answerOutput is the output of a response to resp: the reasoning, the
// message (present unless the answer is only tool calls), the tool calls.
func answerOutput(callID string, resp *polygateway.LLMResponse, status string) []responseItem {
	out := make([]responseItem, 0, 2+len(resp.ToolCalls))
	if resp.Thinking != "" {
		out = append(out, newReasoningItem(itemID("rs", callID, len(out)), resp.Thinking))
	}
	if resp.Content != "" || len(resp.ToolCalls) == 0 {
		out = append(out, newMessageItem(itemID("msg", callID, len(out)), status, resp.Content))
	}
	for i, tc := range resp.ToolCalls {
		out = append(out, newFunctionCallItem(callID, len(out), i, tc, "completed"))
	}
	return out
}

// outputTextOf joins the output_text of every message item of out.
func outputTextOf(out []responseItem) string {
	var b strings.Builder
	for _, it := range out {
		if m, ok := it.(*messageItem); ok {
			for _, c := range m.Content {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// usageOfResponse is the usage of a response to resp.
func usageOfResponse(resp *polygateway.LLMResponse) *responseUsage {
	return &responseUsage{
		InputTokens: resp.PromptTokens, InputTokensDetails: inputTokenDetails{CachedTokens: resp.CachedPromptTokens},
		OutputTokens: resp.CompletionTokens, TotalTokens: resp.PromptTokens + resp.CompletionTokens,
	}
}

// responsesAnswer renders the answer of one Responses request
// (chatAnswer).
type responsesAnswer struct {
	echo responseEcho
}

var _ chatAnswer = (*responsesAnswer)(nil)

// object returns the response object of call callID, without output.
func (a *responsesAnswer) object(callID string, created int64, model, status string) *responseObject {
	return &responseObject{
		ID: "resp_" + callID, Object: "response", CreatedAt: created, Status: status, Model: model,
		Output: []responseItem{}, responseEcho: a.echo,
	}
}

// finished returns the response object of the answer resp.
func (a *responsesAnswer) finished(resp *polygateway.LLMResponse, created int64, model string, gw *gatewayInfo) *responseObject {
	status, details := responseStatus(resp)
	o := a.object(resp.CallID, created, model, status)
	o.IncompleteDetails = details
	o.Output = answerOutput(resp.CallID, resp, status)
	o.OutputText = outputTextOf(o.Output)
	o.Usage = usageOfResponse(resp)
	o.Gateway = gw
	return o
}

// body is part of chatAnswer.
func (a *responsesAnswer) body(ri *reqInfo, resp *polygateway.LLMResponse, created int64) ([]byte, error) {
	return json.Marshal(a.finished(resp, created, resp.Model, newGatewayInfo(ri, resp)))
}

// events is part of chatAnswer.
func (a *responsesAnswer) events(callID string, created int64) streamEvents {
	return &responsesStream{ans: a, callID: callID, created: created, open: -1}
}
