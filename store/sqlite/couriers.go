package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Courier leases, cursors and backoff state (store.Couriers). Lease expiry
// is decided by the database clock alone (nowMS), so relay processes with
// skewed clocks never both believe they hold a lease.
const (
	// acquireLeases takes, for holder, each lease of the JSON array of
	// project ids that is free, expired or its own; the fence grows unless
	// the row was holder's live lease (a renewal). The modifier is an
	// SQLite time modifier such as '+30.000 seconds'.
	acquireLeases = `INSERT INTO courier_leases (courier, project_id, holder, expires_at, fence)
		SELECT ?1, j.value, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3), 1
		FROM json_each(?4) AS j WHERE (j.value = '' OR EXISTS (SELECT 1 FROM projects WHERE id = j.value))
		  AND NOT EXISTS (SELECT 1 FROM courier_leases o WHERE o.courier = ?1 AND o.project_id = j.value
		                  AND o.holder <> ?2 AND o.expires_at > ` + nowMS + `)
		ON CONFLICT (courier, project_id) DO UPDATE
		SET holder = excluded.holder, expires_at = excluded.expires_at,
		    fence = CASE WHEN courier_leases.holder = excluded.holder AND courier_leases.expires_at > ` + nowMS + `
		                 THEN courier_leases.fence ELSE courier_leases.fence + 1 END
		WHERE courier_leases.holder = excluded.holder OR courier_leases.expires_at <= ` + nowMS

	selectHeldLeases = `SELECT project_id, fence FROM courier_leases
		WHERE courier = ?1 AND holder = ?2 AND expires_at > ` + nowMS + ` ORDER BY project_id`

	// reclaimLeases takes holder's live leases under a new fence.
	reclaimLeases = `UPDATE courier_leases SET expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3), fence = fence + 1
		WHERE courier = ?1 AND holder = ?2 AND expires_at > ` + nowMS

	selectLeaseStates = `SELECT project_id, holder, fence,
		    CASE WHEN expires_at > ` + nowMS + `
		         THEN CAST(round((julianday(expires_at) - julianday(` + nowMS + `)) * 86400000) AS INTEGER) ELSE 0 END
		FROM courier_leases WHERE courier = ?1 AND project_id IN (SELECT value FROM json_each(?2)) ORDER BY project_id`

	renewLeases = `UPDATE courier_leases SET expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3)
		WHERE courier = ?1 AND holder = ?2 AND expires_at > ` + nowMS

	// releaseLeases lets the leases lapse now rather than deleting them,
	// so the next holder's fence is still above every earlier one.
	releaseLeases = `UPDATE courier_leases SET expires_at = ` + nowMS + `
		WHERE courier = ?1 AND holder = ?2 AND expires_at > ` + nowMS + ` AND project_id IN (SELECT value FROM json_each(?3))`

	leaseLive = `SELECT 1 FROM courier_leases WHERE courier = ? AND project_id = ? AND holder = ? AND fence = ?
		AND expires_at > ` + nowMS

	selectTargetStates = `SELECT target, received_seq, failures,
		    CASE WHEN next_attempt_at > ` + nowMS + `
		         THEN CAST(round((julianday(next_attempt_at) - julianday(` + nowMS + `)) * 86400000) AS INTEGER) ELSE 0 END,
		    COALESCE(failing_since, ''), last_error
		FROM courier_cursors WHERE courier = ? AND project_id = ? ORDER BY target`

	selectTargetState = `SELECT target, received_seq, failures,
		    CASE WHEN next_attempt_at > ` + nowMS + `
		         THEN CAST(round((julianday(next_attempt_at) - julianday(` + nowMS + `)) * 86400000) AS INTEGER) ELSE 0 END,
		    COALESCE(failing_since, ''), last_error
		FROM courier_cursors WHERE courier = ? AND project_id = ? AND target = ?`

	// advanceCursor inserts the cursor or moves it forward (never
	// backwards) and clears the target's failures.
	advanceCursor = `INSERT INTO courier_cursors (courier, project_id, target, received_seq, updated_at)
		VALUES (?, ?, ?, ?, ` + nowMS + `)
		ON CONFLICT (courier, project_id, target) DO UPDATE
		SET received_seq = max(excluded.received_seq, courier_cursors.received_seq), updated_at = excluded.updated_at,
		    failures = 0, next_attempt_at = NULL, failing_since = NULL, last_error = ''`

	recordFailure = `INSERT INTO courier_cursors (courier, project_id, target, received_seq, updated_at,
		    failures, next_attempt_at, failing_since, last_error)
		VALUES (?1, ?2, ?3, 0, ` + nowMS + `, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?4), ` + nowMS + `, ?5)
		ON CONFLICT (courier, project_id, target) DO UPDATE
		SET failures = courier_cursors.failures + 1, next_attempt_at = excluded.next_attempt_at,
		    failing_since = COALESCE(courier_cursors.failing_since, excluded.failing_since),
		    last_error = excluded.last_error, updated_at = excluded.updated_at`

	forgetTarget = `DELETE FROM courier_cursors WHERE courier = ? AND project_id = ? AND target = ?`
)

// timeModifier renders d as an SQLite date modifier: '+1.500 seconds'.
func timeModifier(d time.Duration) string {
	ms := max(d.Milliseconds(), 0)
	return fmt.Sprintf("+%d.%03d seconds", ms/1000, ms%1000)
}

func jsonIDs(ids []string) string {
	b, _ := json.Marshal(ids) // []string always encodes
	return string(b)
}

// AcquireLeases takes the free, expired or own leases of projectIDs in one
// write transaction. See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) AcquireLeases(ctx context.Context, courier, holder string, projectIDs []string, ttl time.Duration) ([]store.Lease, error) {
	if ttl.Milliseconds() < 1 {
		return nil, fmt.Errorf("acquire leases: ttl %v is under 1ms", ttl)
	}
	if len(projectIDs) == 0 {
		return nil, nil
	}
	var held map[string]int64
	err := db.writeTx(ctx, "acquire leases", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, acquireLeases, courier, holder, timeModifier(ttl), jsonIDs(projectIDs)); err != nil {
			return err
		}
		var err error
		held, err = heldLeases(ctx, tx, courier, holder)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []store.Lease
	for _, p := range projectIDs {
		if f, ok := held[p]; ok {
			out = append(out, store.Lease{Courier: courier, ProjectID: p, Holder: holder, Fence: f})
			delete(held, p) // a repeated id is listed once
		}
	}
	return out, nil
}

func heldLeases(ctx context.Context, tx *sql.Tx, courier, holder string) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, selectHeldLeases, courier, holder)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[string]int64{}
	for rows.Next() {
		var p string
		var f int64
		if err := rows.Scan(&p, &f); err != nil {
			return nil, err
		}
		held[p] = f
	}
	return held, rows.Err()
}

// RenewLeases extends every live lease holder has of courier in one write
// transaction. See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) RenewLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	return db.renewOrReclaim(ctx, "renew leases", renewLeases, courier, holder, ttl)
}

// ReclaimLeases takes holder's live leases of courier under new fences.
// See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) ReclaimLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	return db.renewOrReclaim(ctx, "reclaim leases", reclaimLeases, courier, holder, ttl)
}

func (db *DB) renewOrReclaim(ctx context.Context, op, query, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	if ttl.Milliseconds() < 1 {
		return nil, fmt.Errorf("%s: ttl %v is under 1ms", op, ttl)
	}
	var out []store.Lease
	err := db.writeTx(ctx, op, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, query, courier, holder, timeModifier(ttl)); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, selectHeldLeases, courier, holder)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			l := store.Lease{Courier: courier, Holder: holder}
			if err := rows.Scan(&l.ProjectID, &l.Fence); err != nil {
				return err
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}

// LeaseStates reads the lease rows of projectIDs on a reader connection,
// taking no write lock. See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) LeaseStates(ctx context.Context, courier string, projectIDs []string) ([]store.LeaseState, error) {
	if len(projectIDs) == 0 {
		return nil, nil
	}
	rows, err := db.rd.QueryContext(ctx, selectLeaseStates, courier, jsonIDs(projectIDs))
	if err != nil {
		return nil, mapErr("lease states", err)
	}
	defer rows.Close()
	var out []store.LeaseState
	for rows.Next() {
		var ls store.LeaseState
		var ms int64
		if err := rows.Scan(&ls.ProjectID, &ls.Holder, &ls.Fence, &ms); err != nil {
			return nil, mapErr("lease states", err)
		}
		ls.ExpiresIn = time.Duration(ms) * time.Millisecond
		out = append(out, ls)
	}
	return out, mapErr("lease states", rows.Err())
}

// ReleaseLeases drops holder's leases of projectIDs. Errors:
// store.ErrUnavailable.
func (db *DB) ReleaseLeases(ctx context.Context, courier, holder string, projectIDs []string) error {
	if len(projectIDs) == 0 {
		return nil
	}
	_, err := db.w.ExecContext(ctx, releaseLeases, courier, holder, jsonIDs(projectIDs))
	return mapErr("release leases", err)
}

// TargetStates reads every stored target state of (courier, project).
// Errors: store.ErrUnavailable.
func (db *DB) TargetStates(ctx context.Context, courier, projectID string) ([]store.TargetState, error) {
	return db.couriers().TargetStates(ctx, courier, projectID)
}

// fenced runs write in one transaction after checking that lease is live;
// it returns store.ErrLeaseLost (and writes nothing) when it is not.
func (db *DB) fenced(ctx context.Context, op string, lease store.Lease, write func(tx *sql.Tx) error) error {
	lost := false
	err := db.writeTx(ctx, op, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, leaseLive, lease.Courier, lease.ProjectID, lease.Holder, lease.Fence).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			lost = true
			return nil
		}
		if err != nil {
			return err
		}
		return write(tx)
	})
	if lost {
		return fmt.Errorf("%s: %w", op, store.ErrLeaseLost)
	}
	return err
}

// AdvanceCursor moves target's cursor forward under lease. Errors:
// store.ErrLeaseLost, store.ErrUnavailable.
func (db *DB) AdvanceCursor(ctx context.Context, lease store.Lease, target string, seq int64) error {
	if seq < 0 {
		return fmt.Errorf("advance cursor: negative received_seq %d", seq)
	}
	return db.fenced(ctx, "advance cursor", lease, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, advanceCursor, lease.Courier, lease.ProjectID, target, seq)
		return err
	})
}

// AdvanceCursors moves several targets' cursors forward under lease in
// one write transaction. Errors: store.ErrLeaseLost, store.ErrUnavailable.
func (db *DB) AdvanceCursors(ctx context.Context, lease store.Lease, advances []store.CursorAdvance) error {
	if err := shared.CheckAdvances("advance cursors", advances); err != nil {
		return err
	}
	if len(advances) == 0 {
		return nil
	}
	return db.fenced(ctx, "advance cursors", lease, func(tx *sql.Tx) error {
		for _, a := range advances {
			if _, err := tx.ExecContext(ctx, advanceCursor, lease.Courier, lease.ProjectID, a.Target, a.ReceivedSeq); err != nil {
				return err
			}
		}
		return nil
	})
}

// RecordFailure counts a failed delivery under lease. Errors:
// store.ErrLeaseLost, store.ErrUnavailable.
func (db *DB) RecordFailure(ctx context.Context, lease store.Lease, target string, retryIn time.Duration, lastError string) (store.TargetState, error) {
	lastError = shared.ClampLastError(lastError)
	var ts store.TargetState
	err := db.fenced(ctx, "record failure", lease, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, recordFailure, lease.Courier, lease.ProjectID, target, timeModifier(retryIn), lastError); err != nil {
			return err
		}
		var err error
		ts, err = shared.ScanTargetState(tx.QueryRowContext(ctx, selectTargetState, lease.Courier, lease.ProjectID, target))
		return err
	})
	return ts, err
}

// ForgetTarget deletes target's state. Errors: store.ErrUnavailable.
func (db *DB) ForgetTarget(ctx context.Context, courier, projectID, target string) error {
	return db.couriers().ForgetTarget(ctx, courier, projectID, target)
}

var courierSQL = shared.CourierSQL{TargetStates: selectTargetStates, Forget: forgetTarget}

func (db *DB) couriers() shared.Couriers {
	return shared.Couriers{Engine: db.engine(), SQL: &courierSQL}
}
