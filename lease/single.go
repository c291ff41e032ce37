package lease

import (
	"context"
	"sync"
)

// RelayWide is the project id of a relay-wide lease: a job with one
// holder for the whole relay (store.Couriers AcquireLeases).
const RelayWide = ""

// Single is a job with one holder for the whole relay (the Matrix bot's
// /sync, the Matrix inbox, the WebSub hub's revoked-token scan): a Keeper
// of the relay-wide lease of one name. Run keeps the lease; Do runs work
// only while it is held; Held tells whether it is held and safe now.
type Single struct {
	k *Keeper
}

// NewSingle returns the relay-wide job named opt.Name (opt.Wanted and
// opt.Check are ignored). It starts nothing until Run.
func NewSingle(st Store, opt Options) *Single {
	opt.Wanted = func(context.Context) ([]string, error) { return []string{RelayWide}, nil }
	opt.Check = nil
	return &Single{k: New(st, opt)}
}

// Run keeps the lease until ctx ends, then releases it. Start it once,
// and end it only after Do returned (work under the lease may still
// write).
func (s *Single) Run(ctx context.Context) error { return s.k.Run(ctx) }

// Held reports whether this process holds the lease and is within its
// safe time.
func (s *Single) Held() bool {
	set, _ := s.k.Held()
	h, ok := set.Find(RelayWide)
	return ok && s.k.now().Before(h.SafeUntil)
}

// Do runs work whenever this process holds the lease, under the lease's
// Context (it ends when the lease is lost or not renewed by its safe
// time), and again at the keeper's next report after work returns while
// the lease is still held. It returns nil when ctx ends.
func (s *Single) Do(ctx context.Context, work func(ctx context.Context) error) error {
	for ctx.Err() == nil {
		set, changed := s.k.Held()
		if h, ok := set.Find(RelayWide); ok && s.k.now().Before(h.SafeUntil) {
			wctx, cancel := s.k.Context(ctx, h.Lease)
			err := work(wctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				s.k.log.Warn("work under the lease", "err", err)
			}
			if ctx.Err() != nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
		case <-changed:
		}
	}
	return nil
}

// RunDo is Run and Do together: it keeps the lease and runs work under
// it until ctx ends, then waits for work to return before releasing the
// lease.
func (s *Single) RunDo(ctx context.Context, work func(ctx context.Context) error) {
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var keeper sync.WaitGroup
	keeper.Go(func() { _ = s.Run(kctx) })
	_ = s.Do(ctx, work)
	stop()
	keeper.Wait()
}
