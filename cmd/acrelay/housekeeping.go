package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/store"
)

// Housekeeping of state that only grows (issue 26 item 4): expired web
// view sessions, final Matrix submissions past their retention (kept that
// long so a homeserver replaying one gets no second reply), WebSub
// subscriptions whose lease ended (with their delivery cursors), and
// pending WebSub verifications that lapsed.
const (
	housekeepEvery           = time.Hour
	housekeepBatch           = 1000
	matrixSubmissionRetained = 7 * 24 * time.Hour
	// verificationLapse: the hub makes a verification's requests within a
	// minute of it being accepted (three attempts, backoff from 5 s) and
	// every process's hub takes pending ones up, so one still pending a
	// day later is left over (its writes failed, or no hub ran): deleted,
	// the subscriber subscribes again.
	verificationLapse = 24 * time.Hour
	// housekeepLease is the relay-wide lease (lease.Single) under which
	// one process at a time housekeeps.
	housekeepLease = "housekeeping"
)

// housekeepStore is what housekeeping deletes from, and its lease.
type housekeepStore interface {
	lease.Store
	DeleteExpiredUISessions(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteFinishedMatrixSubmissions(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteExpiredSubscriptions(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteLapsedVerifications(ctx context.Context, before time.Time, limit int) (int, error)
}

// housekeepCounts is how many rows one run deleted, by kind.
type housekeepCounts struct {
	UISessions, MatrixSubmissions, Subscriptions, Verifications int
}

func (c housekeepCounts) total() int {
	return c.UISessions + c.MatrixSubmissions + c.Subscriptions + c.Verifications
}

// housekeep keeps the relay-wide lease housekeepLease (TTL ttl, holder
// holder) until ctx ends and, while this process holds it, runs
// housekeepOnce when it takes the lease and every housekeepEvery after:
// with several processes on one database, one housekeeps at a time, and
// another takes over within a lease length when it stops. A run cut short
// by a lost lease leaves nothing half done: each batch is one statement
// (or one transaction) and the next holder's run goes on from there.
func housekeep(ctx context.Context, st housekeepStore, holder *lease.Identity, ttl time.Duration, logger *slog.Logger) {
	job := lease.NewSingle(st, lease.Options{Name: housekeepLease, Holder: holder, TTL: ttl, Logger: logger})
	job.RunDo(ctx, func(ctx context.Context) error {
		t := time.NewTicker(housekeepEvery)
		defer t.Stop()
		for {
			c, err := housekeepOnce(ctx, st, time.Now(), housekeepBatch)
			switch {
			case err != nil && ctx.Err() == nil:
				logger.Warn("housekeeping", "err", err)
			case c.total() > 0:
				logger.Info("housekeeping", "ui_sessions_deleted", c.UISessions, "matrix_submissions_deleted", c.MatrixSubmissions,
					"websub_subscriptions_deleted", c.Subscriptions, "websub_verifications_deleted", c.Verifications)
			}
			select {
			case <-ctx.Done(): // stopping, or the lease was lost
				return nil
			case <-t.C:
			}
		}
	})
}

// housekeepOnce deletes, in batches of batch rows, the web view sessions
// expired before now, the Matrix submissions final for longer than
// matrixSubmissionRetained, the WebSub subscriptions whose lease ended
// before now (and their cursors), and the pending verifications older than
// verificationLapse; it returns how many of each it deleted. Errors: the
// store's; the deletes before the error stay done.
func housekeepOnce(ctx context.Context, st housekeepStore, now time.Time, batch int) (housekeepCounts, error) {
	var c housekeepCounts
	jobs := []struct {
		n      *int
		before time.Time
		del    func(ctx context.Context, before time.Time, limit int) (int, error)
	}{
		{&c.UISessions, now, st.DeleteExpiredUISessions},
		{&c.MatrixSubmissions, now.Add(-matrixSubmissionRetained), st.DeleteFinishedMatrixSubmissions},
		{&c.Subscriptions, now, st.DeleteExpiredSubscriptions},
		{&c.Verifications, now.Add(-verificationLapse), st.DeleteLapsedVerifications},
	}
	for _, j := range jobs {
		for {
			n, err := j.del(ctx, j.before, batch)
			*j.n += n
			if err != nil {
				return c, err
			}
			if n < batch {
				break
			}
		}
	}
	return c, nil
}

var _ housekeepStore = store.Store(nil)
