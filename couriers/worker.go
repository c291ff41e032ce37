package couriers

import (
	"context"
	"errors"
	"time"

	"github.com/acrelay/acrelay/store"
)

// worker drains one target: records after its cursor, batch by batch,
// each delivery under the global and per-host limits, each cursor advance
// fenced by the lease (the committer's). It reads nothing of the
// scheduler's state: what it needs is copied in when it starts, and what
// it reached goes back as one result.
type worker struct {
	r     *Runner
	t     *target // identity only: the scheduler owns its fields
	host  string  // its admission (admit.go): its place at the host
	class int
	// delivered and slow: whether it made a delivery, and whether the
	// last one took Options.SlowDelivery or longer (admit.go's slow set).
	delivered, slow bool
	projectID       string
	lease           store.Lease
	ctx             context.Context // the project's: ends when its lease is lost
	runCtx          context.Context // Run's
	target          Target
	cursor          int64
	failures        int
	upTo            int64 // > 0: the first batch ends there (a retry of a failed batch)
	head            int64 // the project's head as known when the worker started
	results         chan<- result
}

func (w *worker) run() {
	res := result{t: w.t, host: w.host, class: w.class, projectID: w.projectID, target: w.target.ID}
	res.cursor, res.failedAt, res.err = w.drain()
	res.delivered, res.slow = w.delivered, w.slow
	if errors.Is(res.err, errLeaseUnsafe) {
		res.err = nil
	}
	if res.err != nil && !errors.Is(res.err, ErrTargetGone) && !errors.Is(res.err, store.ErrLeaseLost) && w.ctx.Err() == nil {
		wait := w.r.opt.Backoff.Wait(w.failures + 1)
		var ra *RetryAfterError
		if errors.As(res.err, &ra) {
			wait = ra.After
		}
		st, err := w.r.st.RecordFailure(w.ctx, w.lease, w.target.ID, wait, res.err.Error())
		switch {
		case err == nil:
			res.state = &st
		case errors.Is(err, store.ErrLeaseLost):
			res.err = err
		}
		w.r.log.Warn("delivery failed", "project_id", w.projectID, "target", w.target.ID, "failures", st.Failures, "retry_in", wait, "err", res.err)
	}
	select { // always reported, so the scheduler knows the target is free
	case w.results <- res:
	case <-w.runCtx.Done(): // Run is ending; nobody schedules any more
	}
}

// drain returns the cursor reached and, on a failed delivery, the last
// received_seq of the batch that failed.
func (w *worker) drain() (cursor, failedAt int64, err error) {
	r := w.r
	cursor = w.cursor
	upTo := w.upTo
	for {
		if _, safe := r.keeper.Deadline(w.lease, 0); w.ctx.Err() != nil || !safe {
			return cursor, 0, nil
		}
		if cursor >= w.head {
			// Caught up with the head known at spawn; records appended
			// since raise the project's head, and the scheduler starts
			// the target again — no read to learn that nothing is new.
			return cursor, 0, nil
		}
		recs, err := recordsAfter(w.ctx, r.cache, r.st, w.projectID, cursor, r.opt.Batch, w.head)
		if err != nil || len(recs) == 0 {
			return cursor, 0, err
		}
		if upTo > 0 {
			// A retry hands the courier exactly the batch that failed, so
			// what it sends (and signs) is the same bytes.
			n := 0
			for n < len(recs) && recs[n].ReceivedSeq <= upTo {
				n++
			}
			if n > 0 {
				recs = recs[:n]
			}
			upTo = 0
		}
		if n := cutBytes(recs, r.opt.BatchBytes); n < len(recs) {
			// A copy: the rest of a cached batch is not pinned by this
			// delivery once the cache evicts it.
			recs = append([]store.Record(nil), recs[:n]...)
		}
		if err := w.deliver(recs); err != nil {
			if errors.Is(err, ErrTargetGone) {
				if ferr := r.st.ForgetTarget(context.WithoutCancel(w.ctx), r.courier.Name(), w.projectID, w.target.ID); ferr != nil {
					r.log.Warn("forget target", "project_id", w.projectID, "target", w.target.ID, "err", ferr)
				}
			}
			return cursor, recs[len(recs)-1].ReceivedSeq, err
		}
		// What was delivered is recorded even when the project stopped
		// during the delivery; the fence refuses it if the lease is gone.
		next := recs[len(recs)-1].ReceivedSeq
		if err := r.commit.commit(w.lease, w.target.ID, next); err != nil {
			return cursor, 0, err
		}
		cursor = next
	}
}

// cutBytes returns how many of recs make a batch of at most about limit
// bytes (RecordsBytes): up to and including the record that brings the
// total to limit or more, and at least one. It depends only on recs, so
// a retry from the same cursor gets the same batch.
func cutBytes(recs []store.Record, limit int64) int {
	var total int64
	for i := range recs {
		total += RecordsBytes(recs[i : i+1])
		if total >= limit {
			return i + 1
		}
	}
	return len(recs)
}

// deliver runs one Deliver call inside the global limit (the host's is
// the worker's admission).
func (w *worker) deliver(recs []store.Record) error {
	r := w.r
	select {
	case r.sem <- struct{}{}:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	defer func() { <-r.sem }()
	// No send outlives the lease it started under: the deadline is
	// min(now + DeliveryTimeout, the lease's safe time).
	deadline, safe := r.keeper.Deadline(w.lease, r.opt.DeliveryTimeout)
	if !safe {
		return errLeaseUnsafe // the lease may have lapsed: do not send
	}
	dctx, cancel := context.WithDeadline(w.ctx, deadline)
	defer cancel()
	start := time.Now()
	err := r.courier.Deliver(dctx, w.projectID, w.target, recs)
	w.delivered, w.slow = true, time.Since(start) >= r.opt.SlowDelivery
	if r.opt.OnResult != nil {
		outcome := "delivered"
		switch {
		case errors.Is(err, ErrTargetGone):
			outcome = "gone"
		case err != nil:
			outcome = "failed"
		}
		r.opt.OnResult(r.courier.Name(), outcome)
	}
	return err
}

// errLeaseUnsafe ends a drain whose lease was not renewed in time; the
// target is rescheduled, without a failure, once the lease is renewed.
var errLeaseUnsafe = errors.New("lease not renewed in time")

// result is what a worker reports to the scheduler.
type result struct {
	t         *target // the target it ran for, as the scheduler knew it
	host      string  // its worker's admission, released with the result
	class     int
	projectID string
	target    string
	cursor    int64
	failedAt  int64 // last received_seq of the batch that failed
	delivered bool  // it made a delivery; slow: the last took SlowDelivery or longer
	slow      bool
	state     *store.TargetState // after a recorded failure
	err       error
}
