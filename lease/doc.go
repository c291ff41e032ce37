// Package lease keeps the leases of single-holder background work
// (DESIGN.md "As built (wave 3)"): the courier runner's per (courier,
// project) leases, federation links, and the relay-wide jobs that must run
// on one process at a time. It sits between those packages and store: it
// holds no SQL, only the keeping rules, written once.
//
// What a Keeper guarantees:
//
//   - It reads before it takes. A lease another holder keeps live is never
//     asked for: the keeper reads the lease rows (store.Couriers
//     LeaseStates, a read that locks and writes nothing), remembers until
//     when each is held elsewhere, and calls AcquireLeases only for leases
//     that are free or expired. An idle process therefore writes one
//     transaction per lease name per renewal interval (the renewal of
//     everything it holds), whatever the number of projects or of other
//     processes. A lease read with less than two thirds of its length
//     left (its holder missed a renewal: it renews every third) is read
//     again at the instant it lapses, so a dead holder's leases are taken
//     at most the lease length after its last renewal, not an interval
//     later.
//   - Every held lease has a local safe time: the local clock reading
//     taken before the store call that last took or renewed it, plus the
//     lease length, minus a safety margin (a quarter of the lease) for clock
//     rates and cancellation latency. The database cannot give the lease
//     to another holder before that instant. Work done under a lease takes
//     a deadline of min(now + its own timeout, safe time) (Keeper.Deadline),
//     so nothing sent under a lease outlives it; a renewal extends the safe
//     time of later work, never of work already started.
//   - Every store call of the keeper (read, take, renew, reclaim, release)
//     has its own timeout, shorter than the safety margin, so a renewal
//     that hangs ends before the leases it would renew stop being safe; on
//     PostgreSQL the timeout is also the statements' statement_timeout and
//     lock_timeout.
//   - A lease that is not renewed by its safe time is dropped locally (the
//     work under it is told to stop) even if the store cannot be reached.
//   - A process restarted with its predecessor's holder identity (Identity,
//     kept in the data directory and locked while a process uses it)
//     reclaims that holder's live leases at start under new fences
//     (store.Couriers ReclaimLeases): it resumes at once instead of waiting
//     out its own dead leases, and whatever the dead process still had in
//     flight is refused by the fence (store.ErrLeaseLost).
//
// How it is built: Run owns a small state (keeping: what is held, what is
// known held elsewhere until when, which of those lapse when, which
// projects Check said are idle) and turns each event into one method of
// it — tick at every renewal interval (renew, list, take, publish), want
// for requests, lapse when a lease held elsewhere lapses. Held is the one
// way to observe the result: the set as last published and a channel
// closed at the next publication; Deadline and Context bound work by it.
// Safe times are read on Options.Now (the real clock unless a test
// injects one); TestFencingInvariant checks the guarantee above as a
// property over holders that start, stop, crash, stall and run on skewed
// clocks, on both engines.
//
// What it does not guarantee: that two processes never act at once. A
// process that is paused (a stopped VM, a swapped-out process) past its
// safe time may still complete a send it started before; only writes to
// the store are fenced. Work under a lease must therefore be at-least-once
// with stable ids, as every courier is.
package lease
