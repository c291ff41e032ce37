package couriers

import (
	"context"
	"time"

	"github.com/acrelay/acrelay/store"
)

// committer is the Runner's fenced cursor committer: workers hand it the
// cursor a delivery reached and wait for the write. Every request queued
// while a write is in flight goes into the next one, one transaction per
// (project, fence) — like the log's group commit, so a fan-out to many
// targets costs a few syncs, not one per delivery. Each write names the
// lease's fence, so once a lease lapses or changes hands its old holder's
// writes fail with store.ErrLeaseLost.
type committer struct {
	st Store
	in chan advanceReq
}

// commitTimeout bounds one cursor transaction.
const commitTimeout = 5 * time.Second

// maxCommitBatch bounds the cursor writes gathered into one round.
const maxCommitBatch = 1024

func newCommitter(st Store, queue int) *committer {
	return &committer{st: st, in: make(chan advanceReq, queue)}
}

// advanceReq is one cursor write a worker waits for.
type advanceReq struct {
	lease  store.Lease
	target string
	seq    int64
	done   chan error
}

// commit writes target's cursor seq under lease and returns the write's
// error (store.ErrLeaseLost once the fence is stale). What was delivered
// is recorded even while the Runner stops: run goes on until every
// worker has returned.
func (c *committer) commit(lease store.Lease, target string, seq int64) error {
	done := make(chan error, 1)
	c.in <- advanceReq{lease: lease, target: target, seq: seq, done: done}
	return <-done
}

// run writes cursors until stop is closed (after every worker has
// returned).
func (c *committer) run(stop <-chan struct{}) {
	for {
		var batch []advanceReq
		select {
		case <-stop:
			return
		case req := <-c.in:
			batch = append(batch, req)
		}
	gather:
		for len(batch) < maxCommitBatch {
			select {
			case req := <-c.in:
				batch = append(batch, req)
			default:
				break gather
			}
		}
		c.write(batch)
	}
}

// write commits batch, one fenced transaction per lease in the order the
// leases first appear, and answers every request.
func (c *committer) write(batch []advanceReq) {
	groups := map[store.Lease][]int{}
	var order []store.Lease
	for i, req := range batch {
		if _, ok := groups[req.lease]; !ok {
			order = append(order, req.lease)
		}
		groups[req.lease] = append(groups[req.lease], i)
	}
	for _, l := range order {
		idx := groups[l]
		adv := make([]store.CursorAdvance, len(idx))
		for j, i := range idx {
			adv[j] = store.CursorAdvance{Target: batch[i].target, ReceivedSeq: batch[i].seq}
		}
		// What was delivered is recorded even while the runner stops;
		// the fence refuses it if the lease is gone.
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		err := c.st.AdvanceCursors(ctx, l, adv)
		cancel()
		for _, i := range idx {
			batch[i].done <- err
		}
	}
}
