package couriers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/store"
)

// Target is one delivery target of a project: a WebSub subscription, a
// Matrix room, an export file.
type Target struct {
	// ID is the target's stable id, the key of its cursor and backoff
	// state; "" is a valid id for a courier with one target per project.
	ID string
	// Host is what the per-host limit counts (a callback's host, a
	// homeserver); "" for targets no host limit applies to.
	Host string
}

// Courier delivers records to its targets (DESIGN.md "Couriers"). The
// Runner calls Deliver for one target at a time, never twice at once for
// the same target, and may call it again with records it already
// delivered (at-least-once: receivers de-duplicate by event_id).
type Courier interface {
	// Name is the stable courier name of cursors and leases.
	Name() string
	// Projects lists the projects that have at least one target.
	Projects(ctx context.Context) ([]string, error)
	// Targets lists a project's targets.
	Targets(ctx context.Context, projectID string) ([]Target, error)
	// Deliver hands records (ascending received_seq, at least one) to
	// target. ctx ends when the delivery times out or the lease is lost.
	// A nil error advances the target's cursor past the records; an error
	// leaves it and the target backs off. Wrap ErrTargetGone when the
	// target no longer exists (its state is forgotten), or return a
	// *RetryAfterError to set the wait.
	Deliver(ctx context.Context, projectID string, target Target, records []store.Record) error
}

// ErrTargetGone, wrapped by Deliver, says the target is gone for good (a
// WebSub callback answered 410): the Runner forgets its cursor and stops
// delivering to it.
var ErrTargetGone = errors.New("courier target gone")

// RetryAfterError, returned by Deliver, fails the delivery and sets the
// wait before the next attempt to After (a Matrix 429's retry_after_ms).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %v: %v", e.After, e.Err)
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// FailingReporter is implemented by couriers that act when a target has
// failed for longer than Backoff.GiveUp (WebSub marks the subscription
// failing). The Runner calls it once per run of failures, and keeps
// retrying at Backoff.Max.
type FailingReporter interface {
	TargetFailing(ctx context.Context, projectID string, target Target, since time.Time)
}

// Backoff bounds the waits after failed deliveries: exponential from
// Initial, doubling per consecutive failure up to Max, each wait drawn
// uniformly from its upper half (jitter). GiveUp, when positive, is how
// long a target may fail before FailingReporter is told.
type Backoff struct {
	Initial, Max, GiveUp time.Duration
}

// Wait returns the wait after the n-th consecutive failure (n ≥ 1).
func (b Backoff) Wait(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Store is what a Runner needs from the store: the leases (lease.Store)
// and the targets' cursors and failures of store.Couriers, the records
// of store.Feed, the wake-ups of store.Advances, and each project's head.
// store.Store satisfies it.
type Store interface {
	lease.Store
	TargetStates(ctx context.Context, courier, projectID string) ([]store.TargetState, error)
	AdvanceCursors(ctx context.Context, lease store.Lease, advances []store.CursorAdvance) error
	RecordFailure(ctx context.Context, lease store.Lease, target string, retryIn time.Duration, lastError string) (store.TargetState, error)
	ForgetTarget(ctx context.Context, courier, projectID, target string) error
	store.Feed
	store.Advances
	Head(ctx context.Context, projectID string) (seq int64, at time.Time, err error)
}

var _ Store = store.Store(nil)

// Options tune a Runner; zero values take the defaults.
type Options struct {
	// Identity is this process's lease holder identity
	// (lease.OpenIdentity); when nil, Holder names a fresh one.
	Identity *lease.Identity
	Holder   string        // the lease holder id when Identity is nil
	LeaseTTL time.Duration // lease length; renewed every third of it; default 15s
	Batch    int           // records per delivery; default 100
	// BatchBytes also bounds a delivery: a batch ends with the record
	// that brings its RecordsBytes to BatchBytes or more; default 1 MiB
	// (16 events of the 64 KiB maximum). So what the deliveries in
	// flight hold is at most Concurrency × (BatchBytes + one record) of
	// records, whatever the events' size. The cut depends only on the
	// records, so a retry is still exactly the failed batch.
	BatchBytes int64
	// Concurrency bounds the deliveries in flight across every target and
	// project of this courier; default 32.
	Concurrency int
	// HostLimit returns how many deliveries may be in flight to one
	// Target.Host; nil allows 4 per host, and a result < 1 means no limit.
	HostLimit func(host string) int
	// SlowDelivery is how long a delivery may take before its target
	// counts as slow and gets a smaller share of its host's slots
	// (couriers/hostslots.go); default 5s.
	SlowDelivery time.Duration
	Backoff      Backoff // default 1s to 5m, no give-up
	// DeliveryTimeout bounds one Deliver call; default 60s. A delivery's
	// deadline is min(now + DeliveryTimeout, the lease's safe time), so
	// with a lease shorter than it a delivery gets at most the lease's
	// remaining safe time (package lease).
	DeliveryTimeout time.Duration
	// Refresh is how often the Runner re-reads the courier's projects and
	// targets and the projects' heads (advances and Refresh calls wake it
	// in between); default 30s.
	Refresh time.Duration
	Logger  *slog.Logger
	// Cache holds the record batches the Runner reads, shared by the
	// targets at one cursor; give every Runner of a process the same one
	// (and the WebSub courier) so that one byte budget bounds them all.
	// Nil: a Cache of DefaultCacheBytes of the Runner's own.
	Cache *Cache
	// OnResult, when set, is called after every Deliver call with the
	// courier's name and the outcome: "delivered", "gone" (ErrTargetGone)
	// or "failed" (metrics). It must be cheap and must not block.
	OnResult func(courier, outcome string)
}

// Runner runs one courier over every project whose lease it holds
// (package doc). Run it once; Refresh and Status may be called from any
// goroutine.
type Runner struct {
	st      Store
	courier Courier
	opt     Options
	log     *slog.Logger

	refresh  chan string     // project ids whose targets changed
	advances chan advanceReq // cursor writes for the committer
	sem      chan struct{}

	hosts *hostSlots // per-host limits (couriers/hostslots.go)

	// keeper holds the leases and their safe times: no delivery runs
	// past the safe time of the lease it started under.
	keeper *lease.Keeper

	cache *Cache // batches shared by targets at the same cursor (couriers/cache.go)

	mu       sync.Mutex // guards projects, inflight and lastErr (the scheduler writes, Status reads)
	projects map[string]*project
	inflight map[targetKey]bool // a worker runs for it (under any fence)
	lastErr  string
}

// project is the state of a project whose lease the Runner holds.
type project struct {
	lease   store.Lease
	head    int64
	ctx     context.Context // ends when the lease is lost
	cancel  context.CancelFunc
	targets map[string]*target
	loaded  bool
}

type target struct {
	t            Target
	cursor       int64
	failures     int
	failingSince time.Time
	notBefore    time.Time // local clock
	lastErr      string
	reported     bool  // FailingReporter told for this run of failures
	retryUpTo    int64 // the failed batch's last received_seq: a retry resends exactly that batch
}

// NewRunner returns a Runner; it starts nothing until Run.
func NewRunner(st Store, c Courier, opt Options) *Runner {
	if opt.LeaseTTL <= 0 {
		opt.LeaseTTL = 15 * time.Second
	}
	if opt.Batch <= 0 {
		opt.Batch = 100
	}
	if opt.BatchBytes <= 0 {
		opt.BatchBytes = DefaultBatchBytes
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = 32
	}
	if opt.HostLimit == nil {
		opt.HostLimit = func(string) int { return 4 }
	}
	if opt.SlowDelivery <= 0 {
		opt.SlowDelivery = 5 * time.Second
	}
	if opt.Backoff.Initial <= 0 {
		opt.Backoff.Initial = time.Second
	}
	if opt.Backoff.Max < opt.Backoff.Initial {
		opt.Backoff.Max = max(5*time.Minute, opt.Backoff.Initial)
	}
	if opt.DeliveryTimeout <= 0 {
		opt.DeliveryTimeout = 60 * time.Second
	}
	if opt.Refresh <= 0 {
		opt.Refresh = 30 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Cache == nil {
		opt.Cache = NewCache(DefaultCacheBytes)
	}
	id := opt.Identity
	if id == nil {
		id = &lease.Identity{ID: opt.Holder}
	}
	r := &Runner{st: st, courier: c, opt: opt, cache: opt.Cache, log: opt.Logger.With("courier", c.Name()),
		refresh: make(chan string, 256), sem: make(chan struct{}, opt.Concurrency),
		hosts: newHostSlots(opt.HostLimit, opt.SlowDelivery), projects: map[string]*project{}, inflight: map[targetKey]bool{},
		advances: make(chan advanceReq, 2*opt.Concurrency)}
	r.keeper = lease.New(st, lease.Options{Name: c.Name(), Holder: id, TTL: opt.LeaseTTL,
		Wanted: c.Projects, ListEvery: opt.Refresh, Logger: opt.Logger.With("courier", c.Name()),
		// An advance or Refresh named a project the last listing did not
		// include: only a project with targets is worth a lease.
		Check: func(ctx context.Context, id string) bool {
			ts, err := c.Targets(ctx, id)
			return err == nil && len(ts) > 0
		}})
	return r
}

// Refresh tells the Runner that a project's targets changed (a WebSub
// subscription was verified or removed, a room bound): it re-reads them,
// and takes the project's lease if it has none. It never blocks.
func (r *Runner) Refresh(projectID string) {
	select {
	case r.refresh <- projectID:
	default: // the periodic refresh catches up
	}
}

// Status is a courier's progress, for readiness and metrics. It never
// carries secrets: LastError is the courier's short description.
type Status struct {
	Courier  string `json:"courier"`
	Projects int    `json:"projects"` // projects whose lease this process holds
	Targets  int    `json:"targets"`
	Behind   int64  `json:"records_behind"` // records not yet delivered, summed over targets
	Failing  int    `json:"targets_failing"`
	// LastError is the newest delivery failure's description ("" when
	// none since the start).
	LastError string `json:"last_error,omitempty"`
}

// Status returns the courier's progress as the Runner last saw it.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{Courier: r.courier.Name(), Projects: len(r.projects), LastError: r.lastErr}
	for _, p := range r.projects {
		for _, t := range p.targets {
			s.Targets++
			if p.head > t.cursor {
				s.Behind += p.head - t.cursor
			}
			if t.failures > 0 {
				s.Failing++
			}
		}
	}
	return s
}

// targetKey names one target of one project.
type targetKey struct{ project, target string }

// result is what a delivery worker reports to the scheduler.
type result struct {
	projectID string
	fence     int64
	target    string
	cursor    int64
	failedAt  int64              // last received_seq of the batch that failed
	state     *store.TargetState // after a recorded failure
	err       error
}

// Run delivers until ctx ends, then stops its deliveries and releases its
// leases. It returns nil after ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	sub := r.st.SubscribeAdvances()
	defer sub.Close()
	// The keeper outlives Run's ctx: it must hold the leases until every
	// worker has returned and the last cursor writes are committed (they
	// are fenced), and only then release them.
	kctx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	var keeper sync.WaitGroup
	keeper.Go(func() { _ = r.keeper.Run(kctx) })
	updates := r.keeper.Updates()
	results := make(chan result, 64)
	var workers sync.WaitGroup
	stopCommit := make(chan struct{})
	var committer sync.WaitGroup
	committer.Go(func() { r.commitCursors(stopCommit) })
	defer func() {
		r.mu.Lock()
		for _, p := range r.projects {
			p.cancel()
		}
		r.projects = map[string]*project{}
		r.mu.Unlock()
		workers.Wait() // they may wait on the committer, which runs until now
		close(stopCommit)
		committer.Wait()
		stopKeeper()
		keeper.Wait() // it releases the leases
	}()

	refresh := time.NewTicker(r.opt.Refresh)
	defer refresh.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	var dirty map[string]bool // projects named by Refresh, reloaded when dirtyTimer fires
	dirtyTimer := time.NewTimer(time.Hour)
	dirtyTimer.Stop()
	defer dirtyTimer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-updates:
			r.applyLeases(ctx, u)
		case <-sub.Ready():
			for _, a := range sub.Take() {
				r.mu.Lock()
				p := r.projects[a.ProjectID]
				if p != nil && a.ReceivedSeq > p.head {
					p.head = a.ReceivedSeq
				}
				r.mu.Unlock()
				if p == nil {
					r.keeper.Want(a.ProjectID, false)
				}
			}
		case id := <-r.refresh:
			// Coalesced: many Refresh calls (a burst of verified
			// subscriptions) reload each project once per short interval.
			if dirty == nil {
				dirty = map[string]bool{}
				dirtyTimer.Reset(refreshDebounce)
			}
			dirty[id] = true
		case <-dirtyTimer.C:
			for id := range dirty {
				r.mu.Lock()
				p := r.projects[id]
				r.mu.Unlock()
				if p == nil {
					r.keeper.Want(id, true)
				} else {
					r.load(ctx, id, p)
				}
			}
			dirty = nil
		case <-refresh.C:
			r.mu.Lock()
			ids := make([]string, 0, len(r.projects))
			for id := range r.projects {
				ids = append(ids, id)
			}
			r.mu.Unlock()
			for _, id := range ids {
				r.mu.Lock()
				p := r.projects[id]
				r.mu.Unlock()
				if p != nil {
					r.load(ctx, id, p)
				}
			}
		case res := <-results:
			r.applyResult(ctx, res)
		case <-wake.C:
		}
		next := r.schedule(ctx, results, &workers)
		if !next.IsZero() {
			wake.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// applyLeases starts the projects whose lease was won and stops those
// whose lease was lost (or taken again under a new fence).
func (r *Runner) applyLeases(ctx context.Context, leases lease.Set) {
	held := make(map[string]store.Lease, len(leases))
	for _, l := range leases {
		held[l.ProjectID] = l.Lease
	}
	r.mu.Lock()
	var won []string
	for id, p := range r.projects {
		if l, ok := held[id]; !ok || l.Fence != p.lease.Fence {
			r.log.Info("lease lost", "project_id", id)
			p.cancel()
			delete(r.projects, id)
		}
	}
	for id, l := range held {
		if _, ok := r.projects[id]; !ok {
			pctx, cancel := context.WithCancel(ctx)
			r.projects[id] = &project{lease: l, ctx: pctx, cancel: cancel, targets: map[string]*target{}}
			won = append(won, id)
		}
	}
	r.mu.Unlock()
	sort.Strings(won)
	for _, id := range won {
		r.log.Debug("lease won", "project_id", id)
		r.mu.Lock()
		p := r.projects[id]
		r.mu.Unlock()
		r.load(ctx, id, p)
	}
}

// load reads a project's head, targets and their durable state.
func (r *Runner) load(ctx context.Context, id string, p *project) {
	head, _, err := r.st.Head(ctx, id)
	if err != nil {
		r.log.Warn("read head", "project_id", id, "err", err)
		return
	}
	ts, err := r.courier.Targets(ctx, id)
	if err != nil {
		r.log.Warn("list targets", "project_id", id, "err", err)
		return
	}
	states, err := r.st.TargetStates(ctx, r.courier.Name(), id)
	if err != nil {
		r.log.Warn("read target states", "project_id", id, "err", err)
		return
	}
	byID := make(map[string]store.TargetState, len(states))
	for _, s := range states {
		byID[s.Target] = s
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p.head = max(p.head, head)
	keep := make(map[string]bool, len(ts))
	for _, t := range ts {
		keep[t.ID] = true
		cur := p.targets[t.ID]
		if cur == nil {
			s := byID[t.ID]
			cur = &target{cursor: s.ReceivedSeq, failures: s.Failures, failingSince: s.FailingSince, lastErr: s.LastError}
			if s.RetryIn > 0 {
				cur.notBefore = now.Add(s.RetryIn)
			}
			p.targets[t.ID] = cur
		}
		cur.t = t
	}
	for tid := range p.targets {
		if !keep[tid] {
			delete(p.targets, tid)
		}
	}
	p.loaded = true
}

// schedule starts a worker for every due target with records after its
// cursor, and returns when the next backing-off target is due (zero when
// none is).
func (r *Runner) schedule(ctx context.Context, results chan<- result, workers *sync.WaitGroup) time.Time {
	now := time.Now()
	var next time.Time
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, p := range r.projects {
		if !p.loaded {
			continue
		}
		if _, safe := r.keeper.Deadline(p.lease, 0); !safe {
			continue // not (or no longer) known to be safe: the keeper's next report reschedules
		}
		for _, t := range p.targets {
			if t.cursor >= p.head {
				continue
			}
			key := targetKey{id, t.t.ID}
			if r.inflight[key] {
				continue
			}
			if now.Before(t.notBefore) {
				if next.IsZero() || t.notBefore.Before(next) {
					next = t.notBefore
				}
				continue
			}
			r.inflight[key] = true
			w := worker{r: r, projectID: id, lease: p.lease, ctx: p.ctx, runCtx: ctx, target: t.t, cursor: t.cursor,
				failures: t.failures, upTo: t.retryUpTo, head: p.head, results: results}
			workers.Go(w.run)
		}
	}
	return next
}

func (r *Runner) applyResult(ctx context.Context, res result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, targetKey{res.projectID, res.target})
	p := r.projects[res.projectID]
	if p == nil || p.lease.Fence != res.fence {
		return // the lease it ran under is gone
	}
	t := p.targets[res.target]
	if t == nil {
		return
	}
	t.cursor = max(t.cursor, res.cursor)
	switch {
	case res.err == nil:
		t.failures, t.failingSince, t.notBefore, t.lastErr, t.reported, t.retryUpTo = 0, time.Time{}, time.Time{}, "", false, 0
	case errors.Is(res.err, ErrTargetGone):
		delete(p.targets, res.target)
	case errors.Is(res.err, store.ErrLeaseLost):
		r.log.Info("lease lost during delivery", "project_id", res.projectID)
		p.cancel()
		delete(r.projects, res.projectID)
	default:
		r.lastErr = res.err.Error()
		t.retryUpTo = res.failedAt
		if res.state != nil {
			if !res.state.FailingSince.Equal(t.failingSince) {
				// A new run of failures: the worker delivered a batch
				// before this one failed, so no nil result reset reported.
				t.reported = false
			}
			t.failures, t.failingSince, t.lastErr = res.state.Failures, res.state.FailingSince, res.state.LastError
			t.notBefore = time.Now().Add(res.state.RetryIn)
		} else { // the failure could not be recorded: back off locally
			t.failures++
			t.notBefore = time.Now().Add(r.opt.Backoff.Wait(t.failures))
		}
		if fr, ok := r.courier.(FailingReporter); ok && r.opt.Backoff.GiveUp > 0 && !t.reported &&
			!t.failingSince.IsZero() && time.Since(t.failingSince) >= r.opt.Backoff.GiveUp {
			t.reported = true
			go fr.TargetFailing(ctx, res.projectID, t.t, t.failingSince)
		}
	}
}

// worker drains one target: records after its cursor, batch by batch,
// each delivery under the global and per-host limits, each cursor advance
// fenced by the lease.
type worker struct {
	r         *Runner
	projectID string
	lease     store.Lease
	ctx       context.Context // the project's: ends when its lease is lost
	runCtx    context.Context // Run's
	target    Target
	cursor    int64
	failures  int
	upTo      int64 // > 0: the first batch ends there (a retry of a failed batch)
	head      int64 // the project's head as known when the worker started
	results   chan<- result
}

func (w worker) run() {
	res := result{projectID: w.projectID, fence: w.lease.Fence, target: w.target.ID}
	res.cursor, res.failedAt, res.err = w.drain()
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
func (w worker) drain() (cursor, failedAt int64, err error) {
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
		done := make(chan error, 1)
		r.advances <- advanceReq{lease: w.lease, target: w.target.ID, seq: next, done: done}
		if err := <-done; err != nil {
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

// refreshDebounce is how long Refresh calls are gathered before the
// projects they name are reloaded.
const refreshDebounce = 50 * time.Millisecond

// advanceReq is one cursor write a worker waits for.
type advanceReq struct {
	lease  store.Lease
	target string
	seq    int64
	done   chan error
}

// commitCursors writes the cursors of finished deliveries: every request
// queued while a write is in flight goes into the next one, one
// transaction per (project, fence) — like the log's group commit, so a
// fan-out to many targets costs a few syncs, not one per delivery. It
// runs until stop is closed (after every worker has returned).
func (r *Runner) commitCursors(stop <-chan struct{}) {
	for {
		var batch []advanceReq
		select {
		case <-stop:
			return
		case req := <-r.advances:
			batch = append(batch, req)
		}
	gather:
		for len(batch) < 1024 {
			select {
			case req := <-r.advances:
				batch = append(batch, req)
			default:
				break gather
			}
		}
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
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := r.st.AdvanceCursors(ctx, l, adv)
			cancel()
			for _, i := range idx {
				batch[i].done <- err
			}
		}
	}
}

// deliver runs one Deliver call inside the concurrency limits.
func (w worker) deliver(recs []store.Record) error {
	r := w.r
	// The host's slot first: a worker queued behind a slow host holds no
	// slot of the global limit, so other hosts' targets go on.
	slot, err := r.hosts.acquire(w.ctx, w.target.Host, targetKey{w.projectID, w.target.ID})
	if err != nil {
		return err
	}
	defer slot.release()
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
	slot.begin()
	err = r.courier.Deliver(dctx, w.projectID, w.target, recs)
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
