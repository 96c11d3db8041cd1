// Package sinkengine is the queue-and-batch engine shared by the database
// telemetry sinks (telemetry/sqlitesink and telemetry/pgsink): a bounded
// queue drained by one writer goroutine that writes batches to a Store,
// isolates the rows the database refuses, and degrades to "drop and count"
// (one warning, recovery with exponential backoff) while the database is
// unavailable. Each sink supplies its Store and its own Option API over
// Settings.
package sinkengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry"
)

// maxHeldRetries bounds how often a batch that failed with a connection-level
// error is retried after the database answered a recovery probe; past it the
// batch is dropped so that one poisonous batch cannot wedge the sink.
const maxHeldRetries = 3

// Store is the database side of the engine. All methods are called from the
// engine's one writer goroutine only.
type Store interface {
	// Insert writes recs atomically (all or none), ignoring call_ids that
	// are already present.
	Insert(ctx context.Context, recs []core.TelemetryRecord) error
	// RowLevel reports whether err was caused by the rows themselves
	// (constraint, encoding, size) rather than by the connection.
	RowLevel(err error) bool
	// Recover re-establishes the connection and makes sure the table exists.
	Recover(ctx context.Context) error
	// Close releases the database.
	Close() error
}

// Engine is a bounded queue drained by one goroutine that writes batches to
// a Store, degrading to "drop and count" while the store is unavailable. It
// is safe for concurrent use.
type Engine struct {
	st   Store
	cfg  Settings
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

// New starts the writer goroutine of a sink called name (it names the sink
// in log records and errors). cfg is normalised (see Settings). A non-nil
// startErr means the store could not be reached yet: the engine then begins
// in the degraded state, warns once and connects in the background, as it
// does when the store fails later.
func New(name string, st Store, cfg Settings, startErr error) *Engine {
	cfg = cfg.normalized()
	e := &Engine{
		st: st, cfg: cfg, log: cfg.Logger, name: name,
		queue: make(chan core.TelemetryRecord, cfg.QueueSize),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	e.base, e.cancelBase = context.WithCancel(context.Background())
	if startErr != nil {
		e.down.Store(true)
		e.log.Warn(unavailableMsg, "sink", name, "err", startErr)
	}
	go e.run()
	return e
}

// unavailableMsg is the one warning of a degradation.
const unavailableMsg = "polygateway: telemetry: database unavailable; dropping new records and retrying the connection with backoff"

// Write enqueues rec without blocking. A zero CreatedAt is set to the time
// of the call. When the queue is full, or while the store is unavailable,
// the record is dropped and counted (and nil is returned). After Close it
// returns telemetry.ErrClosed.
func (e *Engine) Write(rec core.TelemetryRecord) error {
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
		e.log.Warn("polygateway: telemetry: queue full, dropping records", "sink", e.name, "queue_size", e.cfg.QueueSize)
	}
	return nil
}

// Close stops the writer after it wrote everything queued and closes the
// store. It waits for the writer; ctx bounds the final writes (records that
// could not be written are counted in Dropped and reported in the error).
// It is idempotent and safe to call concurrently.
func (e *Engine) Close(ctx context.Context) error {
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

// Dropped returns how many records were accepted by Write but not stored:
// the queue was full, the store was unavailable, the store refused the row,
// or Close could not write it.
func (e *Engine) Dropped() uint64 { return e.dropped.Load() }

// Down reports whether the engine is degraded: the store is unavailable and
// every Write is dropped and counted until a recovery succeeds.
func (e *Engine) Down() bool { return e.down.Load() }

// Queued returns how many records wait in the queue for the writer.
func (e *Engine) Queued() int { return len(e.queue) }

// run is the writer goroutine.
func (e *Engine) run() {
	defer close(e.done)
	defer e.cancelBase()
	batch := make([]core.TelemetryRecord, 0, e.cfg.BatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	backoff := e.cfg.BackoffMin
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
				backoff = e.cfg.BackoffMin
			} else {
				backoff = min(2*backoff, e.cfg.BackoffMax)
			}
			continue
		}
		select {
		case rec := <-e.queue:
			if len(batch) == 0 {
				timer.Reset(e.cfg.FlushInterval)
			}
			batch = e.fill(append(batch, rec))
			if len(batch) >= e.cfg.BatchSize {
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
func (e *Engine) fill(batch []core.TelemetryRecord) []core.TelemetryRecord {
	for len(batch) < e.cfg.BatchSize {
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
func (e *Engine) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.base, e.cfg.OpTimeout)
}

// flush writes one batch; on a connection-level failure the unwritten rest
// is held for after the recovery and the engine goes down.
func (e *Engine) flush(batch []core.TelemetryRecord) {
	ctx, cancel := e.opContext()
	defer cancel()
	if rest, err := e.storeRecords(ctx, batch); err != nil {
		e.goDown(rest, err)
	}
}

// storeRecords writes recs as one batch; when the batch fails because of a
// row, it retries row by row and drops the bad rows alone. On a
// connection-level error it returns the records not yet written. It renders
// raw messages first: that work is kept off the call path.
func (e *Engine) storeRecords(ctx context.Context, recs []core.TelemetryRecord) ([]core.TelemetryRecord, error) {
	for i := range recs {
		recs[i].Render()
	}
	err := e.st.Insert(ctx, recs)
	if err == nil {
		return nil, nil
	}
	if !e.st.RowLevel(err) {
		return recs, err
	}
	if len(recs) == 1 {
		e.dropBad(recs[0], err)
		return nil, nil
	}
	for i := range recs {
		err := e.st.Insert(ctx, recs[i:i+1])
		switch {
		case err == nil:
		case e.st.RowLevel(err):
			e.dropBad(recs[i], err)
		default:
			return recs[i:], err
		}
	}
	return nil, nil
}

// dropBad counts a row the database refused; the first one is logged as a
// warning, later ones at debug level.
func (e *Engine) dropBad(rec core.TelemetryRecord, err error) {
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
func (e *Engine) goDown(rest []core.TelemetryRecord, err error) {
	e.held = slices.Clone(rest)
	e.heldFailures = 0
	e.down.Store(true)
	e.log.Warn(unavailableMsg, "sink", e.name, "err", err, "held", len(e.held))
}

// tryRecover probes the store and writes the held batch. It reports whether
// the engine is up again.
func (e *Engine) tryRecover() bool {
	ctx, cancel := e.opContext()
	defer cancel()
	if err := e.st.Recover(ctx); err != nil {
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
func (e *Engine) shutdown(batch []core.TelemetryRecord) {
	all := e.held // taken over: held is cleared
	e.held = nil
	all = append(all, batch...)
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
		err = e.st.Recover(ctx)
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
		n := min(len(all), e.cfg.BatchSize)
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
	if cerr := e.st.Close(); cerr != nil {
		errs = append(errs, fmt.Errorf("polygateway: telemetry: %s: close: %w", e.name, cerr))
	}
	e.closeErr = errors.Join(errs...)
}
