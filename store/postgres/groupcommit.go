package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/groupcommit"
)

// Group commit per project. Appends to one project are serialized by its
// advisory lock and each commit flushes the WAL while holding it, so
// concurrent appends to one project would otherwise queue behind one flush
// each. Instead, appends arriving while a project's batch runs wait for the
// next batch (groupcommit.Queues, one queue per project): one transaction,
// one lock acquisition, one commit and one flush for all of them, each
// append in its own savepoint so one refusal touches no other
// (groupcommit.Batch, the policy store/sqlite's writer shares). Different
// projects run their batches in parallel; other processes still serialize
// through the advisory lock.

// maxGroupBatch caps the appends of one transaction, except that a page
// of foreign records (submitAppends, at most 200) is never split.
const maxGroupBatch = 64

// appendStep is what an append job runs on: the batch's transaction and
// the context its SQL runs under (the submitter's for a lone append, the
// background for a batch, whose transaction is shared).
type appendStep struct {
	ctx context.Context
	tx  pgx.Tx
}

type appendJob = groupcommit.Job[appendStep]

// appendRun is the job of one append: its result lands in *res.
func appendRun(in appendInput, res *store.AppendResult) func(s appendStep) error {
	return func(s appendStep) error {
		var err error
		*res, err = appendTx(s.ctx, s.tx, in)
		return err
	}
}

// submitAppend queues one append and waits for its batch.
func (db *DB) submitAppend(ctx context.Context, in appendInput) (store.AppendResult, error) {
	var res store.AppendResult
	j := groupcommit.NewJob(ctx, appendRun(in, &res))
	db.appends.Push(in.ev.ProjectID, j)
	// When ctx ends first the job may still run (an exact retry then
	// returns its receipt).
	if err := j.Wait(); err != nil {
		return store.AppendResult{}, err
	}
	return res, nil
}

// submitAppends queues ins as one page, in order, into one batch of
// their project, and waits for each. When ctx ends first, the jobs not
// answered yet get ctx's error (they may still run).
func (db *DB) submitAppends(ctx context.Context, projectID string, ins []appendInput) ([]store.AppendResult, []error) {
	res := make([]store.AppendResult, len(ins))
	if len(ins) == 0 {
		return res, make([]error, 0)
	}
	// got is written by the batch; a result is read only once its job
	// has answered nil (a job not answered yet may still run).
	got := make([]store.AppendResult, len(ins))
	runs := make([]func(appendStep) error, len(ins))
	for i, in := range ins {
		runs[i] = appendRun(in, &got[i])
	}
	p := groupcommit.NewPage(ctx, runs)
	db.appends.Push(projectID, p)
	errs := p.WaitPage()
	for i, err := range errs {
		if err == nil {
			res[i] = got[i]
		}
	}
	return res, errs
}

// jobError reports an append's own refusal, which rolls back only its
// savepoint; anything else fails (and may retry) the whole transaction.
func jobError(err error) bool {
	return errors.Is(err, store.ErrSenderNotActive) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrEventIDCollision) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// runAppendBatch runs one batch of a project's queue (groupcommit.Queues
// calls it) and answers every job. A lone append runs in a transaction of
// its own, without a savepoint, under its submitter's context.
func (db *DB) runAppendBatch(_ string, entries []*appendJob) {
	start := time.Now()
	jobs := groupcommit.Jobs(entries)
	var batchErr error // the transaction's own failure, not a job's refusal
	observe := func() {
		if db.obs != nil {
			db.obs.ObserveGroupCommit(len(jobs), time.Since(start), batchErr)
		}
	}
	if len(jobs) == 1 {
		j := jobs[0]
		jctx := j.Context()
		err := jctx.Err()
		if err == nil {
			err = db.inTx(jctx, "append", readCommitted, func(tx pgx.Tx) error {
				return j.Run(appendStep{ctx: jctx, tx: tx})
			})
			if !jobError(err) {
				batchErr = err
			}
		}
		observe()
		j.Answer(err)
		return
	}
	ctx := context.Background()
	var b *groupcommit.Batch[appendStep]
	err := db.inTx(ctx, "append", readCommitted, func(tx pgx.Tx) error {
		b = groupcommit.NewBatch[appendStep](pgBatch{ctx: ctx, tx: tx}, nil, len(jobs))
		for _, e := range entries {
			b.Take(e)
		}
		return b.Err()
	})
	batchErr = err
	observe()
	if b == nil {
		// The transaction never began: no job ran.
		for _, e := range entries {
			e.Answer(err)
		}
		return
	}
	b.Answer(err)
}

// pgBatch is PostgreSQL's side of a groupcommit.Batch: every append in
// its own savepoint; an append's own refusal (jobError) rolls back only
// that savepoint, anything else fails the transaction.
type pgBatch struct {
	ctx context.Context
	tx  pgx.Tx
}

func (p pgBatch) Exec(run func(appendStep) error, _ bool) error {
	return run(appendStep(p))
}

func (p pgBatch) Own(err error) error {
	if !jobError(err) {
		return nil
	}
	return mapErr("append", err)
}

func (pgBatch) Clean(error) bool { return false } // never optimistic

func (p pgBatch) Savepoint() error {
	_, err := p.tx.Exec(p.ctx, "SAVEPOINT append")
	return err
}

// RollbackTo leaves the savepoint open: the next one takes the name.
func (p pgBatch) RollbackTo() error {
	_, err := p.tx.Exec(p.ctx, "ROLLBACK TO SAVEPOINT append")
	return err
}

func (p pgBatch) Release() error {
	_, err := p.tx.Exec(p.ctx, "RELEASE SAVEPOINT append")
	return err
}
