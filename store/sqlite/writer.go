package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/groupcommit"
)

// job is one unit of work for the group committer (a groupcommit.Job):
// its run executes inside the batch transaction (in a SAVEPOINT of its own
// when the batch is replayed, see batch) and records its result in
// variables the submitter reads only after its answer is nil. run may
// execute twice: a replay runs it again from the start, on a rolled-back
// transaction. A page of foreign records (submitGroup) is one job entry.
type job = groupcommit.Job[*txn]

// submit queues run for the writer and waits for its outcome. When ctx
// ends first, submit returns ctx's error; the job is then skipped if it has
// not started (or its batch is replayed after ctx ended), or commits
// normally if it has (an exact retry tells which).
func (db *DB) submit(ctx context.Context, op string, run func(t *txn) error) error {
	j := groupcommit.NewJob(ctx, run)
	if err := db.enqueue(ctx, op, j); err != nil {
		return err
	}
	return mapErr(op, j.Wait())
}

// submitGroup queues runs as one unit: they run in order in one batch
// (one transaction and one commit), each with its own outcome as submit
// gives it. When ctx ends first, the runs not answered yet get ctx's
// error (a run that has started may still commit).
func (db *DB) submitGroup(ctx context.Context, op string, runs []func(t *txn) error) []error {
	errs := make([]error, len(runs))
	if len(runs) == 0 {
		return errs
	}
	g := groupcommit.NewPage(ctx, runs)
	if err := db.enqueue(ctx, op, g); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	errs = g.WaitPage()
	for i, err := range errs {
		errs[i] = mapErr(op, err)
	}
	return errs
}

// enqueue hands e to the writer goroutine. Errors: ErrUnavailable once
// the store is closed, or ctx's error when it ends first.
func (db *DB) enqueue(ctx context.Context, op string, e *job) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return fmt.Errorf("%s: store closed: %w", op, store.ErrUnavailable)
	}
	select {
	case db.queue <- e:
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

// writeLoop is the group committer. It runs each job as it arrives, in
// one open transaction (see batch), and commits (one fsync for
// the whole batch) once the batch holds as many jobs as the previous one
// did (at most lingerBatch), or lingerMax after its first job, or at
// maxBatch. Appends arrive in waves under concurrent load, so the batch's
// SQL runs while the rest of the wave is still being verified by the
// handlers, and one commit (one sync, and one write of each page the batch
// shares) serves the wave. A lone client (batches of one) never waits. It
// exits once the queue is closed and drained.

func (db *DB) writeLoop() {
	defer close(db.done)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	last := 0 // size of the previous batch
	for {
		j, ok := <-db.queue
		if !ok {
			return
		}
		db.wmu.Lock()
		b := db.beginBatch()
		b.gc.Take(j)
		want := min(max(last, 1), lingerBatch, db.maxBatch)
		lingering := false
	fill:
		for b.gc.Len() < db.maxBatch && b.gc.Err() == nil {
			select {
			case j, ok := <-db.queue:
				if !ok {
					break fill
				}
				b.gc.Take(j)
				continue
			default:
			}
			if b.gc.Len() >= want {
				break
			}
			if !lingering {
				linger.Reset(lingerMax)
				lingering = true
			}
			select {
			case j, ok := <-db.queue:
				if !ok {
					break fill
				}
				b.gc.Take(j)
			case <-linger.C:
				lingering = false
				break fill
			}
		}
		if lingering && !linger.Stop() {
			select {
			case <-linger.C:
			default:
			}
		}
		last = b.gc.Len()
		b.commit()
		db.wmu.Unlock()
	}
}

// batch is one group-commit transaction: SQLite's side of a
// groupcommit.Batch, which is optimistic here. Jobs run without savepoints
// while every one succeeds (a savepoint costs an append two statements
// and a copy of every page it touches). The first job that fails may have
// written before failing (unless it is a refusal decided before any
// write), so the batch is rolled back and replayed with each job in its
// own savepoint: a job that fails is then rolled back to its savepoint
// and gets its own error while the others commit. If the transaction
// itself fails (begin, savepoint bookkeeping or commit), every job that
// had not failed on its own gets ErrUnavailable: nothing of it was
// committed.
type batch struct {
	db     *DB
	gc     *groupcommit.Batch[*txn]
	tx     *sql.Tx
	t      *txn
	forget bool // a job failed with a driver error: re-read ws after the batch
	start  time.Time
}

func (db *DB) beginBatch() *batch {
	b := &batch{db: db}
	b.gc = groupcommit.NewBatch[*txn](b, b.restart, lingerBatch)
	b.start = time.Now()
	if err := b.begin(b.start); err != nil {
		b.gc.Fail(err)
	}
	return b
}

// begin starts the batch's transaction; receipts are dated now.
func (b *batch) begin(now time.Time) error {
	ctx := context.Background()
	tx, err := b.db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	b.tx = tx
	b.t = &txn{ctx: ctx, tx: tx, st: b.db.stmts, ws: b.db.ws, now: now, log: b.db.logger}
	return b.db.ws.begin(b.t)
}

// restart rolls back what the batch wrote so far and begins again, for
// the replay. The remembered state forgets what the rolled-back jobs
// staged.
func (b *batch) restart() error {
	b.tx.Rollback()
	b.tx = nil
	b.db.ws.forget()
	return b.begin(b.t.now)
}

// Exec runs one job with a fresh receipt clock and staging list, and
// applies what it staged once it has succeeded. A job that returns nil
// although one of its statements failed (SQLite may have rolled the whole
// transaction back, say on a full disk, leaving later statements to run
// in autocommit) fails with ErrUnavailable.
func (b *batch) Exec(run func(t *txn) error, guarded bool) error {
	t := b.t
	t.now = time.Now()
	t.staged, t.wrote, t.failed = t.staged[:0], false, nil
	err := runJob(run, t)
	if err == nil && t.failed != nil {
		b.db.logger.Error("sqlite job ignored a statement's failure", "err", t.failed)
		err = fmt.Errorf("a statement failed: %w", store.ErrUnavailable)
	}
	if err != nil {
		t.staged = t.staged[:0]
		if guarded && !refusal(err) {
			// A driver error (say a received_seq already taken): the
			// remembered state may be wrong; re-read it after this batch.
			b.forget = true
		}
		return err
	}
	for _, f := range t.staged {
		f()
	}
	return nil
}

// Own: in a savepoint, every failure is the job's own.
func (b *batch) Own(err error) error { return err }

// Clean: refused before it wrote anything (appendTx and ReconcileLineage
// decide refusals first): nothing to undo.
func (b *batch) Clean(err error) bool { return refusal(err) && !b.t.wrote }

func (b *batch) Savepoint() error {
	_, err := b.t.exec(savepointAppend)
	return err
}

func (b *batch) RollbackTo() error {
	if _, err := b.t.exec(rollbackToAppend); err != nil {
		return err
	}
	return b.Release()
}

func (b *batch) Release() error {
	_, err := b.t.exec(releaseAppend)
	return err
}

// commit commits the batch (synchronous=FULL: the WAL is synced when
// Commit returns) and answers every job.
func (b *batch) commit() {
	db := b.db
	if b.gc.Err() == nil {
		if err := db.ws.flush(b.t); err != nil {
			b.gc.Fail(err)
		} else if err := b.tx.Commit(); err != nil {
			b.tx = nil
			b.gc.Fail(err)
		}
	}
	if err := b.gc.Err(); err != nil {
		b.fail(err)
		return
	}
	db.sinceCheckpoint.Add(int64(b.gc.Len()))
	b.observe(nil)
	if b.forget {
		db.ws.reset()
	}
	b.gc.Answer(nil)
}

// fail rolls the failed transaction back and answers every job not
// failed on its own with ErrUnavailable, jobs that reached the batch after
// the failure too.
func (b *batch) fail(err error) {
	if b.tx != nil {
		b.tx.Rollback()
		b.tx = nil
	}
	// Nothing of the batch was committed: forget what the jobs staged.
	b.db.ws.reset()
	b.db.logger.Error("sqlite group commit failed", "batch", b.gc.Len(), "err", err)
	cause := mapErr("commit", err)
	b.observe(cause)
	b.gc.Answer(cause)
}

// observe tells the store's Observer of the batch's transaction.
func (b *batch) observe(err error) {
	if obs := b.db.obs; obs != nil {
		d := time.Since(b.start)
		obs.ObserveGroupCommit(b.gc.Len(), d, err)
		obs.ObserveTx("append", d, err)
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
func runJob(run func(t *txn) error, t *txn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("append panicked: %v: %w", p, store.ErrUnavailable)
		}
	}()
	return run(t)
}
