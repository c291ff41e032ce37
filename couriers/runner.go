package couriers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acrelay/acrelay/internal/backoff"
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

// Wait returns the wait after the n-th consecutive failure (n ≥ 1):
// internal/backoff's equal jitter.
func (b Backoff) Wait(n int) time.Duration {
	return backoff.Policy{Initial: b.Initial, Max: b.Max}.Equal(n)
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
	// counts as slow and gets a smaller share of its host's places
	// (couriers/admit.go); default 5s.
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
//
// Its parts, each on its own goroutine: the keeper (package lease) holds
// the leases; the loader (loader.go) reads heads, targets and their
// durable state; the scheduling loop (Run, schedule.go) keeps the
// due-heap and starts a worker per due target; workers (worker.go)
// deliver; the committer (commit.go) writes their cursors, fenced and
// group-committed. Batches and bodies live in the shared Cache.
type Runner struct {
	st      Store
	courier Courier
	opt     Options
	log     *slog.Logger

	refresh chan string // project ids whose targets changed
	sem     chan struct{}

	// keeper holds the leases and their safe times: no delivery runs
	// past the safe time of the lease it started under.
	keeper *lease.Keeper
	loader *loader
	commit *committer
	admit  *admission // the limiter of workers, global and per host (admit.go); under mu

	cache *Cache // batches shared by targets at the same cursor (couriers/cache.go)

	mu       sync.Mutex // guards what follows (the loop writes, Status reads)
	projects map[string]*project
	sched    scheduler
	inflight map[targetKey]bool // a worker runs for it (under any fence)
	lastErr  string
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
		projects: map[string]*project{}, inflight: map[targetKey]bool{},
		commit: newCommitter(st, 2*opt.Concurrency)}
	r.loader = newLoader(r)
	r.admit = newAdmission(opt.HostLimit, opt.Concurrency)
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

// refreshDebounce is how long Refresh calls are gathered before the
// projects they name are reloaded.
const refreshDebounce = 50 * time.Millisecond

// Run delivers until ctx ends, then stops its deliveries and releases its
// leases. It returns nil after ctx ends.
//
// Run's goroutine is the scheduling loop: it applies the keeper's lease
// reports, the store's advances, the loader's loads and the workers'
// results to the due-heap (schedule.go), and starts the workers of the
// targets that are due. It makes no store call of its own, so a slow
// store read delays a load, never the dispatch of other targets.
func (r *Runner) Run(ctx context.Context) error {
	sub := r.st.SubscribeAdvances()
	defer sub.Close()
	// The keeper outlives Run's ctx: it must hold the leases until every
	// worker has returned and the last cursor writes are committed (they
	// are fenced), and only then release them.
	kctx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	_, leasesChanged := r.keeper.Held() // before Run: its first report is not missed
	var keeper sync.WaitGroup
	keeper.Go(func() { _ = r.keeper.Run(kctx) })
	results := make(chan result, 64)
	var workers, loader, reports sync.WaitGroup
	loader.Go(func() { r.loader.run(ctx) })
	stopCommit := make(chan struct{})
	var committer sync.WaitGroup
	committer.Go(func() { r.commit.run(stopCommit) })
	defer func() {
		r.mu.Lock()
		for _, p := range r.projects {
			r.sched.dropProject(p)
		}
		r.projects = map[string]*project{}
		r.mu.Unlock()
		loader.Wait()
		workers.Wait() // they may wait on the committer, which runs until now
		reports.Wait() // FailingReporter calls: ctx has ended
		close(stopCommit)
		committer.Wait()
		stopKeeper()
		keeper.Wait() // it releases the leases
	}()
	start := func(t *target) tstate { return r.start(ctx, t, results, &workers) }

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
		case <-leasesChanged:
			var held lease.Set
			held, leasesChanged = r.keeper.Held()
			r.applyLeases(ctx, held)
		case <-sub.Ready():
			now := time.Now()
			for _, a := range sub.Take() {
				r.mu.Lock()
				p := r.projects[a.ProjectID]
				if p != nil {
					r.sched.advance(p, a.ReceivedSeq, now)
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
					r.loader.request(p)
				}
			}
			dirty = nil
		case <-refresh.C:
			r.mu.Lock()
			for _, p := range r.projects {
				r.loader.request(p)
			}
			r.mu.Unlock()
		case l := <-r.loader.loaded:
			r.applyLoad(l)
		case res := <-results:
			r.applyResult(ctx, res, &reports)
		case <-wake.C:
		}
		r.mu.Lock()
		next := r.sched.dispatch(time.Now(), r.admit.room, start)
		for r.admit.refill(r.sched.release) {
			next = r.sched.dispatch(time.Now(), r.admit.room, start)
		}
		r.mu.Unlock()
		if !next.IsZero() {
			wake.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// start starts a worker for t, which is due and has records after its
// cursor, unless its lease is not known safe (parked), a worker of an
// earlier fence still runs for it, or its host has as many workers as it
// may (admit.go). Called by dispatch under r.mu.
func (r *Runner) start(ctx context.Context, t *target, results chan<- result, workers *sync.WaitGroup) tstate {
	p := t.p
	if _, safe := r.keeper.Deadline(p.lease, 0); !safe {
		return stParked // the keeper's next report queues it again
	}
	key := targetKey{p.id, t.t.ID}
	if r.inflight[key] {
		return stWaitOld
	}
	host, class, ok := r.admit.admit(t, key)
	if !ok {
		return stHostWait
	}
	r.inflight[key] = true
	w := &worker{r: r, t: t, host: host, class: class, projectID: p.id, lease: p.lease, ctx: p.ctx, runCtx: ctx, target: t.t, cursor: t.cursor,
		failures: t.failures, upTo: t.retryUpTo, head: p.head, results: results}
	workers.Go(w.run)
	return stRunning
}

// applyLeases starts the projects whose lease was won, stops those whose
// lease was lost (or taken again under a new fence), and queues again
// the targets parked while a lease was not known safe.
func (r *Runner) applyLeases(ctx context.Context, leases lease.Set) {
	held := make(map[string]store.Lease, len(leases))
	for _, l := range leases {
		held[l.ProjectID] = l.Lease
	}
	now := time.Now()
	r.mu.Lock()
	var won []*project
	for id, p := range r.projects {
		if l, ok := held[id]; !ok || l.Fence != p.lease.Fence {
			r.log.Info("lease lost", "project_id", id)
			r.sched.dropProject(p)
			delete(r.projects, id)
		} else {
			r.sched.unpark(p, now)
		}
	}
	for id, l := range held {
		if _, ok := r.projects[id]; !ok {
			p := newProject(ctx, l)
			r.projects[id] = p
			won = append(won, p)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(won, func(a, b *project) int { return strings.Compare(a.id, b.id) })
	for _, p := range won {
		r.log.Debug("lease won", "project_id", p.id)
		r.loader.request(p)
	}
}

// applyLoad applies a project's load: its head, new targets (queued with
// their durable cursor and backoff), targets gone (forgotten). Targets
// already known keep their state; their Target is updated.
func (r *Runner) applyLoad(l loadResult) {
	if l.err != nil {
		return // logged by the loader; the next refresh tries again
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := l.p
	if r.projects[p.id] != p {
		return // its lease was lost meanwhile
	}
	p.gen++
	for _, tt := range l.targets {
		cur := p.targets[tt.ID]
		if cur == nil {
			s := l.states[tt.ID]
			cur = &target{p: p, cursor: s.ReceivedSeq, failures: s.Failures, failingSince: s.FailingSince, lastErr: s.LastError, idx: -1}
			if s.RetryIn > 0 {
				cur.notBefore = now.Add(s.RetryIn)
			}
			p.targets[tt.ID] = cur
			cur.t = tt
			r.sched.enqueue(cur, now, now)
		} else if cur.t != tt { // its host changed
			id := cur.t.ID
			cur.t = tt
			cur.t.ID = id // the map key's copy: one copy of the id per target
		}
		cur.gen = p.gen
	}
	for _, t := range p.targets {
		if t.gen != p.gen {
			r.sched.remove(t)
		}
	}
	p.loaded = true
	r.sched.advance(p, l.head, now)
}

// applyResult applies a worker's result to its target: queued again now
// after a delivery (it goes idle if caught up), at the end of its backoff
// after a failure; forgotten when gone; its project dropped when the
// lease was lost.
func (r *Runner) applyResult(ctx context.Context, res result, reports *sync.WaitGroup) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, targetKey{res.projectID, res.target})
	r.admit.release(res.host, res.class, targetKey{res.projectID, res.target}, res.delivered, res.slow)
	p := r.projects[res.projectID]
	var cur *target
	if p != nil {
		cur = p.targets[res.target]
	}
	if cur != res.t {
		// It ran under a lease (or a load) that is gone; the target as
		// known now may have waited for it to end.
		if cur != nil && cur.state == stWaitOld {
			cur.state = stNew
			r.sched.enqueue(cur, now, now)
		}
		return
	}
	t := res.t
	t.state = stNew
	t.cursor = max(t.cursor, res.cursor)
	switch {
	case res.err == nil:
		t.failures, t.failingSince, t.notBefore, t.lastErr, t.reported, t.retryUpTo = 0, time.Time{}, time.Time{}, "", false, 0
		r.sched.enqueue(t, now, now)
	case errors.Is(res.err, ErrTargetGone):
		r.sched.remove(t)
	case errors.Is(res.err, store.ErrLeaseLost):
		r.log.Info("lease lost during delivery", "project_id", res.projectID)
		r.sched.dropProject(p)
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
			t.notBefore = now.Add(res.state.RetryIn)
		} else { // the failure could not be recorded: back off locally
			t.failures++
			t.notBefore = now.Add(r.opt.Backoff.Wait(t.failures))
		}
		r.sched.enqueue(t, t.notBefore, now)
		if fr, ok := r.courier.(FailingReporter); ok && r.opt.Backoff.GiveUp > 0 && !t.reported &&
			!t.failingSince.IsZero() && time.Since(t.failingSince) >= r.opt.Backoff.GiveUp {
			t.reported = true
			tt, since := t.t, t.failingSince
			reports.Go(func() { fr.TargetFailing(ctx, res.projectID, tt, since) })
		}
	}
}
