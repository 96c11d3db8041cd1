package proxy

import (
	"encoding/json"
	"strings"

	"github.com/polygateway/polygateway"
)

// This file writes a streamed chat answer as the Responses API's event
// stream. Each event is an SSE event with its "event:" line and a
// sequence_number:
//
//	response.created, response.in_progress        with the first piece of the answer
//	response.output_item.added                    a reasoning or message item opens
//	response.reasoning_summary_part.added         (reasoning)
//	response.reasoning_summary_text.delta …       the reasoning text, as it comes
//	response.content_part.added                   (message)
//	response.output_text.delta …                  the answer text, as it comes
//	….done, response.output_item.done             the item closes
//	response.output_item.added,                   each tool call, once the answer is whole
//	response.function_call_arguments.delta/.done,
//	response.output_item.done
//	response.completed (or .incomplete)           the response with usage and the gateway object
//
// A stream that cannot complete ends with response.failed and an error
// event, never with response.completed. The streamSink decides what goes
// out and when (the commit policy); this writer only shapes it.

// responsesStream is the streamEvents of one Responses stream. The sink
// serialises its calls.
type responsesStream struct {
	ans     *responsesAnswer
	callID  string
	created int64
	seq     int
	begun   bool
	model   string
	items   []*streamItem
	open    int // index of the open item in items, -1 when none
	message bool
	buf     []byte
}

var _ streamEvents = (*responsesStream)(nil)

// streamItem is an output item of a stream.
type streamItem struct {
	kind string // "message" or "reasoning" (open), "function_call"
	id   string
	text strings.Builder
	done string // status once closed
	call *functionCallItem
}

// item renders it with status.
func (it *streamItem) item(status string) responseItem {
	switch it.kind {
	case "reasoning":
		return newReasoningItem(it.id, it.text.String())
	case "function_call":
		return it.call
	}
	return newMessageItem(it.id, status, it.text.String())
}

// Event shapes.
type (
	eventHead struct {
		Type           string `json:"type"`
		SequenceNumber int    `json:"sequence_number"`
	}
	itemRef struct {
		ItemID      string `json:"item_id"`
		OutputIndex int    `json:"output_index"`
	}
	responseEvent struct {
		eventHead
		Response *responseObject `json:"response"`
	}
	itemEvent struct {
		eventHead
		OutputIndex int          `json:"output_index"`
		Item        responseItem `json:"item"`
	}
	contentPartEvent struct {
		eventHead
		itemRef
		ContentIndex int        `json:"content_index"`
		Part         outputText `json:"part"`
	}
	textDeltaEvent struct {
		eventHead
		itemRef
		ContentIndex int        `json:"content_index"`
		Delta        string     `json:"delta"`
		Logprobs     []struct{} `json:"logprobs"`
	}
	textDoneEvent struct {
		eventHead
		itemRef
		ContentIndex int        `json:"content_index"`
		Text         string     `json:"text"`
		Logprobs     []struct{} `json:"logprobs"`
	}
	summaryPartEvent struct {
		eventHead
		itemRef
		SummaryIndex int         `json:"summary_index"`
		Part         summaryText `json:"part"`
	}
	summaryDeltaEvent struct {
		eventHead
		itemRef
		SummaryIndex int    `json:"summary_index"`
		Delta        string `json:"delta"`
	}
	summaryDoneEvent struct {
		eventHead
		itemRef
		SummaryIndex int    `json:"summary_index"`
		Text         string `json:"text"`
	}
	argumentsDeltaEvent struct {
		eventHead
		itemRef
		Delta string `json:"delta"`
	}
	argumentsDoneEvent struct {
		eventHead
		itemRef
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	// errorEvent carries the error at the top level, as OpenAI documents
	// it, and as an error object, which the SDKs raise.
	errorEvent struct {
		eventHead
		Code    *string     `json:"code"`
		Message string      `json:"message"`
		Param   *string     `json:"param"`
		Error   errorObject `json:"error"`
	}
)

// emit writes event ev of type typ (h is its head).
func (st *responsesStream) emit(out *sseWriter, h *eventHead, typ string, ev any) {
	if out.err != nil {
		return
	}
	h.Type, h.SequenceNumber = typ, st.seq
	st.seq++
	b, err := json.Marshal(ev)
	if err != nil {
		out.err = err
		return
	}
	st.buf = append(st.buf[:0], "event: "...)
	st.buf = append(st.buf, typ...)
	st.buf = append(st.buf, "\ndata: "...)
	st.buf = append(st.buf, b...)
	st.buf = append(st.buf, '\n', '\n')
	out.write(st.buf)
}

// snapshot is the response object as it stands, with status.
func (st *responsesStream) snapshot(status string) *responseObject {
	o := st.ans.object(st.callID, st.created, st.model, status)
	for _, it := range st.items {
		s := it.done
		if s == "" {
			s = "incomplete" // still open: cut short
		}
		o.Output = append(o.Output, it.item(s))
	}
	o.OutputText = outputTextOf(o.Output)
	return o
}

// begin writes response.created and response.in_progress once.
func (st *responsesStream) begin(out *sseWriter, model string) {
	if st.begun {
		return
	}
	st.begun, st.model = true, model
	for _, typ := range []string{"response.created", "response.in_progress"} {
		ev := responseEvent{Response: st.snapshot("in_progress")}
		st.emit(out, &ev.eventHead, typ, &ev)
	}
}

// delta is part of streamEvents: thinking goes to a reasoning item,
// content to a message item, each opened when the text turns to it.
func (st *responsesStream) delta(out *sseWriter, model, content, thinking string) {
	st.begin(out, model)
	if thinking != "" {
		ref := st.into(out, "reasoning")
		st.items[st.open].text.WriteString(thinking)
		ev := summaryDeltaEvent{itemRef: ref, Delta: thinking}
		st.emit(out, &ev.eventHead, "response.reasoning_summary_text.delta", &ev)
	}
	if content != "" {
		ref := st.into(out, "message")
		st.items[st.open].text.WriteString(content)
		ev := textDeltaEvent{itemRef: ref, Delta: content, Logprobs: []struct{}{}}
		st.emit(out, &ev.eventHead, "response.output_text.delta", &ev)
	}
}

// into makes an item of kind the open one, closing another first.
func (st *responsesStream) into(out *sseWriter, kind string) itemRef {
	if st.open >= 0 && st.items[st.open].kind == kind {
		return itemRef{ItemID: st.items[st.open].id, OutputIndex: st.open}
	}
	st.closeOpen(out, "completed")
	index := len(st.items)
	it := &streamItem{kind: kind}
	ref := itemRef{OutputIndex: index}
	if kind == "reasoning" {
		it.id = itemID("rs", st.callID, index)
	} else {
		it.id, st.message = itemID("msg", st.callID, index), true
	}
	ref.ItemID = it.id
	st.items, st.open = append(st.items, it), index
	added := itemEvent{OutputIndex: index, Item: it.item("in_progress")}
	if m, ok := added.Item.(*messageItem); ok {
		m.Content = []outputText{}
	} else {
		added.Item.(*reasoningItem).Summary = []summaryText{}
	}
	st.emit(out, &added.eventHead, "response.output_item.added", &added)
	if kind == "reasoning" {
		ev := summaryPartEvent{itemRef: ref, Part: summaryText{Type: "summary_text"}}
		st.emit(out, &ev.eventHead, "response.reasoning_summary_part.added", &ev)
	} else {
		ev := contentPartEvent{itemRef: ref, Part: newOutputText("")}
		st.emit(out, &ev.eventHead, "response.content_part.added", &ev)
	}
	return ref
}

// closeOpen closes the open item, if any, with status.
func (st *responsesStream) closeOpen(out *sseWriter, status string) {
	if st.open < 0 {
		return
	}
	it, ref := st.items[st.open], itemRef{ItemID: st.items[st.open].id, OutputIndex: st.open}
	text := it.text.String()
	if it.kind == "reasoning" {
		done := summaryDoneEvent{itemRef: ref, Text: text}
		st.emit(out, &done.eventHead, "response.reasoning_summary_text.done", &done)
		part := summaryPartEvent{itemRef: ref, Part: summaryText{Type: "summary_text", Text: text}}
		st.emit(out, &part.eventHead, "response.reasoning_summary_part.done", &part)
	} else {
		done := textDoneEvent{itemRef: ref, Text: text, Logprobs: []struct{}{}}
		st.emit(out, &done.eventHead, "response.output_text.done", &done)
		part := contentPartEvent{itemRef: ref, Part: newOutputText(text)}
		st.emit(out, &part.eventHead, "response.content_part.done", &part)
	}
	it.done = status
	ev := itemEvent{OutputIndex: st.open, Item: it.item(status)}
	st.emit(out, &ev.eventHead, "response.output_item.done", &ev)
	st.open = -1
}

// end is part of streamEvents: it closes the open item, sends an empty
// message for an answer without text or tool calls, then each tool call,
// then response.completed (response.incomplete when the answer stopped at
// its token limit or a content filter).
func (st *responsesStream) end(out *sseWriter, model string, resp *polygateway.LLMResponse, gw *gatewayInfo) {
	st.begin(out, model)
	status, details := responseStatus(resp)
	st.closeOpen(out, status)
	if !st.message && len(resp.ToolCalls) == 0 {
		st.into(out, "message")
		st.closeOpen(out, status)
	}
	for i, tc := range resp.ToolCalls {
		index := len(st.items)
		call := newFunctionCallItem(st.callID, index, i, tc, "in_progress")
		call.Arguments = ""
		added := itemEvent{OutputIndex: index, Item: call}
		st.emit(out, &added.eventHead, "response.output_item.added", &added)
		ref := itemRef{ItemID: call.ID, OutputIndex: index}
		if tc.Arguments != "" {
			ev := argumentsDeltaEvent{itemRef: ref, Delta: tc.Arguments}
			st.emit(out, &ev.eventHead, "response.function_call_arguments.delta", &ev)
		}
		args := argumentsDoneEvent{itemRef: ref, Name: tc.Name, Arguments: tc.Arguments}
		st.emit(out, &args.eventHead, "response.function_call_arguments.done", &args)
		done := newFunctionCallItem(st.callID, index, i, tc, "completed")
		st.items = append(st.items, &streamItem{kind: "function_call", id: done.ID, done: "completed", call: done})
		ev := itemEvent{OutputIndex: index, Item: done}
		st.emit(out, &ev.eventHead, "response.output_item.done", &ev)
	}
	st.model = model
	final := st.snapshot(status)
	final.IncompleteDetails, final.Usage, final.Gateway = details, usageOfResponse(resp), gw
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	ev := responseEvent{Response: final}
	st.emit(out, &ev.eventHead, typ, &ev)
}

// fail is part of streamEvents: response.failed with the error, then an
// error event, which the SDKs raise.
func (st *responsesStream) fail(out *sseWriter, e *apiError) {
	st.begin(out, st.model)
	env := e.envelope().Error
	failed := st.snapshot("failed")
	failed.Error = &responseError{Code: "server_error", Message: env.Message}
	if env.Code != nil {
		failed.Error.Code = *env.Code
	}
	ev := responseEvent{Response: failed}
	st.emit(out, &ev.eventHead, "response.failed", &ev)
	errEv := errorEvent{Code: env.Code, Message: env.Message, Param: env.Param, Error: env}
	st.emit(out, &errEv.eventHead, "error", &errEv)
}
