package polygateway

import (
	"unsafe"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
)

// The public types of this package are defined here, where go doc shows
// their fields; the layers below work with core's twins of identical
// layout (the conversions below compile only while the two agree). Results
// are converted where they leave the library, errors by rebuilding their
// chain of core's error types as the public ones.

// SourceStatus is a read-only snapshot of one source, as Sources reports it.
// It never contains the API key.
type SourceStatus struct {
	// Name, Provider and Model identify the source; BaseURL is its endpoint.
	Name, Provider, Model string
	BaseURL               string
	// Priority, Weight and Region are its tier, share and region label.
	Priority int
	Weight   float64
	Region   string
	// Breaker is the circuit's state.
	Breaker BreakerSnapshot
	// InFlight is this process's in-flight attempts on the source.
	InFlight int
	// Health is the EWMA success score in [0, 1] (1 = healthy; below 0.5
	// the source is weak and chosen only when nothing healthier is).
	Health float64
	// AdaptiveLimit is the adaptive concurrency limit.
	AdaptiveLimit float64
	// Limits are the configured per-source gates; Usage their current use.
	Limits Limits
	Usage  LimiterUsage
	// Queued counts the calls of this process waiting in the admission
	// queue of the source's scope, by class (QueueDepth[PriorityBatch] the
	// batch calls); the queue is the scope's, so every source of a scope
	// reports the same counts.
	Queued QueueDepth
	// Err is set when a backend could not be read.
	Err error
}

// publicResponse is the public view of a core response (the same memory).
func publicResponse(r *core.LLMResponse) *LLMResponse { return (*LLMResponse)(r) }

// coreResponse is the core view of a public response (the same memory).
func coreResponse(r *LLMResponse) *core.LLMResponse { return (*core.LLMResponse)(r) }

// coreMessages is the core view of msgs: the same memory, not a copy
// (Message and core.Message have one layout: the conversion below compiles
// only while they do). The call keeps referring to the caller's messages
// only until it returns: the telemetry layer renders them into its row
// before that (see middleware.Telemetry).
func coreMessages(msgs []Message) []core.Message {
	if msgs == nil {
		return nil
	}
	return unsafe.Slice((*core.Message)(unsafe.Pointer(unsafe.SliceData(msgs))), len(msgs))
}

// publicMessages is the public view of msgs: the same memory.
func publicMessages(msgs []core.Message) []Message {
	if msgs == nil {
		return nil
	}
	return unsafe.Slice((*Message)(unsafe.Pointer(unsafe.SliceData(msgs))), len(msgs))
}

var _ = core.Message(Message{})

// publicStatus copies core's source statuses.
func publicStatus(in []core.SourceStatus) []SourceStatus {
	out := make([]SourceStatus, len(in))
	for i := range in {
		out[i] = SourceStatus(in[i])
	}
	return out
}

// maxErrorDepth bounds how deep publicError rebuilds an error chain.
const maxErrorDepth = 16

// publicError rebuilds err's chain of core error types as the public
// types (errors.As with *polygateway.TransientError and its kin then finds
// them); errors of other types are kept as they are and end the rebuild.
// A public error answers errors.As with its core twin too.
func publicError(err error) error { return publicErrorDepth(err, 0) }

func publicErrorDepth(err error, depth int) error {
	if err == nil || depth > maxErrorDepth {
		return err
	}
	next := func(e error) error { return publicErrorDepth(e, depth+1) }
	switch e := err.(type) {
	case *core.TransientError:
		p := TransientError(*e)
		p.Err = next(p.Err)
		return &p
	case *core.SourceDeadError:
		p := SourceDeadError(*e)
		p.Err = next(p.Err)
		return &p
	case *core.RequestRejectedError:
		p := RequestRejectedError(*e)
		p.Err = next(p.Err)
		return &p
	case *core.ResultInvalidError:
		p := ResultInvalidError(*e)
		p.Err = next(p.Err)
		return &p
	case *core.GatewayUnavailableError:
		p := GatewayUnavailableError(*e)
		p.Err = next(p.Err)
		return &p
	case *core.GovernanceBackendError:
		p := GovernanceBackendError(*e)
		p.Err = next(p.Err)
		return &p
	case *core.CanceledError:
		p := CanceledError(*e)
		return &p
	case *core.SelectorError:
		p := SelectorError(*e)
		return &p
	case *core.UnknownSourceError:
		p := UnknownSourceError(*e)
		return &p
	}
	return err
}

// As lets errors.As find core's twin of a public error (the library's
// own layers classify with it).
func (e *TransientError) As(target any) bool { return asTwin(target, (*core.TransientError)(e)) }

// As lets errors.As find core's twin of a public error.
func (e *SourceDeadError) As(target any) bool { return asTwin(target, (*core.SourceDeadError)(e)) }

// As lets errors.As find core's twin of a public error.
func (e *RequestRejectedError) As(target any) bool {
	return asTwin(target, (*core.RequestRejectedError)(e))
}

// As lets errors.As find core's twin of a public error.
func (e *ResultInvalidError) As(target any) bool {
	return asTwin(target, (*core.ResultInvalidError)(e))
}

// As lets errors.As find core's twin of a public error.
func (e *GatewayUnavailableError) As(target any) bool {
	return asTwin(target, (*core.GatewayUnavailableError)(e))
}

// As lets errors.As find core's twin of a public error.
func (e *GovernanceBackendError) As(target any) bool {
	return asTwin(target, (*core.GovernanceBackendError)(e))
}

// As lets errors.As find core's twin of a public error.
func (e *CanceledError) As(target any) bool { return asTwin(target, (*core.CanceledError)(e)) }

// As lets errors.As find core's twin of a public error.
func (e *UnknownSourceError) As(target any) bool {
	return asTwin(target, (*core.UnknownSourceError)(e))
}

// As lets errors.As find core's twin of a public error.
func (e *SelectorError) As(target any) bool { return asTwin(target, (*core.SelectorError)(e)) }

// asTwin stores twin in target when target is a **T of twin's type.
func asTwin[T any](target any, twin *T) bool {
	if t, ok := target.(**T); ok {
		*t = twin
		return true
	}
	return false
}

func init() {
	kernel.PublicError = publicError
}
