// Package couriers runs the couriers that republish a project's immutable
// {event, receipt} records (DESIGN.md "Couriers and federation"): the
// export archive here, WebSub and Matrix in sub-packages. A courier is a
// set of targets per project (subscriptions, rooms, files), each with a
// durable cursor and durable backoff state in the store; the Runner reads
// the records after a target's cursor, hands them to the courier's
// Deliver and advances the cursor. It is never fed from the request path:
// the store's advances (store.Advances) only wake it, so a crash, a
// restart or a receiver that is down loses nothing — it resumes from the
// cursor.
//
// Delivery is at-least-once with stable ids: a record may be handed to a
// target again after a crash between a delivery and its cursor write, or
// after a lease changed hands; receivers de-duplicate by event_id (Atom
// <id>, Matrix transaction id, the relay's idempotent append for
// federation).
//
// The Runner is small parts, each on its own goroutine, that share no
// lock across a store call:
//
//   - the keeper (package lease) takes and renews the leases of the
//     courier's projects and reports what it holds;
//   - the loader (loader.go) reads a held project's head, its targets
//     (Courier.Targets) and their durable cursors and backoff, when the
//     lease is won, on Refresh and every Options.Refresh; requests for a
//     project already waiting merge into one load;
//   - the scheduling loop (Runner.Run, schedule.go) applies lease
//     reports, the store's advances, loads and delivery results, and
//     starts a worker for each target that is due. It makes no store call,
//     so a slow store read delays a load, never the dispatch of other
//     targets. A target caught up with its project's head sits in the
//     project's idle list, where only that project's next advance looks;
//     one due now is in a FIFO ready queue; one backing off is in a
//     due-heap (container/heap) by the time it is due. An advance costs
//     O(k) for the k targets it wakes and a failure O(log n), whatever the
//     number of targets held (BenchmarkAdvance: flat from 1,000 to 100,000);
//   - admission (admit.go) is the one limiter of workers, under the
//     loop's lock: 4 × Concurrency (at least 64) alive in all, and per
//     host at most HostLimit, of which at most a quarter (slowShare) for
//     targets whose last delivery was slow. The place it grants is the
//     worker's host slot until its result; a target whose host is full
//     waits in the host's list (FIFO) and starts first when the host has
//     room, so a fan-out to 100,000 targets runs a few hundred
//     goroutines, not 100,000;
//   - workers (worker.go), one per admitted target, read the batch after
//     the cursor (the Cache), call Deliver under the global Concurrency
//     limit, hand the cursor reached to the committer, and report with
//     their result whether their last delivery was slow;
//   - the committer (commit.go), which group-commits cursor writes,
//     fenced by the lease, and answers each worker.
//
// What the Runner guarantees:
//
//   - Targets progress independently: each target with records after its
//     cursor gets its own worker once admitted, which never waits for
//     another target's delivery. A
//     target that hangs holds one slot of the courier's Concurrency and
//     one of its host's HostLimit, never more; a worker has its host's
//     place (its admission) before it takes a global slot, so one dead
//     host cannot starve the others. A target whose last delivery took
//     Options.SlowDelivery or longer gets only a quarter of its host's
//     places (admit.go), so a host's hanging targets cannot starve its
//     healthy ones once each has timed out.
//   - Every goroutine the Runner starts (keeper, loader, committer,
//     workers, FailingReporter calls) has returned when Run returns.
//   - A failed delivery backs off exponentially with jitter between the
//     courier's Backoff bounds; the count and the time of the next attempt
//     are stored (store.Couriers.RecordFailure), so a restarted process
//     neither hammers a dead target nor forgets it. A courier may return
//     *RetryAfterError to set the wait, wrap ErrTargetGone to drop the
//     target, and implement FailingReporter to hear of targets failing
//     longer than Backoff.GiveUp.
//   - With several processes on one database, one process delivers per
//     (courier, project): the one holding its lease, kept by package
//     lease. The keeper renews every lease this process holds in one
//     store write per third of the lease, on its own timer, and reads a
//     lease held elsewhere instead of asking for it, so an idle relay
//     writes once per courier per interval, whatever the number of
//     projects or processes. Every delivery's deadline is min(now +
//     DeliveryTimeout, the lease's safe time): the local time, measured
//     before the store call that last took or renewed the lease, plus the
//     lease, minus a quarter of it; the database cannot give the lease to
//     another process before that. A delivery is therefore cut (its
//     context ends) before its lease can lapse, and a lease not renewed by
//     its safe time starts no delivery. Every cursor write names the
//     lease's fence; once the lease lapses or changes hands the old
//     holder's writes fail with store.ErrLeaseLost. So no record is sent
//     by two processes at once, provided a process is not stalled (a
//     paused VM, SIGSTOP) between its deadline check and its bytes leaving
//     for longer than that quarter of the lease, and clocks do not drift
//     by as much; cursor writes are fenced exactly, whatever the stall.
//   - A process restarted on the same data directory keeps its
//     predecessor's holder identity (lease.OpenIdentity) and reclaims its
//     live leases at start under new fences, so a SIGKILLed relay resumes
//     delivery as soon as it is back, not after its dead leases expire; the
//     dead process's late writes are refused by the new fence.
//   - The records of one target are delivered in receipt order, in
//     batches of at most Options.Batch, one Deliver call at a time; a failed
//     batch is retried as exactly that batch, so a signed body is resent as
//     the same bytes.
//   - Cursor writes are group-committed: the cursors of every delivery that
//     finishes while one write is in flight go into the next, one fenced
//     transaction per project, so a fan-out to many targets costs a few
//     syncs rather than one per delivery.
//   - Targets at one cursor share the batch read after it (a fan-out reads
//     each batch once, not once per target; concurrent readers of a batch
//     wait for the first read); couriers must not modify the records they
//     are handed. Batches, and the WebSub courier's rendered bodies, live
//     in one Cache per process (Options.Cache, `--courier-cache-bytes`,
//     default 64 MiB), charged by bytes and evicted least recently used
//     first, so a flood of large events costs at most its budget plus what
//     the deliveries in flight hold (cache.go), however many targets lag.
//   - Refresh (a courier's targets changed: a subscription verified, a room
//     bound) reloads that project's targets within 50 ms, or twice its last
//     load's duration if that is longer (a project of 100,000 targets being
//     verified one by one is not reloaded back to back); when this process
//     has no lease of the project, it reads the lease at once and takes it
//     if it is free or expired.
//
// It deliberately does not render, sign or address anything: that is each
// courier's job; nor does it keep leases itself (package lease does, for
// every piece of single-holder background work: couriers, federation
// links, the Matrix inbox and bot /sync, the hub's revoked-token scan).
package couriers
