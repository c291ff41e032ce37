// Package groupcommit is the part of the stores' append path that does not
// depend on the SQL dialect: the job a caller queues and waits for, pages
// of jobs that run in one transaction and are never split, per-key
// (per-project) queues that form batches, and the policy that runs a
// batch's jobs in one transaction with each job's failure isolated to that
// job. A dialect supplies its SQL through Tx (the job's own work and the
// savepoint statements) and keeps its own transaction, commit and
// bookkeeping: store/sqlite feeds one writer goroutine, store/postgres
// drains one Queues per project under the project's advisory lock.
package groupcommit

import (
	"context"
	"slices"
	"sync"
)

// Job is one unit of work of a batch, or a page of them. Run executes
// inside the batch's transaction and records its results in variables the
// submitter reads only after Wait returns nil. Run may execute more than
// once (a replay, or a dialect's retry of the whole transaction), each
// time from the start on a rolled-back transaction.
type Job[T any] struct {
	ctx  context.Context // the submitter's: checked before Run, never used for SQL
	run  func(tx T) error
	done chan error // buffered: a batch never blocks on a departed submitter
	// page, when set, are jobs that run in order in one batch; run and
	// done are then unused.
	page []*Job[T]
}

// NewJob returns a job that runs run for a submitter whose context is ctx.
func NewJob[T any](ctx context.Context, run func(tx T) error) *Job[T] {
	return &Job[T]{ctx: ctx, run: run, done: make(chan error, 1)}
}

// NewPage returns one queue entry holding a job per run: they run in
// order in one batch (one transaction, one commit) and each gets its own
// answer. A page is never split between batches, so a batch that takes
// one may exceed its size limit by the page's length.
func NewPage[T any](ctx context.Context, runs []func(tx T) error) *Job[T] {
	p := &Job[T]{ctx: ctx, page: make([]*Job[T], len(runs))}
	for i, run := range runs {
		p.page[i] = NewJob(ctx, run)
	}
	return p
}

// Len is how many jobs the entry holds: 1, or a page's length.
func (j *Job[T]) Len() int {
	if j.page != nil {
		return len(j.page)
	}
	return 1
}

// Done delivers the job's one answer (nil: it committed). Not for pages.
func (j *Job[T]) Done() <-chan error { return j.done }

// Wait waits for the job's answer, or returns ctx's error when the
// submitter's context ends first. The job is then skipped if it has not
// started, or commits normally if it has (an exact retry tells which).
// Not for pages: see WaitPage.
func (j *Job[T]) Wait() error {
	select {
	case err := <-j.done:
		return err
	case <-j.ctx.Done():
		return j.ctx.Err()
	}
}

// WaitPage waits for each job of a page in order; once the submitter's
// context ends, the jobs not answered yet get its error (a job that has
// started may still commit).
func (j *Job[T]) WaitPage() []error {
	errs := make([]error, len(j.page))
	for i, p := range j.page {
		select {
		case errs[i] = <-p.done:
		case <-j.ctx.Done():
			for k := i; k < len(errs); k++ {
				errs[k] = j.ctx.Err()
			}
			return errs
		}
	}
	return errs
}

// Context is the submitter's context.
func (j *Job[T]) Context() context.Context { return j.ctx }

// Run runs the job's work on tx, outside any Batch (a dialect's own path
// for a lone job). Not for pages.
func (j *Job[T]) Run(tx T) error { return j.run(tx) }

// Answer answers every job of the entry with err, outside any Batch (a
// closed store; a lone job run with Run).
func (j *Job[T]) Answer(err error) {
	if j.page == nil {
		j.done <- err
		return
	}
	for _, p := range j.page {
		p.done <- err
	}
}

// Tx is a dialect's side of one batch transaction.
type Tx[T any] interface {
	// Exec runs job's work on the transaction: job.Run(tx) plus whatever
	// the dialect does around each job. guarded tells whether the job runs
	// in a savepoint of its own.
	Exec(job func(tx T) error, guarded bool) error
	// Own decides, for an error Exec returned in a savepoint, whether it
	// is the job's own failure: it returns what the job is answered (its
	// savepoint is rolled back while the batch goes on), or nil when err
	// fails the whole transaction.
	Own(err error) error
	// Clean reports, for an error Exec returned unguarded, that the job
	// wrote nothing before failing, so its error stands without undoing
	// anything. Otherwise an optimistic batch replays (see NewBatch).
	Clean(err error) bool
	// Savepoint opens the job's savepoint; RollbackTo undoes the job
	// (the savepoint may be left released or open, as the dialect
	// likes); Release keeps it.
	Savepoint() error
	RollbackTo() error
	Release() error
}

// Batch runs jobs in one transaction. A batch with a restart function is
// optimistic: its jobs run without savepoints while every one succeeds (a
// savepoint costs statements and, on SQLite, a copy of every page the job
// touches); the first job that fails without being Clean may have written
// before failing, so the batch calls restart (roll back, begin again) and
// runs every job again, each in its own savepoint. Without restart every
// job runs in its own savepoint from the start. In a savepoint, a job's
// own failure (Tx.Own) is rolled back to its savepoint and the others go
// on; any other failure, or a failed savepoint statement, fails the
// transaction: the batch stops running jobs (later ones are not run) and
// Answer gives every job that did not fail on its own the cause.
//
// A Batch is used by one goroutine. It answers no job before Answer.
type Batch[T any] struct {
	tx      Tx[T]
	restart func() error
	jobs    []*Job[T]
	errs    []error
	late    []*Job[T] // taken after the transaction failed: never run
	guarded bool
	failed  error
}

// NewBatch returns an empty batch on tx; restart, when not nil, makes it
// optimistic (see Batch).
func NewBatch[T any](tx Tx[T], restart func() error, capacity int) *Batch[T] {
	return &Batch[T]{tx: tx, restart: restart, guarded: restart == nil,
		jobs: make([]*Job[T], 0, capacity), errs: make([]error, 0, capacity)}
}

// Take runs the entry's job, or each job of its page in order.
func (b *Batch[T]) Take(e *Job[T]) {
	if e.page == nil {
		b.run(e)
		return
	}
	for _, j := range e.page {
		b.run(j)
	}
}

// Len is how many jobs the batch has run (or skipped for their ended
// context) before its transaction failed, if it did.
func (b *Batch[T]) Len() int { return len(b.jobs) }

// Guarded reports whether the batch's jobs run in savepoints (from the
// start, or since a replay).
func (b *Batch[T]) Guarded() bool { return b.guarded }

// Err is the transaction's failure, nil while it stands.
func (b *Batch[T]) Err() error { return b.failed }

// Fail marks the transaction failed (a dialect's begin, bookkeeping or
// commit failed): no further job runs. The first failure is kept.
func (b *Batch[T]) Fail(err error) {
	if b.failed == nil {
		b.failed = err
	}
}

// Answer answers every job: its own error, else cause (nil after a
// commit, the transaction's failure otherwise). Jobs taken after a
// failure get cause too. Call it once per batch.
func (b *Batch[T]) Answer(cause error) {
	for i, j := range b.jobs {
		err := b.errs[i]
		if err == nil {
			err = cause
		}
		j.done <- err
	}
	for _, j := range b.late {
		j.done <- cause
	}
}

// run runs one job under the batch's policy.
func (b *Batch[T]) run(j *Job[T]) {
	if b.failed != nil {
		b.late = append(b.late, j)
		return
	}
	b.jobs = append(b.jobs, j)
	b.errs = append(b.errs, nil)
	i := len(b.jobs) - 1
	if err := j.ctx.Err(); err != nil {
		b.errs[i] = err
		return
	}
	if !b.guarded {
		err := b.tx.Exec(j.run, false)
		switch {
		case err == nil:
		case b.tx.Clean(err):
			b.errs[i] = err
		default:
			b.replay()
		}
		return
	}
	if err := b.tx.Savepoint(); err != nil {
		b.Fail(err)
		return
	}
	if err := b.tx.Exec(j.run, true); err != nil {
		answer := b.tx.Own(err)
		if answer == nil {
			b.Fail(err)
			return
		}
		b.errs[i] = answer
		if err := b.tx.RollbackTo(); err != nil {
			b.Fail(err)
		}
		return
	}
	if err := b.tx.Release(); err != nil {
		b.Fail(err)
	}
}

// replay restarts the transaction and runs the batch's jobs again, each in
// its own savepoint.
func (b *Batch[T]) replay() {
	b.guarded = true
	jobs := slices.Clone(b.jobs)
	clear(b.errs)
	if err := b.restart(); err != nil {
		b.Fail(err)
		return
	}
	b.jobs, b.errs = b.jobs[:0], b.errs[:0]
	for _, j := range jobs {
		b.run(j)
	}
}

// Queues forms batches per key (a project): entries pushed for one key run
// in push order, one batch at a time, in a goroutine of that key that
// exists while its queue is not empty; different keys run in parallel.
// A batch takes entries while it holds fewer than max jobs, so a page is
// never split. The zero value is not usable: see NewQueues.
type Queues[T any] struct {
	max int
	run func(key string, batch []*Job[T])
	mu  sync.Mutex
	m   map[string]*queue[T]
}

type queue[T any] struct {
	pending []*Job[T]
	running bool
}

// NewQueues returns queues whose batches of at most max jobs (besides a
// page's overflow) are run by run, which must answer every job.
func NewQueues[T any](max int, run func(key string, batch []*Job[T])) *Queues[T] {
	return &Queues[T]{max: max, run: run, m: map[string]*queue[T]{}}
}

// Push queues e for key and returns at once; wait with Job.Wait or
// Job.WaitPage.
func (qs *Queues[T]) Push(key string, e *Job[T]) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.m[key]
	if q == nil {
		q = &queue[T]{}
		qs.m[key] = q
	}
	q.pending = append(q.pending, e)
	if !q.running {
		q.running = true
		go qs.drain(key, q)
	}
}

// drain runs the key's batches until none is waiting.
func (qs *Queues[T]) drain(key string, q *queue[T]) {
	for {
		qs.mu.Lock()
		n, jobs := 0, 0
		for n < len(q.pending) && jobs < qs.max {
			jobs += q.pending[n].Len()
			n++
		}
		if n == 0 {
			q.running = false
			delete(qs.m, key)
			qs.mu.Unlock()
			return
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		qs.mu.Unlock()
		qs.run(key, batch)
	}
}

// Jobs lists the jobs of entries, pages flattened, in order.
func Jobs[T any](entries []*Job[T]) []*Job[T] {
	var out []*Job[T]
	for _, e := range entries {
		if e.page == nil {
			out = append(out, e)
		} else {
			out = append(out, e.page...)
		}
	}
	return out
}
