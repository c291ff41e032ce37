package couriers

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acrelay/acrelay/store"
)

// Courier delivers records to its targets. Implementations must be safe
// for use by one Runner goroutine; Deliver may be called again with records
// it already delivered (at-least-once).
type Courier interface {
	// Name is the stable courier name used for cursors and leases.
	Name() string
	// Targets lists the delivery targets of a project (subscriptions,
	// rooms, files); "" is a valid single target.
	Targets(ctx context.Context, projectID string) ([]string, error)
	// Deliver hands records (ascending received_seq) to target. An error
	// leaves the cursor where it was; the batch is retried later.
	Deliver(ctx context.Context, projectID, target string, records []store.Record) error
}

// Store is what a Runner needs from the store.
type Store interface {
	store.Couriers
	store.Feed
}

// Options tune a Runner; zero values take the defaults.
type Options struct {
	Holder       string        // this process's lease holder id (required)
	LeaseTTL     time.Duration // lease length; default 15s
	PollInterval time.Duration // idle re-check; default 1s
	Batch        int           // records per delivery; default 100
	RetryBackoff time.Duration // wait after a failed delivery; default 2s
	Logger       *slog.Logger
}

// Runner runs one courier over every project.
type Runner struct {
	st      Store
	courier Courier
	opt     Options
	log     *slog.Logger
	poke    chan struct{}
	backoff map[string]time.Time // project/target → not before
}

// NewRunner returns a Runner; it starts nothing until Run.
func NewRunner(st Store, c Courier, opt Options) *Runner {
	if opt.LeaseTTL <= 0 {
		opt.LeaseTTL = 15 * time.Second
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = time.Second
	}
	if opt.Batch <= 0 {
		opt.Batch = 100
	}
	if opt.RetryBackoff <= 0 {
		opt.RetryBackoff = 2 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{st: st, courier: c, opt: opt, poke: make(chan struct{}, 1), backoff: map[string]time.Time{},
		log: opt.Logger.With("courier", c.Name())}
}

// Poke wakes the runner early (a project advanced). It never blocks.
func (r *Runner) Poke() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then releases the leases it holds.
func (r *Runner) Run(ctx context.Context) error {
	held := map[string]bool{}
	defer func() {
		rel, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for p := range held {
			_ = r.st.ReleaseLease(rel, r.courier.Name(), p, r.opt.Holder)
		}
	}()
	// A pass renews every held lease, so passes come at least three times
	// per lease; pokes (a project advanced) start one early.
	wait := min(r.opt.PollInterval, r.opt.LeaseTTL/3)
	for {
		if err := r.pass(ctx, held); err != nil && ctx.Err() == nil {
			r.log.Warn("courier pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.poke:
		case <-time.After(wait):
		}
	}
}

// pass walks every project once: take or renew its lease, deliver what is
// after each target's cursor.
func (r *Runner) pass(ctx context.Context, held map[string]bool) error {
	after := ""
	for {
		ids, err := r.st.ProjectIDs(ctx, after, 100)
		if err != nil {
			return err
		}
		for _, p := range ids {
			ok, err := r.st.AcquireLease(ctx, r.courier.Name(), p, r.opt.Holder, r.opt.LeaseTTL)
			if err != nil {
				return err
			}
			if !ok {
				if held[p] {
					r.log.Info("lease lost", "project_id", p)
					delete(held, p)
				}
				continue
			}
			if !held[p] {
				r.log.Info("lease won", "project_id", p)
				held[p] = true
			}
			if err := r.deliverProject(ctx, p); err != nil && ctx.Err() == nil {
				r.log.Warn("delivery failed", "project_id", p, "err", err)
			}
		}
		if len(ids) < 100 {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

func (r *Runner) deliverProject(ctx context.Context, projectID string) error {
	targets, err := r.courier.Targets(ctx, projectID)
	if err != nil {
		return err
	}
	var errs []error
	for _, target := range targets {
		key := projectID + "\x00" + target
		if time.Now().Before(r.backoff[key]) {
			continue
		}
		if err := r.drain(ctx, projectID, target); err != nil {
			r.backoff[key] = time.Now().Add(r.opt.RetryBackoff)
			errs = append(errs, err)
		} else {
			delete(r.backoff, key)
		}
	}
	return errors.Join(errs...)
}

// drain delivers batches until the target is caught up. A bounded number
// of batches per pass keeps one busy project from starving the others.
func (r *Runner) drain(ctx context.Context, projectID, target string) error {
	name := r.courier.Name()
	cur, err := r.st.CourierCursor(ctx, name, projectID, target)
	if err != nil {
		return err
	}
	for i := 0; i < 16; i++ {
		recs, err := r.st.RecordsAfter(ctx, projectID, cur, r.opt.Batch)
		if err != nil || len(recs) == 0 {
			return err
		}
		if err := r.courier.Deliver(ctx, projectID, target, recs); err != nil {
			return err
		}
		// What was delivered is recorded even when shutdown began during
		// the delivery, so a clean restart does not deliver it again.
		cur = recs[len(recs)-1].ReceivedSeq
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err = r.st.AdvanceCursor(actx, name, projectID, target, cur)
		cancel()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(recs) < r.opt.Batch {
			return nil
		}
	}
	return nil
}
