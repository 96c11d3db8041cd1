package embed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
)

// Response is the result of one Embed call.
type Response struct {
	// Vectors holds one vector per input, in input order. Never nil on
	// success (empty for an empty input). The vectors of one batch share
	// a few backing arrays (allocated as the answer arrived); each
	// vector's capacity is its length, so an append copies rather than
	// overwrites a neighbour.
	Vectors [][]float32
	// Dim is the length of every vector (0 for an empty input).
	Dim int
	// Model, Provider and SourceName say which source answered the last
	// batch (batches may be answered by different sources after a
	// failover; each batch's telemetry row names its own).
	Model, Provider, SourceName string
	// PromptTokens is the sum over all batches.
	PromptTokens int
	// UsageSource is "estimated" if any batch's usage was estimated, else
	// "bounded" if a batch's answer claimed more than its texts could use
	// (settled at their bound), else "measured".
	UsageSource string
	// Latency is the wall time of the whole Embed call.
	Latency time.Duration
	// CallID identifies this Embed call; every batch row's parent_call_id
	// is CallID, unless the caller set polygateway.WithParentCallID (see
	// the package documentation).
	CallID string
	// Cost is the sum of the batches' costs; nil if any batch had no price.
	// An empty input costs 0.
	Cost *float64
	// BatchCallIDs are the call_ids of the batches' telemetry rows, in
	// batch order.
	BatchCallIDs []string
	// QueueWait is the time the batches waited in the admission queue for
	// full gates, summed (0 when none waited; batches sent in parallel
	// may have waited at the same time).
	QueueWait time.Duration
}

// BatchError is the failure of one batch of an Embed call. It wraps the
// governed call's error, so errors.As finds its class
// (*polygateway.TransientError, *polygateway.RequestRejectedError, …) and
// errors.Is(err, context.Canceled) holds for a cancelled call.
type BatchError struct {
	// Batch is the 0-based number of the batch.
	Batch int
	// Offset and Count locate the batch's inputs: texts[Offset:Offset+Count].
	Offset, Count int
	// CallID is the call_id of the batch's telemetry row.
	CallID string
	// Err is the batch's error.
	Err error
}

// Error names the batch, its inputs and the batch's error.
func (e *BatchError) Error() string {
	return "polygateway: embed batch " + strconv.Itoa(e.Batch) + " (inputs " + strconv.Itoa(e.Offset) + ".." +
		strconv.Itoa(e.Offset+e.Count-1) + "): " + e.Err.Error()
}

// Unwrap returns the batch's error.
func (e *BatchError) Unwrap() error { return e.Err }

// Is reports whether target is polygateway.ErrGateway.
func (e *BatchError) Is(target error) bool { return target == polygateway.ErrGateway }

// Embed returns one vector per text, in order. Inputs beyond BATCH_SIZE are
// split into batches, each one governed call (see the package
// documentation). An empty input returns an empty Response without any
// network call. Before any network call, more than MAX_INPUTS texts
// (code "too_many_inputs"), texts whose lengths sum to more than
// MAX_INPUT_BYTES ("input_too_large") and an empty string anywhere in texts
// ("empty_input", naming its index) are a *polygateway.RequestRejectedError.
// The call options used are WithSessionID, WithParentCallID, WithParams,
// WithBudget, WithoutPushbackWait, and WithPriority and WithTenant (every
// batch waits in the admission queue in the call's place); the others do
// not apply to embeddings.
func (c *Client) Embed(ctx context.Context, texts []string, opts ...polygateway.CallOption) (*Response, error) {
	if c.k.Closed() {
		return nil, polygateway.ErrClientClosed
	}
	if err := kernel.CheckContext(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := c.checkInputs(texts); err != nil {
		return nil, err
	}
	out := &Response{CallID: polygateway.NewCallID(), UsageSource: core.UsageMeasured}
	if len(texts) == 0 {
		zero := 0.0
		out.Vectors, out.Cost, out.BatchCallIDs = [][]float32{}, &zero, []string{}
		out.Latency = time.Since(start)
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, &polygateway.CanceledError{Err: err}
	}
	co := kernel.ResolveCall(opts)
	parent := co.ParentCallID
	if parent == "" {
		parent = out.CallID
	}
	batches := c.split(texts, co, parent, out)
	// The memory the batches' answers reserved on the context's budget
	// is held until the call is done.
	defer func() {
		for b := range batches {
			batches[b].held.release()
		}
	}()
	if err := c.run(ctx, batches); err != nil {
		return nil, err
	}
	if err := c.oneDimension(batches); err != nil {
		return nil, err
	}
	out.merge(batches, len(texts))
	out.Latency = time.Since(start)
	return out, nil
}

// split cuts texts into batches of at most BatchSize, each its own call
// (child of parent) with the options co; the batches' call IDs are recorded
// on out in order.
func (c *Client) split(texts []string, co kernel.CallOptions, parent string, out *Response) []batch {
	// A BATCH_SIZE beyond the texts is one batch (and len+bs-1 could wrap).
	bs := min(c.cfg.BatchSize, len(texts))
	nb := (len(texts) + bs - 1) / bs
	batches := make([]batch, nb)
	out.BatchCallIDs = make([]string, nb)
	for b := range batches {
		lo := b * bs
		hi := min(lo+bs, len(texts))
		id := polygateway.NewCallID()
		out.BatchCallIDs[b] = id
		batches[b] = batch{texts: texts[lo:hi:hi], call: &core.Call{
			ID:             id,
			Operation:      "embeddings",
			Params:         co.Params,
			SessionID:      co.SessionID,
			ParentCallID:   parent,
			Budgets:        co.Budgets,
			NoPushbackWait: co.NoPushbackWait,
			Place:          co.Place,
			Tokens:         estimateTokens(texts[lo:hi]),
			InputBytes:     textBytes(texts[lo:hi]),
		}}
	}
	return batches
}

// merge fills out from the batches' answers, in order: the vectors, the
// summed prompt tokens and cost (unknown when a batch's is), the least
// certain usage source, and the model, provider and source of the last
// batch.
func (out *Response) merge(batches []batch, n int) {
	out.Vectors = make([][]float32, 0, n)
	var cost float64
	costOK := true
	for _, bt := range batches {
		r := bt.resp
		out.Vectors = append(out.Vectors, bt.vecs...)
		out.PromptTokens += r.PromptTokens
		out.QueueWait += bt.call.QueueWait
		switch {
		case r.UsageSource == core.UsageEstimated:
			out.UsageSource = core.UsageEstimated
		case r.UsageSource == core.UsageBounded && out.UsageSource == core.UsageMeasured:
			out.UsageSource = core.UsageBounded
		}
		if r.Cost == nil {
			costOK = false
		} else {
			cost += *r.Cost
		}
	}
	if costOK {
		out.Cost = &cost
	}
	last := batches[len(batches)-1].resp
	out.Model, out.Provider, out.SourceName = last.Model, last.Provider, last.SourceName
	out.Dim = len(out.Vectors[0])
}

// checkInputs refuses, before any batch is sent, more texts than
// MAX_INPUTS (code too_many_inputs), texts longer in sum than
// MAX_INPUT_BYTES (input_too_large) and empty texts (empty_input).
func (c *Client) checkInputs(texts []string) error {
	if len(texts) > c.cfg.MaxInputs {
		return &polygateway.RequestRejectedError{Code: "too_many_inputs",
			Message: fmt.Sprintf("%d embedding inputs, more than the limit of %d (%s__%s)", len(texts), c.cfg.MaxInputs, c.scope, keyMaxInputs)}
	}
	total := 0
	for i, t := range texts {
		if t == "" {
			return &polygateway.RequestRejectedError{Code: "empty_input",
				Message: fmt.Sprintf("texts[%d] is an empty string: every embedding input must be non-empty", i)}
		}
		if total += len(t); total > c.cfg.MaxInputBytes {
			return &polygateway.RequestRejectedError{Code: "input_too_large",
				Message: fmt.Sprintf("the embedding inputs up to texts[%d] hold more than the limit of %d bytes (%s__%s)", i, c.cfg.MaxInputBytes, c.scope, keyMaxBytes)}
		}
	}
	return nil
}

// batch is one governed call of an Embed call: its inputs, and once it
// succeeded, its vectors and response.
type batch struct {
	texts []string
	call  *core.Call
	vecs  [][]float32
	resp  *core.LLMResponse
	// held is what the batch's answer keeps reserved on the memory budget.
	held held
}

// check validates a batch's vectors after the upstream's own checks: one
// per input, one dimension, EXPECTED_DIM. Failing here makes the attempt a
// ResultInvalidError while the billed answer is still recorded.
func (c *Client) check(vecs [][]float32, inputs int) error {
	if len(vecs) != inputs {
		return fmt.Errorf("embedding answer has %d vectors for %d inputs", len(vecs), inputs)
	}
	if len(vecs) == 0 {
		return errors.New("embedding answer has no vectors")
	}
	dim := len(vecs[0])
	for i, v := range vecs {
		if len(v) != dim {
			return fmt.Errorf("vector %d has %d dimensions, vector 0 has %d", i, len(v), dim)
		}
	}
	if c.cfg.ExpectedDim > 0 && dim != c.cfg.ExpectedDim {
		return fmt.Errorf("vectors have %d dimensions, %s__%s is %d", dim, c.scope, keyExpectedDim, c.cfg.ExpectedDim)
	}
	return nil
}

// oneDimension holds the batches of one call to one vector length: each
// batch's own answer is checked alone, and after a failover two batches
// may have been answered by sources of models with other dimensions. Such
// a mix is never returned: the first batch that differs from batch 0 ends
// the call with a ResultInvalidError naming both sources.
func (c *Client) oneDimension(batches []batch) error {
	dim := len(batches[0].vecs[0])
	for b := 1; b < len(batches); b++ {
		bt := &batches[b]
		if d := len(bt.vecs[0]); d != dim {
			return &BatchError{Batch: b, Offset: b * c.cfg.BatchSize, Count: len(bt.texts), CallID: bt.call.ID,
				Err: &polygateway.ResultInvalidError{Source: bt.resp.SourceName,
					Message: fmt.Sprintf("batch %d has vectors of %d dimensions from %s, batch 0 has %d from %s: one call's vectors share one dimension",
						b, d, bt.resp.SourceName, dim, batches[0].resp.SourceName)}}
		}
	}
	return nil
}

// run performs the batches, one after another or with up to
// Config.Concurrency in flight; the first failure ends the call and
// cancels the batches still running.
func (c *Client) run(ctx context.Context, batches []batch) error {
	batchErr := func(b int, err error) error {
		return &BatchError{Batch: b, Offset: b * c.cfg.BatchSize, Count: len(batches[b].texts), CallID: batches[b].call.ID, Err: err}
	}
	workers := min(c.cfg.Concurrency, len(batches))
	if workers <= 1 {
		for b := range batches {
			if err := c.invoke(ctx, &batches[b]); err != nil {
				return batchErr(b, err)
			}
		}
		return nil
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				b := int(next.Add(1) - 1)
				if b >= len(batches) || wctx.Err() != nil {
					return
				}
				if err := c.invoke(wctx, &batches[b]); err != nil {
					mu.Lock()
					if first == nil {
						first = batchErr(b, err)
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return &polygateway.CanceledError{Err: err}
	}
	return nil
}

// invoke runs one batch as a governed call with a typed attempt.
func (c *Client) invoke(ctx context.Context, b *batch) error {
	vecs, resp, err := kernel.Do(ctx, c.k, b.call, func(ctx context.Context, src *core.SourceConfig) ([][]float32, *core.LLMResponse, error) {
		return c.up.embedHeld(ctx, src, b.texts, b.call.Params, &b.held)
	})
	if err != nil {
		return err
	}
	if len(vecs) != len(b.texts) {
		// A fallback (WithFallback) answered: it has no vectors.
		return &polygateway.ResultInvalidError{Source: resp.SourceName,
			Message: fmt.Sprintf("embedding answer has %d vectors for %d inputs", len(vecs), len(b.texts))}
	}
	b.vecs, b.resp = vecs, resp
	return nil
}
