package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/acrelay/acrelay/store"
)

// Housekeeping of state that only grows (issue 26 item 4): expired web
// view sessions, and final Matrix submissions past their retention (kept
// that long so a homeserver replaying one gets no second reply).
const (
	housekeepEvery           = time.Hour
	housekeepBatch           = 1000
	matrixSubmissionRetained = 7 * 24 * time.Hour
)

// housekeepStore is what housekeeping deletes from.
type housekeepStore interface {
	DeleteExpiredUISessions(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteFinishedMatrixSubmissions(ctx context.Context, before time.Time, limit int) (int, error)
}

// housekeep runs housekeepOnce at start and every housekeepEvery until
// ctx ends. Every process runs it: each delete is one batch statement and
// idempotent, so two processes deleting at once only share the work.
func housekeep(ctx context.Context, st housekeepStore, logger *slog.Logger) {
	t := time.NewTicker(housekeepEvery)
	defer t.Stop()
	for {
		sessions, subs, err := housekeepOnce(ctx, st, time.Now(), housekeepBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("housekeeping", "err", err)
		case sessions+subs > 0:
			logger.Info("housekeeping", "ui_sessions_deleted", sessions, "matrix_submissions_deleted", subs)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// housekeepOnce deletes, in batches of batch rows, the web view sessions
// expired before now and the Matrix submissions final for longer than
// matrixSubmissionRetained, and returns how many of each it deleted.
func housekeepOnce(ctx context.Context, st housekeepStore, now time.Time, batch int) (sessions, subs int, err error) {
	jobs := []struct {
		n   *int
		del func() (int, error)
	}{
		{&sessions, func() (int, error) { return st.DeleteExpiredUISessions(ctx, now, batch) }},
		{&subs, func() (int, error) {
			return st.DeleteFinishedMatrixSubmissions(ctx, now.Add(-matrixSubmissionRetained), batch)
		}},
	}
	for _, j := range jobs {
		for {
			n, err := j.del()
			*j.n += n
			if err != nil {
				return sessions, subs, err
			}
			if n < batch {
				break
			}
		}
	}
	return sessions, subs, nil
}

var _ housekeepStore = store.Store(nil)
