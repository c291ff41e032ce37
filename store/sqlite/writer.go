package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acrelay/acrelay/store"
)

// job is one unit of work for the group committer: run executes inside the
// batch transaction (in a SAVEPOINT of its own when the batch is replayed,
// see batch) and records its result in variables the submitter reads only
// after done delivers nil. run may execute twice: a replay runs it again
// from the start, on a rolled-back transaction.
type job struct {
	ctx  context.Context // the submitter's; checked before run, never used for SQL
	run  func(t *txn) error
	done chan error // buffered: the writer never blocks on a departed submitter
	// group, when set, are jobs that run in order in one batch (a page of
	// foreign records, submitGroup); run and done are then unused.
	group []*job
}

// submit queues run for the writer and waits for its outcome. When ctx
// ends first, submit returns ctx's error; the job is then skipped if it has
// not started (or its batch is replayed after ctx ended), or commits
// normally if it has (an exact retry tells which).
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
			return mapErr(op, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
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
	g := &job{ctx: ctx, group: make([]*job, len(runs))}
	for i, run := range runs {
		g.group[i] = &job{ctx: ctx, run: run, done: make(chan error, 1)}
	}
	fillAll := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return fillAll(fmt.Errorf("%s: store closed: %w", op, store.ErrUnavailable))
	}
	select {
	case db.queue <- g:
		db.mu.RUnlock()
	case <-ctx.Done():
		db.mu.RUnlock()
		return fillAll(fmt.Errorf("%s: %w", op, ctx.Err()))
	}
	for i, j := range g.group {
		select {
		case err := <-j.done:
			if err != nil {
				errs[i] = mapErr(op, err)
			}
		case <-ctx.Done():
			return fillAll(fmt.Errorf("%s: %w", op, ctx.Err()))
		}
	}
	return errs
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
		b.take(j)
		want := min(max(last, 1), lingerBatch, db.maxBatch)
		lingering := false
	fill:
		for len(b.jobs) < db.maxBatch && !b.failed {
			select {
			case j, ok := <-db.queue:
				if !ok {
					break fill
				}
				b.take(j)
				continue
			default:
			}
			if len(b.jobs) >= want {
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
				b.take(j)
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
		last = len(b.jobs)
		b.commit()
		db.wmu.Unlock()
	}
}

// batch is one group-commit transaction. Jobs run without savepoints
// while every one succeeds (a savepoint costs an append two statements
// and a copy of every page it touches). The first job that fails may have
// written before failing, so the batch is rolled back and replayed with
// each job in its own savepoint (safe): a job that fails is then rolled
// back to its savepoint and gets its own error while the others commit.
// If the transaction itself fails (begin, savepoint bookkeeping or
// commit), every job that had not failed on its own gets ErrUnavailable:
// nothing of it was committed.
type batch struct {
	db     *DB
	tx     *sql.Tx
	t      *txn
	jobs   []*job
	errs   []error
	safe   bool  // each job in its own savepoint (after a replay)
	forget bool  // a job failed with a driver error: re-read ws after the batch
	failed bool  // the transaction failed; every job has been answered
	cause  error // the answer to every job after the failure
	start  time.Time
}

func (db *DB) beginBatch() *batch {
	b := &batch{db: db, jobs: make([]*job, 0, lingerBatch), errs: make([]error, 0, lingerBatch)}
	b.start = time.Now()
	b.begin(b.start)
	return b
}

// begin starts the batch's transaction; receipts are dated now.
func (b *batch) begin(now time.Time) {
	ctx := context.Background()
	tx, err := b.db.w.BeginTx(ctx, nil)
	if err != nil {
		b.fail(err)
		return
	}
	b.tx = tx
	b.t = &txn{ctx: ctx, tx: tx, st: b.db.stmts, ws: b.db.ws, now: now, log: b.db.logger}
	if err := b.db.ws.begin(b.t); err != nil {
		b.fail(err)
	}
}

// replay rolls back what the batch wrote so far and runs its jobs again,
// each in its own savepoint. The remembered state forgets what the
// rolled-back jobs staged.
func (b *batch) replay() {
	b.tx.Rollback()
	b.tx = nil
	b.db.ws.forget()
	b.safe = true
	jobs := slices.Clone(b.jobs)
	clear(b.errs)
	b.begin(b.t.now)
	if b.failed {
		return // fail answered every job
	}
	b.jobs, b.errs = b.jobs[:0], b.errs[:0]
	for _, j := range jobs {
		b.run(j)
	}
}

// fail rolls the transaction back and answers every job not yet failed on
// its own with ErrUnavailable; jobs that reach the batch later get the
// same answer.
func (b *batch) fail(err error) {
	if b.tx != nil {
		b.tx.Rollback()
		b.tx = nil
	}
	// Nothing of the batch was committed: forget what the jobs staged.
	b.db.ws.reset()
	b.db.logger.Error("sqlite group commit failed", "batch", len(b.jobs), "err", err)
	b.failed, b.cause = true, mapErr("commit", err)
	b.observe(b.cause)
	for i, j := range b.jobs {
		if b.errs[i] == nil {
			b.errs[i] = b.cause
		}
		j.done <- b.errs[i]
	}
}

// take runs j, or each job of its group in order.
func (b *batch) take(j *job) {
	if j.group == nil {
		b.run(j)
		return
	}
	for _, g := range j.group {
		b.run(g)
	}
}

// run runs one job in its own savepoint.
func (b *batch) run(j *job) {
	if b.failed {
		j.done <- b.cause
		return
	}
	b.jobs = append(b.jobs, j)
	b.errs = append(b.errs, nil)
	i := len(b.jobs) - 1
	if err := j.ctx.Err(); err != nil {
		b.errs[i] = err
		return
	}
	t := b.t
	if !b.safe {
		err := b.runOne(j)
		switch {
		case err == nil:
			for _, f := range t.staged {
				f()
			}
		case refusal(err) && !t.wrote:
			// Refused before it wrote anything (appendTx and
			// ReconcileLineage decide refusals first): nothing to undo.
			b.errs[i] = err
		default:
			b.replay()
		}
		return
	}
	if _, err := t.exec(savepointAppend); err != nil {
		b.fail(err)
		return
	}
	if err := b.runOne(j); err != nil {
		b.errs[i] = err
		t.staged = t.staged[:0]
		if !refusal(err) {
			// A driver error (say a received_seq already taken): the
			// remembered state may be wrong; re-read it after this batch.
			b.forget = true
		}
		if _, err := t.exec(rollbackToAppend); err != nil {
			b.fail(err)
			return
		}
	}
	if _, err := t.exec(releaseAppend); err != nil {
		b.fail(err)
		return
	}
	for _, f := range t.staged {
		f()
	}
}

// runOne runs j on the batch's transaction with a fresh receipt clock and
// staging list. A job that returns nil although one of its statements
// failed (SQLite may have rolled the whole transaction back, say on a full
// disk, leaving later statements to run in autocommit) fails with
// ErrUnavailable.
func (b *batch) runOne(j *job) error {
	t := b.t
	t.now = time.Now()
	t.staged, t.wrote, t.failed = t.staged[:0], false, nil
	err := runJob(j, t)
	if err == nil && t.failed != nil {
		b.db.logger.Error("sqlite job ignored a statement's failure", "err", t.failed)
		err = fmt.Errorf("a statement failed: %w", store.ErrUnavailable)
	}
	if err != nil {
		t.staged = t.staged[:0]
	}
	return err
}

// commit commits the batch (synchronous=FULL: the WAL is synced when
// Commit returns) and answers every job.
func (b *batch) commit() {
	if b.failed {
		return
	}
	db := b.db
	if err := db.ws.flush(b.t); err != nil {
		b.fail(err)
		return
	}
	if err := b.tx.Commit(); err != nil {
		b.tx = nil
		b.fail(err)
		return
	}
	db.sinceCheckpoint.Add(int64(len(b.jobs)))
	b.observe(nil)
	if b.forget {
		db.ws.reset()
	}
	for i, j := range b.jobs {
		j.done <- b.errs[i]
	}
}

// observe tells the store's Observer of the batch's transaction.
func (b *batch) observe(err error) {
	if obs := b.db.obs; obs != nil {
		d := time.Since(b.start)
		obs.ObserveGroupCommit(len(b.jobs), d, err)
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
func runJob(j *job, t *txn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("append panicked: %v: %w", p, store.ErrUnavailable)
		}
	}()
	return j.run(t)
}
