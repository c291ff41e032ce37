package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Courier leases, cursors and backoff state (store.Couriers). Lease expiry
// is decided by the database clock alone, so relay processes with skewed
// clocks never both believe they hold a lease. Each method is one
// statement; concurrent upserts of one row are ordered by its row lock,
// and the loser re-checks the WHERE of ON CONFLICT DO UPDATE against the
// winner's row. A fenced write locks the lease row FOR SHARE, so it is
// ordered with a takeover of that lease.
const (
	// acquireLeases: $4 is the ttl in milliseconds, $3 the project ids
	// ("" is a relay-wide lease and needs no project).
	// The NOT EXISTS reads the statement's snapshot first: a lease live
	// with another holder never reaches ON CONFLICT, which would lock its
	// row even when the update's WHERE is false.
	acquireLeases = `WITH ins AS (
		INSERT INTO courier_leases AS l (courier, project_id, holder, expires_at, fence)
		SELECT $1, p.id, $2, ` + nowMS + ` + $4::bigint * interval '1 millisecond', 1
		FROM (SELECT id FROM projects WHERE id = ANY($3::text[])
		      UNION ALL SELECT '' WHERE '' = ANY($3::text[])) AS p
		WHERE NOT EXISTS (SELECT 1 FROM courier_leases o WHERE o.courier = $1 AND o.project_id = p.id
		                  AND o.holder <> $2 AND o.expires_at > ` + nowMS + `)
		ON CONFLICT (courier, project_id) DO UPDATE
		SET holder = excluded.holder, expires_at = excluded.expires_at,
		    fence = CASE WHEN l.holder = excluded.holder AND l.expires_at > ` + nowMS + `
		                 THEN l.fence ELSE l.fence + 1 END
		WHERE l.holder = excluded.holder OR l.expires_at <= ` + nowMS + `
		RETURNING project_id, fence)
		SELECT project_id, fence FROM ins`

	// reclaimLeases takes holder's live leases under a new fence.
	reclaimLeases = `UPDATE courier_leases SET expires_at = ` + nowMS + ` + $3::bigint * interval '1 millisecond',
		    fence = fence + 1
		WHERE courier = $1 AND holder = $2 AND expires_at > ` + nowMS + `
		RETURNING project_id, fence`

	selectLeaseStates = `SELECT project_id, holder, fence,
		    GREATEST(0, (extract(epoch FROM expires_at - ` + nowMS + `) * 1000)::bigint)
		FROM courier_leases WHERE courier = $1 AND project_id = ANY($2::text[]) ORDER BY project_id`

	// setKeeperTimeouts bounds every statement of a keeper's transaction
	// by what is left of its context ($1 in milliseconds): a lease call
	// stuck behind a lock or a slow server ends on the server too, not
	// only in the client.
	setKeeperTimeouts = `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true)`

	renewLeases = `UPDATE courier_leases SET expires_at = ` + nowMS + ` + $3::bigint * interval '1 millisecond'
		WHERE courier = $1 AND holder = $2 AND expires_at > ` + nowMS + `
		RETURNING project_id, fence`

	// releaseLeases lets the leases lapse now rather than deleting them,
	// so the next holder's fence is still above every earlier one.
	releaseLeases = `UPDATE courier_leases SET expires_at = ` + nowMS + `
		WHERE courier = $1 AND holder = $2 AND expires_at > ` + nowMS + ` AND project_id = ANY($3::text[])`

	targetStateColumns = `target, received_seq, failures,
		GREATEST(0, (extract(epoch FROM next_attempt_at - ` + nowMS + `) * 1000)::bigint),
		failing_since, last_error`

	selectTargetStates = `SELECT ` + targetStateColumns + ` FROM courier_cursors
		WHERE courier = $1 AND project_id = $2 ORDER BY target`

	// fencedLease is the CTE every fenced write starts with: $1 courier,
	// $2 project, $3 holder, $4 fence.
	fencedLease = `WITH lease AS (SELECT 1 FROM courier_leases
		WHERE courier = $1 AND project_id = $2 AND holder = $3 AND fence = $4 AND expires_at > ` + nowMS + `
		FOR SHARE) `

	advanceCursor = fencedLease + `INSERT INTO courier_cursors AS c (courier, project_id, target, received_seq, updated_at)
		SELECT $1, $2, $5, $6, ` + nowMS + ` FROM lease
		ON CONFLICT (courier, project_id, target) DO UPDATE
		SET received_seq = GREATEST(c.received_seq, excluded.received_seq), updated_at = excluded.updated_at,
		    failures = 0, next_attempt_at = NULL, failing_since = NULL, last_error = ''
		RETURNING 1`

	// advanceCursors: $5 the targets, $6 their seqs (one row each); it
	// returns how many rows it wrote, 0 when the lease is not live.
	advanceCursors = fencedLease + `, ins AS (INSERT INTO courier_cursors AS c (courier, project_id, target, received_seq, updated_at)
		SELECT $1, $2, a.target, a.seq, ` + nowMS + ` FROM lease, unnest($5::text[], $6::bigint[]) AS a(target, seq)
		ON CONFLICT (courier, project_id, target) DO UPDATE
		SET received_seq = GREATEST(c.received_seq, excluded.received_seq), updated_at = excluded.updated_at,
		    failures = 0, next_attempt_at = NULL, failing_since = NULL, last_error = ''
		RETURNING 1)
		SELECT count(*) FROM ins`

	// recordFailure: $6 retry in milliseconds, $7 the description.
	recordFailure = fencedLease + `INSERT INTO courier_cursors AS c (courier, project_id, target, received_seq, updated_at,
		    failures, next_attempt_at, failing_since, last_error)
		SELECT $1, $2, $5, 0, ` + nowMS + `, 1, ` + nowMS + ` + $6::bigint * interval '1 millisecond', ` + nowMS + `, $7 FROM lease
		ON CONFLICT (courier, project_id, target) DO UPDATE
		SET failures = c.failures + 1, next_attempt_at = excluded.next_attempt_at,
		    failing_since = COALESCE(c.failing_since, excluded.failing_since),
		    last_error = excluded.last_error, updated_at = excluded.updated_at
		RETURNING ` + targetStateColumns

	forgetTarget = `DELETE FROM courier_cursors WHERE courier = $1 AND project_id = $2 AND target = $3`
)

// keeperTx runs fn in one transaction whose statements time out with
// ctx's deadline on the server as well (statement_timeout and
// lock_timeout, set locally); without a deadline it is inTx.
func (db *DB) keeperTx(ctx context.Context, op string, mode pgx.TxAccessMode, fn func(tx pgx.Tx) error) error {
	return db.inTx(ctx, op, pgx.TxOptions{AccessMode: mode}, func(tx pgx.Tx) error {
		if dl, ok := ctx.Deadline(); ok {
			ms := max(time.Until(dl).Milliseconds(), 1)
			if _, err := tx.Exec(ctx, setKeeperTimeouts, strconv.FormatInt(ms, 10)); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

// leaseRows collects (project_id, fence) rows as holder's leases.
func leaseRows(rows pgx.Rows, courier, holder string) ([]store.Lease, error) {
	var out []store.Lease
	l := store.Lease{Courier: courier, Holder: holder}
	_, err := pgx.ForEachRow(rows, []any{&l.ProjectID, &l.Fence}, func() error { out = append(out, l); return nil })
	return out, err
}

// AcquireLeases takes the free, expired or own leases of projectIDs in one
// statement. See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) AcquireLeases(ctx context.Context, courier, holder string, projectIDs []string, ttl time.Duration) ([]store.Lease, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return nil, fmt.Errorf("acquire leases: ttl %v is under 1ms", ttl)
	}
	if len(projectIDs) == 0 {
		return nil, nil
	}
	// The statement returns the rows it wrote; a live lease of holder's
	// own is renewed by it too, so every lease holder holds is returned.
	var got []store.Lease
	err := db.keeperTx(ctx, "acquire leases", pgx.ReadWrite, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, acquireLeases, courier, holder, projectIDs, ms)
		if err != nil {
			return err
		}
		got, err = leaseRows(rows, courier, holder)
		return err
	})
	if err != nil {
		return nil, err
	}
	held := make(map[string]int64, len(got))
	for _, l := range got {
		held[l.ProjectID] = l.Fence
	}
	var out []store.Lease
	for _, id := range projectIDs {
		if f, ok := held[id]; ok {
			out = append(out, store.Lease{Courier: courier, ProjectID: id, Holder: holder, Fence: f})
			delete(held, id)
		}
	}
	return out, nil
}

// LeaseStates reads the lease rows of projectIDs without locking them.
// See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) LeaseStates(ctx context.Context, courier string, projectIDs []string) ([]store.LeaseState, error) {
	if len(projectIDs) == 0 {
		return nil, nil
	}
	var out []store.LeaseState
	err := db.keeperTx(ctx, "lease states", pgx.ReadOnly, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, selectLeaseStates, courier, projectIDs)
		if err != nil {
			return err
		}
		var ls store.LeaseState
		var ms int64
		_, err = pgx.ForEachRow(rows, []any{&ls.ProjectID, &ls.Holder, &ls.Fence, &ms}, func() error {
			ls.ExpiresIn = time.Duration(ms) * time.Millisecond
			out = append(out, ls)
			return nil
		})
		return err
	})
	return out, err
}

// ReclaimLeases takes holder's live leases of courier under new fences.
// See store.Couriers. Errors: store.ErrUnavailable.
func (db *DB) ReclaimLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	return db.renewOrReclaim(ctx, "reclaim leases", reclaimLeases, courier, holder, ttl)
}

// RenewLeases extends every live lease holder has of courier in one
// statement. Errors: store.ErrUnavailable.
func (db *DB) RenewLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	return db.renewOrReclaim(ctx, "renew leases", renewLeases, courier, holder, ttl)
}

func (db *DB) renewOrReclaim(ctx context.Context, op, query, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return nil, fmt.Errorf("%s: ttl %v is under 1ms", op, ttl)
	}
	var out []store.Lease
	err := db.keeperTx(ctx, op, pgx.ReadWrite, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, courier, holder, ms)
		if err != nil {
			return err
		}
		out, err = leaseRows(rows, courier, holder)
		return err
	})
	if err != nil {
		return nil, err
	}
	sortLeases(out)
	return out, nil
}

func sortLeases(ls []store.Lease) {
	slices.SortFunc(ls, func(a, b store.Lease) int { return strings.Compare(a.ProjectID, b.ProjectID) })
}

// ReleaseLeases drops holder's leases of projectIDs. Errors:
// store.ErrUnavailable.
func (db *DB) ReleaseLeases(ctx context.Context, courier, holder string, projectIDs []string) error {
	if len(projectIDs) == 0 {
		return nil
	}
	return db.keeperTx(ctx, "release leases", pgx.ReadWrite, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, releaseLeases, courier, holder, projectIDs)
		return err
	})
}

// TargetStates reads every stored target state of (courier, project).
// Errors: store.ErrUnavailable.
func (db *DB) TargetStates(ctx context.Context, courier, projectID string) ([]store.TargetState, error) {
	return db.couriers().TargetStates(ctx, courier, projectID)
}

// AdvanceCursor moves target's cursor forward under lease. Errors:
// store.ErrLeaseLost, store.ErrUnavailable.
func (db *DB) AdvanceCursor(ctx context.Context, lease store.Lease, target string, seq int64) error {
	if seq < 0 {
		return fmt.Errorf("advance cursor: negative received_seq %d", seq)
	}
	var one int
	err := db.pool.QueryRow(ctx, advanceCursor, lease.Courier, lease.ProjectID, lease.Holder, lease.Fence, target, seq).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("advance cursor: %w", store.ErrLeaseLost)
	}
	return mapErr("advance cursor", err)
}

// AdvanceCursors moves several targets' cursors forward under lease in
// one statement. Errors: store.ErrLeaseLost, store.ErrUnavailable.
func (db *DB) AdvanceCursors(ctx context.Context, lease store.Lease, advances []store.CursorAdvance) error {
	if len(advances) == 0 {
		return nil
	}
	best := make(map[string]int64, len(advances))
	for _, a := range advances {
		if a.ReceivedSeq < 0 {
			return fmt.Errorf("advance cursors: negative received_seq %d", a.ReceivedSeq)
		}
		best[a.Target] = max(best[a.Target], a.ReceivedSeq)
	}
	targets := make([]string, 0, len(best))
	seqs := make([]int64, 0, len(best))
	for t, s := range best {
		targets, seqs = append(targets, t), append(seqs, s)
	}
	var n int
	err := db.pool.QueryRow(ctx, advanceCursors, lease.Courier, lease.ProjectID, lease.Holder, lease.Fence, targets, seqs).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && n == 0) {
		return fmt.Errorf("advance cursors: %w", store.ErrLeaseLost)
	}
	return mapErr("advance cursors", err)
}

// RecordFailure counts a failed delivery under lease. Errors:
// store.ErrLeaseLost, store.ErrUnavailable.
func (db *DB) RecordFailure(ctx context.Context, lease store.Lease, target string, retryIn time.Duration, lastError string) (store.TargetState, error) {
	lastError = shared.ClampLastError(lastError)
	ts, err := shared.ScanTargetState(db.pool.QueryRow(ctx, recordFailure, lease.Courier, lease.ProjectID, lease.Holder, lease.Fence,
		target, max(retryIn.Milliseconds(), 0), lastError))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.TargetState{}, fmt.Errorf("record failure: %w", store.ErrLeaseLost)
	}
	return ts, mapErr("record failure", err)
}

// ForgetTarget deletes target's state. Errors: store.ErrUnavailable.
func (db *DB) ForgetTarget(ctx context.Context, courier, projectID, target string) error {
	return db.couriers().ForgetTarget(ctx, courier, projectID, target)
}

var courierSQL = shared.CourierSQL{TargetStates: selectTargetStates, Forget: forgetTarget}

func (db *DB) couriers() shared.Couriers {
	return shared.Couriers{Engine: db.engine(), SQL: &courierSQL}
}
