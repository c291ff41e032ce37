package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Courier cursors and leases (store.Couriers). Lease expiry is decided by
// the database clock alone (nowMS), so relay processes with skewed clocks
// never both believe they hold a lease.
const (
	selectCourierCursor = `SELECT received_seq FROM courier_cursors
		WHERE courier = ? AND project_id = ? AND target = ?`

	// advanceCursor inserts the cursor or moves it forward; the WHERE of
	// the upsert keeps it from moving backwards.
	advanceCursor = `INSERT INTO courier_cursors (courier, project_id, target, received_seq, updated_at)
		VALUES (?, ?, ?, ?, ` + nowMS + `)
		ON CONFLICT (courier, project_id, target) DO UPDATE
		SET received_seq = excluded.received_seq, updated_at = excluded.updated_at
		WHERE excluded.received_seq > courier_cursors.received_seq`

	// acquireLease takes a free lease, renews the holder's own, or takes
	// over an expired one; it returns no row while another holder's lease
	// is live. The last placeholder is an SQLite time modifier such as
	// '+30.000 seconds'.
	acquireLease = `INSERT INTO courier_leases (courier, project_id, holder, expires_at)
		VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?))
		ON CONFLICT (courier, project_id) DO UPDATE
		SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE courier_leases.holder = excluded.holder OR courier_leases.expires_at <= ` + nowMS + `
		RETURNING holder`

	releaseLease = `DELETE FROM courier_leases WHERE courier = ? AND project_id = ? AND holder = ?`
)

// CourierCursor returns the delivered-up-to received_seq, 0 when unset.
// See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) CourierCursor(ctx context.Context, courier, projectID, target string) (int64, error) {
	var seq int64
	err := db.rd.QueryRowContext(ctx, selectCourierCursor, courier, projectID, target).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
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
	return db.writeTx(ctx, "advance cursor", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, projectID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, advanceCursor, courier, projectID, target, seq)
		return err
	})
}

// AcquireLease takes, renews or takes over the lease of (courier,
// project). See store.Couriers. Errors: store.ErrNotFound (unknown
// project), store.ErrUnavailable.
func (db *DB) AcquireLease(ctx context.Context, courier, projectID, holder string, ttl time.Duration) (bool, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return false, fmt.Errorf("acquire lease: ttl %v is under 1ms", ttl)
	}
	modifier := fmt.Sprintf("+%d.%03d seconds", ms/1000, ms%1000)
	held := false
	err := db.writeTx(ctx, "acquire lease", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, projectID); err != nil {
			return err
		}
		var got string
		err := tx.QueryRowContext(ctx, acquireLease, courier, projectID, holder, modifier).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		held = err == nil
		return err
	})
	return held, err
}

// ReleaseLease drops holder's lease, if it holds it. Errors:
// store.ErrUnavailable.
func (db *DB) ReleaseLease(ctx context.Context, courier, projectID, holder string) error {
	_, err := db.w.ExecContext(ctx, releaseLease, courier, projectID, holder)
	return mapErr("release lease", err)
}
