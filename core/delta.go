package core

// DeltaFlusher is an optional interface of a DeltaSink. A sink that
// implements it may pass each Delta on without flushing it: the transport
// calls FlushDeltas whenever every delta read so far has been given to the
// sink and the next event must come from the network, so nothing waits in
// the sink while the stream waits, and deltas that arrived together leave
// together (one write to a client per network read instead of one per
// delta). Deltas still buffered when the attempt ends are the sink's to
// flush. An error aborts the attempt as a Delta error does.
type DeltaFlusher interface {
	FlushDeltas() error
}

// DeltaKeeper is an optional interface of a DeltaSink that keeps the
// text of every delta it accepts (a relay does, to know what it
// delivered). The transport then keeps no copy of a streamed answer's
// text: Content and Thinking are what the sink kept during the attempt,
// taken from Kept when the stream ends. Kept returns the content and the
// thinking of every delta Delta accepted, each joined into one string, in
// order; it may hold text kept before the attempt in front (the transport
// takes what was added after it began), and Reset may drop text between
// attempts, never during one. The strings must stay as they are (a
// strings.Builder's String is fine).
type DeltaKeeper interface {
	Kept() (content, thinking string)
}

// DeltaModel is an optional interface of a DeltaSink: before the
// first delta of an attempt, and before any delta after the upstream names
// another model, the transport calls SetModel with the model the answer
// names — the one the upstream reports, else the source's configured
// model (the rule of LLMResponse.Model) — so that a relay names in every
// chunk the model its final answer will name.
type DeltaModel interface {
	SetModel(model string)
}
