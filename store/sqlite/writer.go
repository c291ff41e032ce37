package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// job is one unit of work for the group committer: run executes inside its
// own SAVEPOINT of the batch transaction and records its result in variables
// the submitter reads only after done delivers nil.
type job struct {
	ctx  context.Context // the submitter's; checked before run, never used for SQL
	run  func(t *txn) error
	done chan error // buffered: the writer never blocks on a departed submitter
}

// submit queues run for the writer and waits for its outcome. When ctx
// ends first, submit returns ctx's error; the job is then skipped if it has
// not started, or commits normally if it has (an exact retry returns its
// receipt).
func (db *DB) submit(ctx context.Context, op string, run func(t *txn) error) error {
	j := &job{ctx: ctx, run: run, done: make(chan error, 1)}
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return fmt.Errorf("%s: store closed: %w", op, store.ErrUnavailable)
	}
	select {
	case db.queue <- j:
		db.mu.RUnlock()
	case <-ctx.Done():
		db.mu.RUnlock()
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	select {
	case err := <-j.done:
		if err != nil {
			return wrapErr(op, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
}

// lingerBatch and lingerMax bound the group committer's wait for a batch
// to fill: at most lingerMax, for at most lingerBatch appends.
const (
	lingerBatch = 16
	lingerMax   = 250 * time.Microsecond
)

// writeLoop is the group committer: it takes every job waiting (at most
// maxBatch) into one transaction, so one fsync covers them all. It exits
// once the queue is closed and drained.
func (db *DB) writeLoop() {
	defer close(db.done)
	batch := make([]*job, 0, db.maxBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	last := 0 // size of the previous batch
	for {
		j, ok := <-db.queue
		if !ok {
			return
		}
		batch = append(batch[:0], j)
	fill:
		for len(batch) < db.maxBatch {
			select {
			case j, ok := <-db.queue:
				if !ok {
					break fill
				}
				batch = append(batch, j)
			default:
				break fill
			}
		}
		// Appends arrive in waves under concurrent load: wait briefly for
		// as many as the previous batch had, so one commit (one sync, and
		// one write of each page the batch shares) serves them all. A
		// lone client (batches of one) never waits.
		if want := min(last, lingerBatch, db.maxBatch); len(batch) < want {
			linger.Reset(lingerMax)
		wait:
			for len(batch) < want {
				select {
				case j, ok := <-db.queue:
					if !ok {
						break wait
					}
					batch = append(batch, j)
				case <-linger.C:
					break wait
				}
			}
			if !linger.Stop() {
				select {
				case <-linger.C:
				default:
				}
			}
		}
		last = len(batch)
		db.wmu.Lock()
		db.runBatch(batch)
		db.wmu.Unlock()
		clear(batch)
	}
}

// runBatch runs each job in its own savepoint of one transaction: a job
// that fails is rolled back to its savepoint and gets its own error while
// the others commit. If the transaction itself fails (begin, savepoint
// bookkeeping or commit), every job that had not failed on its own gets
// ErrUnavailable: nothing of it was committed.
func (db *DB) runBatch(batch []*job) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	fail := func(err error) {
		// Nothing of the batch was committed: forget what the jobs staged.
		db.ws.reset()
		db.logger.Error("sqlite group commit failed", "batch", len(batch), "err", err)
		for i, j := range batch {
			if errs[i] == nil {
				errs[i] = mapErr("commit", err)
			}
			j.done <- errs[i]
		}
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	t := &txn{ctx: ctx, tx: tx, st: db.stmts, ws: db.ws, now: time.Now(), log: db.logger}
	forget := false
	if err := db.ws.begin(t); err != nil {
		tx.Rollback()
		fail(err)
		return
	}
	for i, j := range batch {
		if err := j.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if _, err := t.exec(savepointAppend); err != nil {
			tx.Rollback()
			fail(err)
			return
		}
		t.staged = t.staged[:0]
		if err := runJob(j, t); err != nil {
			errs[i] = err
			t.staged = t.staged[:0]
			if !refusal(err) {
				// A driver error (say a received_seq already taken): the
				// remembered state may be wrong; re-read it after this batch.
				forget = true
			}
			if _, err := t.exec(rollbackToAppend); err != nil {
				tx.Rollback()
				fail(err)
				return
			}
		}
		if _, err := t.exec(releaseAppend); err != nil {
			tx.Rollback()
			fail(err)
			return
		}
		for _, f := range t.staged {
			f()
		}
	}
	if err := db.ws.flush(t); err != nil {
		tx.Rollback()
		fail(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fail(err)
		return
	}
	db.sinceCheckpoint.Add(int64(len(batch)))
	if forget {
		db.ws.reset()
	}
	for i, j := range batch {
		j.done <- errs[i]
	}
}

// refusal reports whether a job's error is one of the store's answers
// about the input (which leaves the remembered state right) rather than a
// failure.
func refusal(err error) bool {
	for _, s := range []error{store.ErrNotFound, store.ErrExists, store.ErrSenderNotActive, store.ErrEventIDCollision} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// runJob runs one job, turning a panic into that job's error so that a bug
// in one append cannot stop the writer (and with it every later append).
func runJob(j *job, t *txn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("append panicked: %v: %w", p, store.ErrUnavailable)
		}
	}()
	return j.run(t)
}
