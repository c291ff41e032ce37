package lease

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
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
	// Now is the local clock the safe times are read on (package doc);
	// time.Now when nil. Tests inject a clock that runs fast, slow or
	// offset. The renewal interval and the call timeouts are measured on
	// the runtime's timers whatever the clock.
	Now func() time.Time
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
// doc). Run it once; Held, Want, Deadline and Context may be called from
// any goroutine.
type Keeper struct {
	st      Store
	opt     Options
	log     *slog.Logger
	now     func() time.Time
	margin  time.Duration // the safety margin: a quarter of the lease
	timeout time.Duration // each store call's: a fifth of the lease

	want chan wantReq

	mu      sync.Mutex
	held    Set             // as last published
	changed chan struct{}   // closed (and replaced) at every publish
	watches map[*watch]bool // Context's: checked at every publish
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
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Keeper{st: st, opt: opt, log: opt.Logger.With("lease", opt.Name), now: opt.Now,
		margin: opt.TTL / 4, timeout: opt.TTL / 5,
		want:    make(chan wantReq, 256),
		held:    Set{},
		changed: make(chan struct{}),
		watches: map[*watch]bool{}}
}

// Held returns the held set as last published, and a channel closed at
// the next publication: after every renewal interval (the safe times
// moved on) and whenever what is held changes. It is the one way to
// follow the set: read it, wait on the channel, read it again.
func (k *Keeper) Held() (Set, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held, k.changed
}

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
	s, _ := k.Held()
	h, found := s.Find(lease.ProjectID)
	now := k.now()
	if !found || h.Fence != lease.Fence || !now.Before(h.SafeUntil) {
		return time.Time{}, false
	}
	d := now.Add(timeout)
	if h.SafeUntil.Before(d) {
		d = h.SafeUntil
	}
	return d, true
}

// Context returns a context for long-running work under lease (a
// federation link): it ends, with cause ErrLeaseUnsafe, as soon as lease
// is no longer held under its fence, or when its safe time passes
// without a renewal; each renewal moves that time on. It ends at once
// when lease is not held and safe now. Call cancel when the work ends.
func (k *Keeper) Context(parent context.Context, lease store.Lease) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watch{lease: lease, cancel: cancel}
	k.mu.Lock()
	k.watches[w] = true
	k.check(w)
	k.mu.Unlock()
	return ctx, func() {
		k.mu.Lock()
		delete(k.watches, w)
		if w.timer != nil {
			w.timer.Stop()
		}
		k.mu.Unlock()
		cancel(context.Canceled)
	}
}

// check ends w unless its lease is held and safe in k.held, else arms its
// timer for the lease's safe time. Called with k.mu held.
func (k *Keeper) check(w *watch) {
	h, ok := k.held.Find(w.lease.ProjectID)
	wait := h.SafeUntil.Sub(k.now())
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

// publish stores held as the published set, ends or re-arms the
// Contexts, and closes the channel Held returned.
func (k *Keeper) publish(held map[string]Held) {
	s := make(Set, 0, len(held))
	for _, h := range held {
		s = append(s, h)
	}
	slices.SortFunc(s, func(a, b Held) int { return strings.Compare(a.ProjectID, b.ProjectID) })
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held = s
	for w := range k.watches {
		k.check(w)
	}
	close(k.changed)
	k.changed = make(chan struct{})
}

// call bounds one store call by the keeper's call timeout.
func (k *Keeper) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, k.timeout)
}

// Run keeps the leases until ctx ends, then releases them and returns
// nil. It reclaims the holder's live leases first when the identity is
// its predecessor's. Each event is one method of the keeping state: a
// renewal interval (tick), requests (want), a lease held elsewhere
// lapsing (lapse).
func (k *Keeper) Run(ctx context.Context) error {
	s := &keeping{k: k, held: map[string]Held{}, busy: map[string]time.Time{},
		lapses: map[string]time.Time{}, idle: map[string]time.Time{}}
	defer s.release(ctx)
	renew := !s.reclaim(ctx) // the reclaim just renewed what it returned
	s.tick(ctx, renew)
	ticker := time.NewTicker(k.opt.TTL / 3)
	defer ticker.Stop()
	for {
		lapsed, stop := s.nextLapse()
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-lapsed:
			s.lapse(ctx)
		case w := <-k.want:
			reqs := []wantReq{w}
			for len(k.want) > 0 {
				reqs = append(reqs, <-k.want)
			}
			s.want(ctx, reqs)
		case <-ticker.C:
			s.tick(ctx, true)
		}
		stop()
	}
}

// keeping is a running Keeper's state, owned by Run's goroutine. A
// project is in at most one of held and busy.
type keeping struct {
	k    *Keeper
	held map[string]Held
	// busy: project → local time until which another holder keeps it
	// (not read again before, unless a Want forces it).
	busy map[string]time.Time
	// lapses: project → local time its lease held elsewhere lapses, for
	// a lease whose holder did not renew it when due: read again and
	// taken at that instant, not at the next interval.
	lapses map[string]time.Time
	// idle: project → when Check last said it has no work.
	idle     map[string]time.Time
	wanted   map[string]bool // as last listed
	listedAt time.Time
}

// reclaim takes back the holder's live leases when the identity is its
// predecessor's, and reports whether it did so.
func (s *keeping) reclaim(ctx context.Context) bool {
	k := s.k
	if !k.opt.Holder.Reclaim {
		return false
	}
	start := k.now()
	cctx, cancel := k.call(ctx)
	ls, err := k.st.ReclaimLeases(cctx, k.opt.Name, k.opt.Holder.ID, k.opt.TTL)
	cancel()
	if err != nil {
		k.log.Warn("reclaim leases", "err", err)
		return true
	}
	s.add(ls, start)
	if len(ls) > 0 {
		k.log.Info("leases reclaimed", "leases", len(ls))
	}
	return true
}

// tick is a renewal interval: renew what is held (unless renew is
// false), list the wanted projects when the listing is due, read and
// take those not held, and publish (the safe times moved on).
func (s *keeping) tick(ctx context.Context, renew bool) {
	k := s.k
	now := k.now()
	if renew && len(s.held) > 0 {
		s.renew(ctx, now)
	}
	if s.listedAt.IsZero() || now.Sub(s.listedAt) >= k.opt.ListEvery {
		cctx, cancel := context.WithTimeout(ctx, max(k.timeout, 5*time.Second))
		ps, err := k.opt.Wanted(cctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				k.log.Warn("list wanted", "err", err)
			}
		} else {
			s.wanted, s.listedAt = make(map[string]bool, len(ps)), now
			for _, id := range ps {
				s.wanted[id] = true
			}
		}
	}
	reqs := make([]wantReq, 0, len(s.wanted))
	for id := range s.wanted {
		reqs = append(reqs, wantReq{id: id})
	}
	s.probe(ctx, reqs, now)
	s.forget(now)
	k.publish(s.held)
}

// want handles requests (Want): the leases it takes are published; a
// request that changes nothing (an advance of a project held elsewhere)
// publishes nothing.
func (s *keeping) want(ctx context.Context, reqs []wantReq) {
	now := s.k.now()
	took := s.probe(ctx, reqs, now)
	s.forget(now)
	if took {
		s.k.publish(s.held)
	}
}

// lapse reads again, and takes, the leases held elsewhere whose lapse
// time has come.
func (s *keeping) lapse(ctx context.Context) {
	now := s.k.now()
	var reqs []wantReq
	for id, at := range s.lapses {
		if !now.Before(at) {
			reqs = append(reqs, wantReq{id: id})
			delete(s.lapses, id)
		}
	}
	s.want(ctx, reqs)
}

// nextLapse returns a channel that fires at the earliest lapse (nil when
// none is expected), and the function that stops its timer.
func (s *keeping) nextLapse() (<-chan time.Time, func()) {
	var next time.Time
	for _, at := range s.lapses {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if next.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(max(next.Sub(s.k.now()), minLapseWait))
	return t.C, func() { t.Stop() }
}

// probe reads and takes, in chunks, the projects of reqs that are not
// held, not known busy (unless forced) and, when not listed, have work
// (Check, asked at most once per renewal interval per project). It
// reports whether it took any lease.
func (s *keeping) probe(ctx context.Context, reqs []wantReq, now time.Time) bool {
	k, ttl := s.k, s.k.opt.TTL
	var ids []string
	seen := map[string]bool{}
	for _, w := range reqs {
		if _, ok := s.held[w.id]; ok || seen[w.id] {
			continue
		}
		if until, ok := s.busy[w.id]; ok && !w.force && now.Before(until) {
			continue // held elsewhere: not even read until it may have lapsed
		}
		if !s.wanted[w.id] && k.opt.Check != nil {
			// Asked for by an advance: at most one Check per project
			// per renewal interval (a busy project with no targets
			// must not cost a read per append).
			if at, ok := s.idle[w.id]; ok && !w.force && now.Sub(at) < ttl/3 {
				continue
			}
			if !k.opt.Check(ctx, w.id) {
				s.idle[w.id] = now
				continue
			}
			delete(s.idle, w.id)
		}
		seen[w.id] = true
		ids = append(ids, w.id)
	}
	slices.Sort(ids)
	took := false
	for chunk := range slices.Chunk(ids, takeChunk) {
		if ctx.Err() != nil {
			break
		}
		if s.take(ctx, chunk) {
			took = true
		}
	}
	return took
}

// forget drops what is no longer worth remembering: Check answers older
// than a lease, and projects held elsewhere that nobody lists any more.
func (s *keeping) forget(now time.Time) {
	ttl := s.k.opt.TTL
	for id, at := range s.idle {
		if now.Sub(at) >= ttl {
			delete(s.idle, id)
		}
	}
	for id, until := range s.busy {
		if now.After(until.Add(ttl)) && !s.wanted[id] {
			delete(s.busy, id)
			delete(s.lapses, id)
		}
	}
}

// add records leases taken or renewed by a store call started at start
// (local clock): their safe time is start + TTL - margin.
func (s *keeping) add(ls []store.Lease, start time.Time) {
	safe := start.Add(s.k.opt.TTL - s.k.margin)
	for _, l := range ls {
		s.held[l.ProjectID] = Held{Lease: l, SafeUntil: safe}
		delete(s.busy, l.ProjectID)
		delete(s.lapses, l.ProjectID)
	}
}

// renew extends every held lease in one store call started at start;
// leases that the call does not return, or whose safe time passes
// without a renewal, are dropped.
func (s *keeping) renew(ctx context.Context, start time.Time) {
	k := s.k
	cctx, cancel := k.call(ctx)
	ls, err := k.st.RenewLeases(cctx, k.opt.Name, k.opt.Holder.ID, k.opt.TTL)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("renew leases", "err", err)
		}
		now := k.now()
		for id, h := range s.held {
			if !now.Before(h.SafeUntil) {
				delete(s.held, id)
			}
		}
		return
	}
	safe := start.Add(k.opt.TTL - k.margin)
	kept := make(map[string]bool, len(ls))
	for _, l := range ls {
		if h, ok := s.held[l.ProjectID]; ok && h.Fence == l.Fence {
			s.held[l.ProjectID] = Held{Lease: l, SafeUntil: safe}
			kept[l.ProjectID] = true
		}
	}
	for id := range s.held {
		if !kept[id] {
			k.log.Info("lease lost", "project_id", id)
			delete(s.held, id)
		}
	}
}

// take reads the lease rows of ids and takes those that are free or
// expired (or this holder's own); the others are remembered as busy until
// they may lapse, and those whose holder did not renew them when due (less
// than two thirds of the lease left: a holder renews every third) in lapses
// with the instant they lapse. It reports whether it took any.
func (s *keeping) take(ctx context.Context, ids []string) bool {
	k, ttl := s.k, s.k.opt.TTL
	cctx, cancel := k.call(ctx)
	states, err := k.st.LeaseStates(cctx, k.opt.Name, ids)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("read leases", "err", err)
		}
		return false
	}
	read := k.now()
	free := make(map[string]bool, len(ids))
	for _, id := range ids {
		free[id] = true
	}
	for _, st := range states {
		if st.ExpiresIn > 0 && st.Holder != k.opt.Holder.ID {
			// Read again when it may lapse, and at least every renewal
			// interval: a holder that stops cleanly releases early.
			free[st.ProjectID] = false
			s.busy[st.ProjectID] = read.Add(min(st.ExpiresIn, ttl/3))
			if st.ExpiresIn < 2*ttl/3 {
				s.lapses[st.ProjectID] = read.Add(st.ExpiresIn)
			} else {
				delete(s.lapses, st.ProjectID)
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
	start := k.now()
	cctx, cancel = k.call(ctx)
	ls, err := k.st.AcquireLeases(cctx, k.opt.Name, k.opt.Holder.ID, takeable, ttl)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("acquire leases", "err", err)
		}
		return false
	}
	s.add(ls, start)
	got := make(map[string]bool, len(ls))
	for _, l := range ls {
		got[l.ProjectID] = true
	}
	for _, id := range takeable {
		if !got[id] { // another holder was quicker: read again later
			s.busy[id] = start.Add(ttl / 3)
		}
	}
	if len(ls) > 0 {
		k.log.Debug("leases taken", "leases", len(ls))
	}
	return len(ls) > 0
}

// release ends the keeping: nothing is held any more (work under the
// leases ends, Contexts end), then the leases are released so that
// another holder takes them at once.
func (s *keeping) release(ctx context.Context) {
	k := s.k
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	clear(s.held)
	k.publish(s.held)
	if len(ids) == 0 {
		return
	}
	rctx, cancel := k.call(context.WithoutCancel(ctx))
	defer cancel()
	if err := k.st.ReleaseLeases(rctx, k.opt.Name, k.opt.Holder.ID, ids); err != nil {
		k.log.Warn("release leases", "err", err)
	}
}

// minLapseWait is the least wait before a lapsing lease is read again (the
// database's clock may still show it live for a moment).
const minLapseWait = 20 * time.Millisecond

// takeChunk bounds the projects one read-and-take handles, so that each
// store call stays well within the call timeout.
const takeChunk = 100
