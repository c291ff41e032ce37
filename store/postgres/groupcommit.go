package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
)

// Group commit per project. Appends to one project are serialized by its
// advisory lock and each commit flushes the WAL while holding it, so
// concurrent appends to one project would otherwise queue behind one flush
// each. Instead, appends arriving while a project's batch runs wait for the
// next batch: one transaction, one lock acquisition, one commit and one
// flush for all of them, each append in its own savepoint so one refusal
// touches no other (the same design as store/sqlite's writer). Different
// projects run their batches in parallel; other processes still serialize
// through the advisory lock.

// maxGroupBatch caps the appends of one transaction, except that a page
// of foreign records (submitAppends, at most 200) is never split.
const maxGroupBatch = 64

type appendJob struct {
	ctx  context.Context // the caller's: checked before the job runs
	in   appendInput
	res  store.AppendResult
	err  error
	done chan struct{}
	// group is shared by the jobs of one page (submitAppends): they are
	// queued together and run in one batch.
	group *[]*appendJob
}

type projectQueue struct {
	pending []*appendJob
	running bool
}

type groupCommitter struct {
	mu     sync.Mutex
	queues map[string]*projectQueue
}

// submitAppend queues one append and waits for its batch.
func (db *DB) submitAppend(ctx context.Context, in appendInput) (store.AppendResult, error) {
	j := &appendJob{ctx: ctx, in: in, done: make(chan struct{})}
	g := &db.group
	g.mu.Lock()
	if g.queues == nil {
		g.queues = map[string]*projectQueue{}
	}
	q := g.queues[in.ev.ProjectID]
	if q == nil {
		q = &projectQueue{}
		g.queues[in.ev.ProjectID] = q
	}
	q.pending = append(q.pending, j)
	if !q.running {
		q.running = true
		go db.drain(in.ev.ProjectID, q)
	}
	g.mu.Unlock()
	select {
	case <-j.done:
		return j.res, j.err
	case <-ctx.Done():
		// The job may still run (an exact retry then returns its receipt).
		return store.AppendResult{}, ctx.Err()
	}
}

// submitAppends queues ins as one group, in order, into one batch of
// their project, and waits for each. When ctx ends first, the jobs not
// answered yet get ctx's error (they may still run).
func (db *DB) submitAppends(ctx context.Context, projectID string, ins []appendInput) ([]store.AppendResult, []error) {
	res, errs := make([]store.AppendResult, len(ins)), make([]error, len(ins))
	if len(ins) == 0 {
		return res, errs
	}
	group := make([]*appendJob, len(ins))
	for i, in := range ins {
		group[i] = &appendJob{ctx: ctx, in: in, done: make(chan struct{}), group: &group}
	}
	g := &db.group
	g.mu.Lock()
	if g.queues == nil {
		g.queues = map[string]*projectQueue{}
	}
	q := g.queues[projectID]
	if q == nil {
		q = &projectQueue{}
		g.queues[projectID] = q
	}
	q.pending = append(q.pending, group...)
	if !q.running {
		q.running = true
		go db.drain(projectID, q)
	}
	g.mu.Unlock()
	for i, j := range group {
		select {
		case <-j.done:
			res[i], errs[i] = j.res, j.err
		case <-ctx.Done():
			for k := i; k < len(group); k++ {
				errs[k] = ctx.Err()
			}
			return res, errs
		}
	}
	return res, errs
}

// drain runs the project's batches until none is waiting.
func (db *DB) drain(projectID string, q *projectQueue) {
	g := &db.group
	for {
		g.mu.Lock()
		n := min(len(q.pending), maxGroupBatch)
		for n > 0 && n < len(q.pending) && q.pending[n].group != nil && q.pending[n].group == q.pending[n-1].group {
			n++ // a page is never split
		}
		if n == 0 {
			q.running = false
			delete(g.queues, projectID)
			g.mu.Unlock()
			return
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		g.mu.Unlock()
		db.runAppendBatch(batch)
	}
}

// jobError reports an append's own refusal, which rolls back only its
// savepoint; anything else fails (and may retry) the whole transaction.
func jobError(err error) bool {
	return errors.Is(err, store.ErrSenderNotActive) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrEventIDCollision) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

func (db *DB) runAppendBatch(batch []*appendJob) {
	start := time.Now()
	var batchErr error // the transaction's own failure, not a job's refusal
	defer func() {
		if db.obs != nil {
			if len(batch) == 1 && !jobError(batch[0].err) {
				batchErr = batch[0].err
			}
			db.obs.ObserveGroupCommit(len(batch), time.Since(start), batchErr)
		}
		for _, j := range batch {
			close(j.done)
		}
	}()
	ctx := context.Background()
	if len(batch) == 1 {
		j := batch[0]
		if j.err = j.ctx.Err(); j.err != nil {
			return
		}
		j.err = db.inTx(j.ctx, "append", readCommitted, func(tx pgx.Tx) error {
			var err error
			j.res, err = appendTx(j.ctx, tx, j.in)
			return err
		})
		return
	}
	err := db.inTx(ctx, "append", readCommitted, func(tx pgx.Tx) error {
		for _, j := range batch {
			j.res, j.err = store.AppendResult{}, nil
			if j.err = j.ctx.Err(); j.err != nil {
				continue
			}
			if _, err := tx.Exec(ctx, "SAVEPOINT append"); err != nil {
				return err
			}
			res, err := appendTx(ctx, tx, j.in)
			if err != nil {
				if !jobError(err) {
					return err
				}
				j.err = mapErr("append", err)
				if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT append"); err != nil {
					return err
				}
				continue
			}
			j.res = res
			if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT append"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, j := range batch {
			if j.err == nil {
				j.err = err
			}
			j.res = store.AppendResult{}
		}
		batchErr = err
	}
}
