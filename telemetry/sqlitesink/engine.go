package sqlitesink

// This file is the queue-and-batch engine of the sink. The Postgres sink
// (telemetry/pgsink) carries the same engine over its own store; the two are
// kept line-for-line alike so that a fix in one is a fix in the other.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/internal/core"
	"github.com/polygateway/polygateway/telemetry"
)

// maxHeldRetries bounds how often a batch that failed with a connection-level
// error is retried after the database answered a recovery probe; past it the
// batch is dropped so that one poisonous batch cannot wedge the sink.
const maxHeldRetries = 3

// store is the database side of the engine. All methods are called from the
// engine's one writer goroutine only.
type store interface {
	// insert writes recs atomically (all or none), ignoring call_ids that
	// are already present.
	insert(ctx context.Context, recs []core.TelemetryRecord) error
	// rowLevel reports whether err was caused by the rows themselves
	// (constraint, encoding, size) rather than by the connection.
	rowLevel(err error) bool
	// recover re-establishes the connection and makes sure the table exists.
	recover(ctx context.Context) error
	// close releases the database.
	close() error
}

// engine is a bounded queue drained by one goroutine that writes batches to
// a store, degrading to "drop and count" while the store is unavailable.
type engine struct {
	st   store
	cfg  settings
	log  *slog.Logger
	name string

	mu     sync.RWMutex // guards closed against a concurrent enqueue
	closed bool
	queue  chan core.TelemetryRecord

	down       atomic.Bool
	dropped    atomic.Uint64
	fullWarned atomic.Bool

	base       context.Context // cancelled when a Close context ends, or at exit
	cancelBase context.CancelFunc
	stop       chan struct{} // closed by the first Close
	done       chan struct{} // closed by the writer goroutine when it exits
	closeErr   error         // written before done is closed

	// Owned by the writer goroutine.
	held         []core.TelemetryRecord
	heldFailures int
	badWarned    bool
}

// newEngine starts the writer goroutine. When startDown is set the store
// could not be reached yet and the engine begins in the degraded state.
func newEngine(name string, st store, cfg settings, startDown bool) *engine {
	e := &engine{
		st: st, cfg: cfg, log: cfg.logger, name: name,
		queue: make(chan core.TelemetryRecord, cfg.queueSize),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	e.base, e.cancelBase = context.WithCancel(context.Background())
	e.down.Store(startDown)
	go e.run()
	return e
}

// write enqueues rec without blocking.
func (e *engine) write(rec core.TelemetryRecord) error {
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return telemetry.ErrClosed
	}
	if e.down.Load() {
		e.mu.RUnlock()
		e.dropped.Add(1)
		return nil
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = time.Now()
	}
	select {
	case e.queue <- rec:
		e.mu.RUnlock()
		return nil
	default:
	}
	e.mu.RUnlock()
	e.dropped.Add(1)
	if e.fullWarned.CompareAndSwap(false, true) {
		e.log.Warn("polygateway: telemetry: queue full, dropping records", "sink", e.name, "queue_size", e.cfg.queueSize)
	}
	return nil
}

// close stops the writer after it flushed what is queued, bounded by ctx.
func (e *engine) close(ctx context.Context) error {
	e.mu.Lock()
	first := !e.closed
	e.closed = true
	e.mu.Unlock()
	if first {
		close(e.stop)
	}
	release := context.AfterFunc(ctx, e.cancelBase)
	defer release()
	<-e.done
	return e.closeErr
}

// run is the writer goroutine.
func (e *engine) run() {
	defer close(e.done)
	defer e.cancelBase()
	batch := make([]core.TelemetryRecord, 0, e.cfg.batchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	backoff := e.cfg.backoffMin
	for {
		if e.down.Load() {
			wait := time.NewTimer(backoff)
			select {
			case <-e.stop:
				wait.Stop()
				e.shutdown(batch)
				return
			case <-wait.C:
			}
			if e.tryRecover() {
				backoff = e.cfg.backoffMin
			} else {
				backoff = min(2*backoff, e.cfg.backoffMax)
			}
			continue
		}
		select {
		case rec := <-e.queue:
			if len(batch) == 0 {
				timer.Reset(e.cfg.flushInterval)
			}
			batch = e.fill(append(batch, rec))
			if len(batch) >= e.cfg.batchSize {
				timer.Stop()
				e.flush(batch)
				batch = batch[:0]
			}
		case <-timer.C:
			if len(batch) > 0 {
				e.flush(batch)
				batch = batch[:0]
			}
		case <-e.stop:
			e.shutdown(batch)
			return
		}
	}
}

// fill appends queued records to batch without waiting, up to the batch size.
func (e *engine) fill(batch []core.TelemetryRecord) []core.TelemetryRecord {
	for len(batch) < e.cfg.batchSize {
		select {
		case rec := <-e.queue:
			batch = append(batch, rec)
		default:
			return batch
		}
	}
	return batch
}

// opContext bounds one database operation.
func (e *engine) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.base, e.cfg.opTimeout)
}

// flush writes one batch; on a connection-level failure the unwritten rest
// is held for after the recovery and the engine goes down.
func (e *engine) flush(batch []core.TelemetryRecord) {
	ctx, cancel := e.opContext()
	defer cancel()
	if rest, err := e.storeRecords(ctx, batch); err != nil {
		e.goDown(rest, err)
	}
}

// storeRecords writes recs as one batch; when the batch fails because of a
// row, it retries row by row and drops the bad rows alone. On a
// connection-level error it returns the records not yet written.
func (e *engine) storeRecords(ctx context.Context, recs []core.TelemetryRecord) ([]core.TelemetryRecord, error) {
	err := e.st.insert(ctx, recs)
	if err == nil {
		return nil, nil
	}
	if !e.st.rowLevel(err) {
		return recs, err
	}
	if len(recs) == 1 {
		e.dropBad(recs[0], err)
		return nil, nil
	}
	for i := range recs {
		err := e.st.insert(ctx, recs[i:i+1])
		switch {
		case err == nil:
		case e.st.rowLevel(err):
			e.dropBad(recs[i], err)
		default:
			return recs[i:], err
		}
	}
	return nil, nil
}

// dropBad counts a row the database refused; the first one is logged as a
// warning, later ones at debug level.
func (e *engine) dropBad(rec core.TelemetryRecord, err error) {
	e.dropped.Add(1)
	lvl := slog.LevelDebug
	if !e.badWarned {
		e.badWarned = true
		lvl = slog.LevelWarn
	}
	e.log.Log(context.Background(), lvl, "polygateway: telemetry: the database refused a record; dropped it alone",
		"sink", e.name, "call_id", rec.CallID, "err", err)
}

// goDown enters the degraded state: one warning, then every Write is
// short-circuited (dropped and counted) until a recovery succeeds.
func (e *engine) goDown(rest []core.TelemetryRecord, err error) {
	e.held = slices.Clone(rest)
	e.heldFailures = 0
	e.down.Store(true)
	e.log.Warn("polygateway: telemetry: database unavailable; dropping new records and retrying the connection with backoff",
		"sink", e.name, "err", err, "held", len(e.held))
}

// tryRecover probes the store and writes the held batch. It reports whether
// the engine is up again.
func (e *engine) tryRecover() bool {
	ctx, cancel := e.opContext()
	defer cancel()
	if err := e.st.recover(ctx); err != nil {
		e.log.Debug("polygateway: telemetry: recovery failed", "sink", e.name, "err", err)
		return false
	}
	if len(e.held) > 0 {
		rest, err := e.storeRecords(ctx, e.held)
		if err != nil {
			e.held = slices.Clone(rest)
			e.heldFailures++
			if e.heldFailures < maxHeldRetries {
				e.log.Debug("polygateway: telemetry: held batch failed again", "sink", e.name, "err", err)
				return false
			}
			e.dropped.Add(uint64(len(e.held)))
			e.log.Warn("polygateway: telemetry: the database keeps refusing a batch; dropped it",
				"sink", e.name, "records", len(e.held), "err", err)
		}
		e.held, e.heldFailures = nil, 0
	}
	e.down.Store(false)
	e.log.Info("polygateway: telemetry: database available again; writing resumed", "sink", e.name, "dropped_total", e.dropped.Load())
	return true
}

// shutdown writes the held batch, the pending batch and everything still
// queued, then closes the store. Nothing can be enqueued any more: closed was
// set under the lock before stop was closed.
func (e *engine) shutdown(batch []core.TelemetryRecord) {
	all := append(e.held, batch...)
	e.held = nil
	for drained := false; !drained; {
		select {
		case rec := <-e.queue:
			all = append(all, rec)
		default:
			drained = true
		}
	}
	var err error
	if e.down.Load() && len(all) > 0 {
		ctx, cancel := e.opContext()
		err = e.st.recover(ctx)
		cancel()
		if err == nil {
			e.down.Store(false)
		}
	}
	lost := 0
	if err != nil {
		lost = len(all)
	}
	for err == nil && len(all) > 0 {
		n := min(len(all), e.cfg.batchSize)
		ctx, cancel := e.opContext()
		var rest []core.TelemetryRecord
		rest, err = e.storeRecords(ctx, all[:n])
		cancel()
		if err != nil {
			lost = len(rest) + len(all) - n
		}
		all = all[n:]
	}
	var errs []error
	if err != nil {
		e.dropped.Add(uint64(lost))
		errs = append(errs, fmt.Errorf("polygateway: telemetry: %s: %d records not written at close: %w", e.name, lost, err))
	}
	if cerr := e.st.close(); cerr != nil {
		errs = append(errs, fmt.Errorf("polygateway: telemetry: %s: close: %w", e.name, cerr))
	}
	e.closeErr = errors.Join(errs...)
}
