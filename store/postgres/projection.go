package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// snapshotTx is the transaction mode of projection reads (spec §8: read the
// projection from a consistent snapshot, after the bounded lineage work
// committed and released the stream lock). A read-only REPEATABLE READ
// transaction never fails with a serialization error.
var snapshotTx = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// ClaimsSnapshot reads the active-claims projection from one snapshot. See
// store.Log.ClaimsSnapshot.
func (db *DB) ClaimsSnapshot(ctx context.Context, q store.ClaimsQuery) (store.ClaimsSnapshot, error) {
	var snap store.ClaimsSnapshot
	err := db.inTx(ctx, "claims snapshot", snapshotTx, func(tx pgx.Tx) error {
		s, now, err := readSnapshotHead(ctx, tx, q.ProjectID)
		if err != nil {
			return err
		}
		if err := readActiveClaims(ctx, tx, q, now, &s); err != nil {
			return err
		}
		snap = s
		return nil
	})
	return snap, err
}

// VoiceSnapshot reads the voice parts from one snapshot. See
// store.Log.VoiceSnapshot.
func (db *DB) VoiceSnapshot(ctx context.Context, q store.VoiceQuery) (store.VoiceSnapshot, error) {
	var v store.VoiceSnapshot
	err := db.inTx(ctx, "voice snapshot", snapshotTx, func(tx pgx.Tx) error {
		head, now, err := readSnapshotHead(ctx, tx, q.ProjectID)
		if err != nil {
			return err
		}
		v = store.VoiceSnapshot{ClaimsSnapshot: head}
		if err := readRecent(ctx, tx, q, &v); err != nil {
			return err
		}
		// The other parts degrade alone. A failed statement aborts a
		// PostgreSQL transaction, so each part runs in a savepoint (a
		// nested pgx transaction) that is rolled back on failure.
		part := func(name string, fn func(tx pgx.Tx) error) error {
			err := pgx.BeginFunc(ctx, tx, fn)
			if err == nil {
				return nil
			}
			if ctx.Err() != nil || retryable(err) {
				return err
			}
			db.logger.WarnContext(ctx, "voice part unavailable", "part", name, "project_id", q.ProjectID, "err", mapErr(name, err))
			v.Unavailable = append(v.Unavailable, name)
			return nil
		}
		cs := head
		cq := store.ClaimsQuery{ProjectID: q.ProjectID, RepositoryID: q.RepositoryID, ThreadID: q.ThreadID}
		if err := part(store.VoicePartClaims, func(tx pgx.Tx) error { return readActiveClaims(ctx, tx, cq, now, &cs) }); err != nil {
			return err
		}
		if len(v.Unavailable) == 0 {
			v.ClaimsSnapshot = cs
		}
		return part(store.VoicePartSessionForks, func(tx pgx.Tx) error {
			if err := readSessionForks(ctx, tx, q, &v); err != nil {
				v.SessionForks = nil
				return err
			}
			return nil
		})
	})
	if err != nil {
		return store.VoiceSnapshot{}, err
	}
	return v, nil
}

// readSnapshotHead fills the head, lineage and clock fields and returns the
// clock for the queries that follow. store.ErrNotFound for an unknown
// project.
func readSnapshotHead(ctx context.Context, tx pgx.Tx, projectID string) (store.ClaimsSnapshot, time.Time, error) {
	var snap store.ClaimsSnapshot
	var headAt, changedAt *time.Time
	var now time.Time
	err := tx.QueryRow(ctx, snapshotHead, projectID).Scan(&snap.Head, &headAt, &snap.LineageIncomplete, &changedAt, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ClaimsSnapshot{}, time.Time{}, store.ErrNotFound
	}
	if err != nil {
		return store.ClaimsSnapshot{}, time.Time{}, err
	}
	snap.HeadAt, snap.LineageChangedAt, snap.Now = nullTime(headAt), nullTime(changedAt), utc(now)
	return snap, snap.Now, nil
}

// readActiveClaims fills snap.LastExpiredAt, snap.Claims and snap.Truncated
// (spec §8 bounds). The scope bytes and competitors of every returned row
// are read in one batch (one round trip).
func readActiveClaims(ctx context.Context, tx pgx.Tx, q store.ClaimsQuery, now time.Time, snap *store.ClaimsSnapshot) error {
	var lastExpired *time.Time
	if err := tx.QueryRow(ctx, lastExpiredTip, q.ProjectID, q.RepositoryID, now).Scan(&lastExpired); err != nil {
		return err
	}
	snap.LastExpiredAt = nullTime(lastExpired)
	rows, err := tx.Query(ctx, claimCandidates, q.ProjectID, q.RepositoryID, now, q.ThreadID, q.Path,
		store.ClaimCandidateSentinel+1)
	if err != nil {
		return err
	}
	var claims []store.ActiveClaim
	n := 0
	for rows.Next() {
		n++
		if len(claims) == store.MaxActiveClaims {
			continue // counted toward the sentinel only
		}
		var c store.ActiveClaim
		var kind string
		var expires *time.Time
		if err := rows.Scan(&c.EventID, &c.ReceivedSeq, &c.ThreadID, &c.ClaimID, &kind, &c.Generation,
			&c.RootIdentityID, &c.DeviceID, &c.SessionID, &c.Paths, &expires); err != nil {
			rows.Close()
			return err
		}
		c.RepositoryID = q.RepositoryID
		c.Kind = correspondence.Kind(kind)
		c.ExpiresAt = nullTime(expires)
		claims = append(claims, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	truncated := n > store.MaxActiveClaims // covers the 513-row sentinel too
	if len(claims) > 0 {
		b := &pgx.Batch{}
		for i := range claims {
			c := &claims[i]
			b.Queue(selectCanonical, q.ProjectID, c.EventID).QueryRow(func(row pgx.Row) error {
				var canonical []byte
				if err := row.Scan(&canonical); err != nil {
					return err
				}
				var err error
				c.Scope, err = shared.ScopeOf(canonical)
				return err
			})
			b.Queue(claimCompetitors, q.ProjectID, q.RepositoryID, c.ClaimID, c.EventID, store.MaxCompetitors+1).
				Query(func(rows pgx.Rows) error {
					ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
					if err != nil {
						return err
					}
					if len(ids) > store.MaxCompetitors {
						ids, truncated = ids[:store.MaxCompetitors], true
					}
					c.CompetingEventIDs = append([]string{}, ids...)
					return nil
				})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	snap.Claims, snap.Truncated = claims, truncated
	return nil
}

// readRecent fills the newest VoiceRecent records, newest first.
func readRecent(ctx context.Context, tx pgx.Tx, q store.VoiceQuery, v *store.VoiceSnapshot) error {
	var rows pgx.Rows
	var err error
	if q.ThreadID == "" {
		rows, err = tx.Query(ctx, recentRecords, q.ProjectID, q.RepositoryID, store.VoiceRecent+1)
	} else {
		rows, err = tx.Query(ctx, recentThreadRecords, q.ProjectID, q.RepositoryID, q.ThreadID, store.VoiceRecent+1)
	}
	if err != nil {
		return err
	}
	recs, err := collectRecords(rows, q.ProjectID)
	if err != nil {
		return err
	}
	if len(recs) > store.VoiceRecent {
		recs, v.RecentTruncated = recs[:store.VoiceRecent], true
	}
	v.Recent = recs
	return nil
}

// readSessionForks looks up each distinct session tuple of the recent
// window with its own bounded query (spec §9), all in one batch.
func readSessionForks(ctx context.Context, tx pgx.Tx, q store.VoiceQuery, v *store.VoiceSnapshot) error {
	type tuple struct {
		identity, device, session string
		seq                       int64
	}
	rows, err := tx.Query(ctx, recentTuples, q.ProjectID, q.RepositoryID, q.ThreadID, store.VoiceRecent)
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tuple, error) {
		var t tuple
		err := row.Scan(&t.identity, &t.device, &t.session, &t.seq)
		return t, err
	})
	if err != nil {
		return err
	}
	var tuples []tuple
	seen := make(map[tuple]bool)
	for _, t := range all {
		if !seen[t] {
			seen[t] = true
			tuples = append(tuples, t)
		}
	}
	if len(tuples) == 0 {
		return nil
	}
	forks := make([]*store.SessionFork, len(tuples))
	b := &pgx.Batch{}
	for i, t := range tuples {
		b.Queue(forkLookup, q.ProjectID, t.identity, t.device, t.session, t.seq, store.MaxForkEvents+1).
			Query(func(rows pgx.Rows) error {
				ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil || len(ids) < 2 {
					return err
				}
				f := &store.SessionFork{IdentityID: t.identity, DeviceID: t.device, SessionID: t.session, SessionSeq: t.seq}
				if len(ids) > store.MaxForkEvents {
					ids, f.Truncated = ids[:store.MaxForkEvents], true
				}
				f.EventIDs = ids
				forks[i] = f
				return nil
			})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, f := range forks {
		if f != nil {
			v.SessionForks = append(v.SessionForks, *f)
		}
	}
	return nil
}
