package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Courier cursors and leases (store.Couriers). Lease expiry is decided by
// the database clock alone, so relay processes with skewed clocks never
// both believe they hold a lease. Each method is one statement; concurrent
// upserts of one row are ordered by its row lock, and the loser re-checks
// the WHERE of ON CONFLICT DO UPDATE against the winner's row.

// CourierCursor returns the delivered-up-to received_seq, 0 when unset.
// See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) CourierCursor(ctx context.Context, courier, projectID, target string) (int64, error) {
	var seq int64
	err := db.pool.QueryRow(ctx, selectCourierCursor, courier, projectID, target).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, mapErr("courier cursor", err)
}

// AdvanceCursor moves the cursor forward only. Errors: store.ErrNotFound
// (unknown project), store.ErrUnavailable.
func (db *DB) AdvanceCursor(ctx context.Context, courier, projectID, target string, seq int64) error {
	if seq < 0 {
		return fmt.Errorf("advance cursor: negative received_seq %d", seq)
	}
	_, err := db.pool.Exec(ctx, advanceCursor, courier, projectID, target, seq)
	return mapErr("advance cursor", err)
}

// AcquireLease takes, renews or takes over the lease of (courier,
// project). See store.Couriers. Errors: store.ErrNotFound (unknown
// project), store.ErrUnavailable.
func (db *DB) AcquireLease(ctx context.Context, courier, projectID, holder string, ttl time.Duration) (bool, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return false, fmt.Errorf("acquire lease: ttl %v is under 1ms", ttl)
	}
	var got string
	err := db.pool.QueryRow(ctx, acquireLease, courier, projectID, holder, ms).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, mapErr("acquire lease", err)
	}
	return true, nil
}

// ReleaseLease drops holder's lease, if it holds it. Errors:
// store.ErrUnavailable.
func (db *DB) ReleaseLease(ctx context.Context, courier, projectID, holder string) error {
	_, err := db.pool.Exec(ctx, releaseLease, courier, projectID, holder)
	return mapErr("release lease", err)
}
