package lease

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acrelay/acrelay/store"
)

// Store is what a Keeper needs from the store (store.Couriers' leases).
type Store interface {
	LeaseStates(ctx context.Context, courier string, projectIDs []string) ([]store.LeaseState, error)
	AcquireLeases(ctx context.Context, courier, holder string, projectIDs []string, ttl time.Duration) ([]store.Lease, error)
	RenewLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error)
	ReclaimLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error)
	ReleaseLeases(ctx context.Context, courier, holder string, projectIDs []string) error
}

// DefaultTTL is the lease length when Options.TTL is zero.
const DefaultTTL = 15 * time.Second

// Options configure a Keeper. Name, Holder and Wanted are required.
type Options struct {
	// Name is the lease name in the store (a courier's name).
	Name string
	// Holder is this process's identity (OpenIdentity).
	Holder *Identity
	// TTL is the lease length; renewed every third of it. Default
	// DefaultTTL.
	TTL time.Duration
	// Wanted lists the projects whose leases are wanted; called at start
	// and every ListEvery (default 30s).
	Wanted    func(ctx context.Context) ([]string, error)
	ListEvery time.Duration
	// Check, when set, is asked before a project named by Want that the
	// last listing did not include is taken (has it work at all?).
	Check  func(ctx context.Context, projectID string) bool
	Logger *slog.Logger
}

// Held is a held lease and its local safe time (package doc).
type Held struct {
	store.Lease
	SafeUntil time.Time
}

// Set is what a Keeper holds, sorted by project id.
type Set []Held

// Find returns the held lease of projectID.
func (s Set) Find(projectID string) (Held, bool) {
	i, ok := slices.BinarySearchFunc(s, projectID, func(h Held, id string) int { return strings.Compare(h.ProjectID, id) })
	if !ok {
		return Held{}, false
	}
	return s[i], true
}

// Keeper takes and renews the leases of one name for one holder (package
// doc). Run it once; Updates, Want, Deadline and Held may be called from
// any goroutine.
type Keeper struct {
	st      Store
	opt     Options
	log     *slog.Logger
	margin  time.Duration
	timeout time.Duration // each store call's

	want    chan wantReq
	updates chan Set
	held    atomic.Pointer[Set]

	watchMu sync.Mutex
	watches map[*watch]bool // Context's: checked at every publish
	changed chan struct{}   // closed (and replaced) at every publish
}

// watch is one Context: cancelled when its lease is no longer held under
// its fence, or when the lease's safe time passes without a renewal.
type watch struct {
	lease  store.Lease
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// ErrLeaseUnsafe is the cause of a Context that ended because its lease
// was lost or not renewed by its safe time.
var ErrLeaseUnsafe = errors.New("lease lost or not renewed by its safe time")

type wantReq struct {
	id    string
	force bool // read again even if last seen held elsewhere
}

// New returns a Keeper; it starts nothing until Run.
func New(st Store, opt Options) *Keeper {
	if opt.TTL <= 0 {
		opt.TTL = DefaultTTL
	}
	if opt.ListEvery <= 0 {
		opt.ListEvery = 30 * time.Second
	}
	if opt.Holder == nil {
		opt.Holder = NewIdentity()
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	k := &Keeper{st: st, opt: opt, log: opt.Logger.With("lease", opt.Name),
		margin: opt.TTL / 4, timeout: opt.TTL / 5,
		want: make(chan wantReq, 256), updates: make(chan Set, 1)}
	k.held.Store(&Set{})
	k.watches = map[*watch]bool{}
	k.changed = make(chan struct{})
	return k
}

// Holder is the holder id this Keeper writes in the lease rows.
func (k *Keeper) Holder() string { return k.opt.Holder.ID }

// CallTimeout is the timeout of each of the keeper's store calls: a
// fifth of the lease, shorter than the safety margin (a quarter).
func (k *Keeper) CallTimeout() time.Duration { return k.timeout }

// Updates carries the held set after every change; only the newest is
// kept, so a slow reader misses nothing but intermediate states.
func (k *Keeper) Updates() <-chan Set { return k.updates }

// Held returns the set as last published.
func (k *Keeper) Held() Set { return *k.held.Load() }

// Want asks for projectID's lease soon (an advance or a new target named
// it). force reads its lease row again even if it was last seen held
// elsewhere (a new target: the holder may have released it). It never
// blocks; a dropped request is caught by the next listing.
func (k *Keeper) Want(projectID string, force bool) {
	select {
	case k.want <- wantReq{id: projectID, force: force}:
	default:
	}
}

// Deadline is the deadline of work of up to timeout started now under
// lease: min(now + timeout, the lease's safe time). ok is false when
// lease is not held under that fence, or its safe time has passed: start
// nothing.
func (k *Keeper) Deadline(lease store.Lease, timeout time.Duration) (deadline time.Time, ok bool) {
	h, found := k.Held().Find(lease.ProjectID)
	now := time.Now()
	if !found || h.Fence != lease.Fence || !now.Before(h.SafeUntil) {
		return time.Time{}, false
	}
	d := now.Add(timeout)
	if h.SafeUntil.Before(d) {
		d = h.SafeUntil
	}
	return d, true
}

// WithDeadline returns ctx bounded by Deadline(lease, timeout); when the
// lease is not safe, the returned context is already done.
func (k *Keeper) WithDeadline(ctx context.Context, lease store.Lease, timeout time.Duration) (context.Context, context.CancelFunc) {
	d, ok := k.Deadline(lease, timeout)
	if !ok {
		d = time.Now()
	}
	return context.WithDeadline(ctx, d)
}

// Changed returns a channel closed at the keeper's next report (after
// every renewal interval, and whenever what it holds changes).
func (k *Keeper) Changed() <-chan struct{} {
	k.watchMu.Lock()
	defer k.watchMu.Unlock()
	return k.changed
}

// Context returns a context for long-running work under lease (a
// federation link): it ends, with cause ErrLeaseUnsafe, as soon as lease
// is no longer held under its fence, or when its safe time passes
// without a renewal; each renewal moves that time on. It ends at once
// when lease is not held and safe now. Call cancel when the work ends.
func (k *Keeper) Context(parent context.Context, lease store.Lease) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watch{lease: lease, cancel: cancel}
	k.watchMu.Lock()
	k.watches[w] = true
	k.check(w, k.Held())
	k.watchMu.Unlock()
	return ctx, func() {
		k.watchMu.Lock()
		delete(k.watches, w)
		if w.timer != nil {
			w.timer.Stop()
		}
		k.watchMu.Unlock()
		cancel(context.Canceled)
	}
}

// check ends w unless its lease is held and safe in s, else arms its
// timer for the lease's safe time. Called with watchMu held.
func (k *Keeper) check(w *watch, s Set) {
	h, ok := s.Find(w.lease.ProjectID)
	wait := time.Until(h.SafeUntil)
	if !ok || h.Fence != w.lease.Fence || wait <= 0 {
		w.cancel(ErrLeaseUnsafe)
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(wait, func() { w.cancel(ErrLeaseUnsafe) })
	} else {
		w.timer.Reset(wait)
	}
}

// call bounds one store call by the keeper's call timeout.
func (k *Keeper) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, k.timeout)
}

// Run keeps the leases until ctx ends, then releases them and returns
// nil. It reclaims the holder's live leases first when the identity is
// its predecessor's.
func (k *Keeper) Run(ctx context.Context) error {
	name, holder, ttl := k.opt.Name, k.opt.Holder.ID, k.opt.TTL
	held := map[string]Held{}
	busy := map[string]time.Time{} // project → local time until which another holder keeps it
	// lapse: project → local time its lease held elsewhere lapses, for a
	// lease whose holder did not renew it when due (take): read again
	// and taken at that instant, not at the next interval.
	lapse := map[string]time.Time{}
	idle := map[string]time.Time{} // project → when Check last said it has no work
	var wanted map[string]bool
	var listedAt time.Time
	defer func() {
		ids := make([]string, 0, len(held))
		for id := range held {
			ids = append(ids, id)
		}
		clear(held)
		k.publish(held) // nothing is held any more: work under the leases ends
		if len(ids) == 0 {
			return
		}
		rctx, cancel := k.call(context.WithoutCancel(ctx))
		defer cancel()
		if err := k.st.ReleaseLeases(rctx, name, holder, ids); err != nil {
			k.log.Warn("release leases", "err", err)
		}
	}()
	add := func(ls []store.Lease, start time.Time) {
		safe := start.Add(ttl - k.margin)
		for _, l := range ls {
			held[l.ProjectID] = Held{Lease: l, SafeUntil: safe}
			delete(busy, l.ProjectID)
			delete(lapse, l.ProjectID)
		}
	}
	if k.opt.Holder.Reclaim {
		start := time.Now()
		cctx, cancel := k.call(ctx)
		ls, err := k.st.ReclaimLeases(cctx, name, holder, ttl)
		cancel()
		if err != nil {
			k.log.Warn("reclaim leases", "err", err)
		} else {
			add(ls, start)
			if len(ls) > 0 {
				k.log.Info("leases reclaimed", "leases", len(ls))
			}
		}
	}
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for first := true; ; first = false {
		var ask []wantReq
		isTick := first
		var lapsed <-chan time.Time
		var lapseTimer *time.Timer
		if next, ok := earliest(lapse); ok {
			lapseTimer = time.NewTimer(max(time.Until(next), minLapseWait))
			lapsed = lapseTimer.C
		}
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-lapsed:
				now := time.Now()
				for id, at := range lapse {
					if !now.Before(at) {
						ask = append(ask, wantReq{id: id})
						delete(lapse, id)
					}
				}
			case w := <-k.want:
				ask = append(ask, w)
			drain:
				for {
					select {
					case w := <-k.want:
						ask = append(ask, w)
					default:
						break drain
					}
				}
			case <-tick.C:
				isTick = true
			}
		}
		if lapseTimer != nil {
			lapseTimer.Stop()
		}
		now := time.Now()
		if isTick {
			if len(held) > 0 && !(first && k.opt.Holder.Reclaim) {
				k.renew(ctx, held, now)
			}
			if listedAt.IsZero() || now.Sub(listedAt) >= k.opt.ListEvery {
				cctx, cancel := context.WithTimeout(ctx, max(k.timeout, 5*time.Second))
				ps, err := k.opt.Wanted(cctx)
				cancel()
				if err != nil {
					if ctx.Err() == nil {
						k.log.Warn("list wanted", "err", err)
					}
				} else {
					wanted, listedAt = make(map[string]bool, len(ps)), now
					for _, id := range ps {
						wanted[id] = true
					}
				}
			}
			for id := range wanted {
				ask = append(ask, wantReq{id: id})
			}
		}
		var probe []string
		seen := map[string]bool{}
		for _, w := range ask {
			if _, ok := held[w.id]; ok || seen[w.id] {
				continue
			}
			if until, ok := busy[w.id]; ok && !w.force && now.Before(until) {
				continue // held elsewhere: not even read until it may have lapsed
			}
			if !wanted[w.id] && k.opt.Check != nil {
				// Asked for by an advance: at most one Check per project
				// per renewal interval (a busy project with no targets
				// must not cost a read per append).
				if at, ok := idle[w.id]; ok && !w.force && now.Sub(at) < ttl/3 {
					continue
				}
				if !k.opt.Check(ctx, w.id) {
					idle[w.id] = now
					continue
				}
				delete(idle, w.id)
			}
			seen[w.id] = true
			probe = append(probe, w.id)
		}
		slices.Sort(probe)
		// Reported after every renewal interval (safe times moved on) and
		// whenever a lease was taken; not after a request that changed
		// nothing (an advance of a project held elsewhere).
		report := isTick
		for len(probe) > 0 && ctx.Err() == nil {
			chunk := probe[:min(len(probe), takeChunk)]
			probe = probe[len(chunk):]
			if k.take(ctx, chunk, held, busy, lapse, add) {
				report = true
			}
		}
		for id, at := range idle {
			if now.Sub(at) >= ttl {
				delete(idle, id)
			}
		}
		for id, until := range busy {
			if now.After(until.Add(ttl)) && !wanted[id] {
				delete(busy, id) // forget projects nobody asks for any more
				delete(lapse, id)
			}
		}
		if report {
			k.publish(held)
		}
	}
}

// renew extends every held lease in one store call; leases that the call
// does not return, or whose safe time passes without a renewal, are
// dropped.
func (k *Keeper) renew(ctx context.Context, held map[string]Held, start time.Time) {
	cctx, cancel := k.call(ctx)
	ls, err := k.st.RenewLeases(cctx, k.opt.Name, k.opt.Holder.ID, k.opt.TTL)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("renew leases", "err", err)
		}
		now := time.Now()
		for id, h := range held {
			if !now.Before(h.SafeUntil) {
				delete(held, id)
			}
		}
		return
	}
	safe := start.Add(k.opt.TTL - k.margin)
	kept := make(map[string]bool, len(ls))
	for _, l := range ls {
		if h, ok := held[l.ProjectID]; ok && h.Fence == l.Fence {
			held[l.ProjectID] = Held{Lease: l, SafeUntil: safe}
			kept[l.ProjectID] = true
		}
	}
	for id := range held {
		if !kept[id] {
			k.log.Info("lease lost", "project_id", id)
			delete(held, id)
		}
	}
}

// take reads the lease rows of ids and takes those that are free or
// expired (or this holder's own); the others are remembered as busy until
// they may lapse, and those whose holder did not renew them when due (less
// than two thirds of the lease left: a holder renews every third) in lapse
// with the instant they lapse. It reports whether it took any.
func (k *Keeper) take(ctx context.Context, ids []string, held map[string]Held, busy, lapse map[string]time.Time, add func([]store.Lease, time.Time)) bool {
	cctx, cancel := k.call(ctx)
	states, err := k.st.LeaseStates(cctx, k.opt.Name, ids)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("read leases", "err", err)
		}
		return false
	}
	read := time.Now()
	free := make(map[string]bool, len(ids))
	for _, id := range ids {
		free[id] = true
	}
	for _, s := range states {
		if s.ExpiresIn > 0 && s.Holder != k.opt.Holder.ID {
			// Read again when it may lapse, and at least every renewal
			// interval: a holder that stops cleanly releases early.
			free[s.ProjectID] = false
			busy[s.ProjectID] = read.Add(min(s.ExpiresIn, k.opt.TTL/3))
			if s.ExpiresIn < 2*k.opt.TTL/3 {
				lapse[s.ProjectID] = read.Add(s.ExpiresIn)
			} else {
				delete(lapse, s.ProjectID)
			}
		}
	}
	var takeable []string
	for _, id := range ids {
		if free[id] {
			takeable = append(takeable, id)
		}
	}
	if len(takeable) == 0 {
		return false
	}
	start := time.Now()
	cctx, cancel = k.call(ctx)
	ls, err := k.st.AcquireLeases(cctx, k.opt.Name, k.opt.Holder.ID, takeable, k.opt.TTL)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("acquire leases", "err", err)
		}
		return false
	}
	add(ls, start)
	got := make(map[string]bool, len(ls))
	for _, l := range ls {
		got[l.ProjectID] = true
	}
	for _, id := range takeable {
		if !got[id] { // another holder was quicker: read again later
			busy[id] = start.Add(k.opt.TTL / 3)
		}
	}
	if len(ls) > 0 {
		k.log.Debug("leases taken", "leases", len(ls))
	}
	return len(ls) > 0
}

// minLapseWait is the least wait before a lapsing lease is read again (the
// database's clock may still show it live for a moment).
const minLapseWait = 20 * time.Millisecond

// earliest returns the earliest instant of m.
func earliest(m map[string]time.Time) (time.Time, bool) {
	var next time.Time
	for _, at := range m {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// takeChunk bounds the projects one read-and-take handles, so that each
// store call stays well within the call timeout.
const takeChunk = 100

// publish stores the held set and reports it on Updates, replacing an
// unread report.
func (k *Keeper) publish(held map[string]Held) {
	s := make(Set, 0, len(held))
	for _, h := range held {
		s = append(s, h)
	}
	slices.SortFunc(s, func(a, b Held) int { return strings.Compare(a.ProjectID, b.ProjectID) })
	k.held.Store(&s)
	k.watchMu.Lock()
	for w := range k.watches {
		k.check(w, s)
	}
	close(k.changed)
	k.changed = make(chan struct{})
	k.watchMu.Unlock()
	select {
	case <-k.updates:
	default:
	}
	k.updates <- s
}
