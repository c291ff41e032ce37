package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Projection reads (spec §8, §9). Each public method runs its statements
// in one read transaction on the query_only pool, so every part comes from
// one WAL snapshot; the database clock is read once, in the first
// statement, and passed to the others, so that the expiry filter and
// evaluated_at input (c) agree.
const (
	// snapshotHead reads the project's head, lineage flag and watermark,
	// and the database clock, in one statement.
	snapshotHead = `SELECT last_seq, last_received_at, lineage_incomplete, lineage_changed_at, ` + nowMS + `
		FROM projects WHERE id = ?`

	// lastExpiredTip is evaluated_at input (c): the newest expires_at among
	// the repository's open/renew tips that is not after the clock.
	// Releases have a NULL expires_at. Served by claim_tips_live.
	lastExpiredTip = `SELECT max(expires_at) FROM claim_tips
		WHERE project_id = ? AND repository_id = ? AND expires_at IS NOT NULL AND expires_at <= ?`

	// claimCandidates scans the repository's live open/renew tips in
	// claim_tips_live order (expires_at, then the appended primary key
	// event_id), with the thread (?4) and path (?5) filters applied in the
	// scan, so that the caller's LIMIT (the 512-row sentinel) counts only
	// rows that match. The path filter is the overlap rule of spec §4,
	// written on characters, which agrees with correspondence.PathsOverlap
	// on bytes because '/' is ASCII.
	claimCandidates = `SELECT t.event_id, t.received_seq, t.thread_id, t.claim_id, t.kind, t.generation,
		t.root_identity_id, t.device_id, t.session_id, t.paths, t.expires_at
		FROM claim_tips t
		WHERE t.project_id = ?1 AND t.repository_id = ?2 AND t.expires_at > ?3
		  AND t.kind IN ('claim.open', 'claim.renew')
		  AND (?4 = '' OR t.thread_id = ?4)
		  AND (?5 = '' OR EXISTS (SELECT 1 FROM json_each(t.paths) j WHERE
		        ?5 = '.' OR j.value = '.' OR j.value = ?5
		        OR substr(j.value, 1, length(?5) + 1) = ?5 || '/'
		        OR substr(?5, 1, length(j.value) + 1) = j.value || '/'))
		ORDER BY t.expires_at, t.event_id
		LIMIT ?6`

	// claimCompetitors lists the other tips of one claim (any kind, expired
	// or not), served by claim_tips_claim.
	claimCompetitors = `SELECT event_id FROM claim_tips
		WHERE project_id = ? AND repository_id = ? AND claim_id = ? AND event_id <> ?
		ORDER BY event_id LIMIT ?`

	// recentRecords and recentThreadRecords read the newest records of a
	// selection backwards: along events_repository, or along thread_events
	// and the tail of events not yet in it (migration 0005).
	recentRecords       = recordColumns + ` WHERE e.project_id = ? AND e.repository_id = ? ORDER BY e.received_seq DESC LIMIT ?`
	recentThreadRecords = recordColumns + ` WHERE e.project_id = ?1 AND e.received_seq IN (` + recentThreadSeqs + `)
		ORDER BY e.received_seq DESC LIMIT ?4`
	recentThreadSeqs = `SELECT received_seq FROM (SELECT received_seq FROM thread_events
			WHERE project_id = ?1 AND repository_id = ?2 AND thread_id = ?3
			ORDER BY received_seq DESC LIMIT ?4)
		UNION ALL
		SELECT received_seq FROM (SELECT received_seq FROM events
			WHERE project_id = ?1 AND received_seq > (SELECT thread_indexed_seq FROM projects WHERE id = ?1)
			AND repository_id = ?2 AND thread_id = ?3
			ORDER BY received_seq DESC LIMIT ?4)`

	// recentTuples and recentThreadTuples read the session tuples of the
	// same window.
	recentTuples = `SELECT identity_id, device_id, session_id, session_seq FROM events
		WHERE project_id = ?1 AND repository_id = ?2
		ORDER BY received_seq DESC LIMIT ?3`
	recentThreadTuples = `SELECT identity_id, device_id, session_id, session_seq FROM events
		WHERE project_id = ?1 AND received_seq IN (` + recentThreadSeqs + `)
		ORDER BY received_seq DESC LIMIT ?4`

	// forkLookup is one per-tuple lookup on events_session (named: the
	// planner would otherwise walk events_event_id, every event of the
	// project, to skip the sort).
	forkLookup = `SELECT event_id FROM events INDEXED BY events_session
		WHERE project_id = ? AND identity_id = ? AND device_id = ? AND session_id = ? AND session_seq = ?
		ORDER BY event_id LIMIT ?`
)

// ClaimsSnapshot reads the active-claims projection from one read
// snapshot. See store.Log.ClaimsSnapshot.
func (db *DB) ClaimsSnapshot(ctx context.Context, q store.ClaimsQuery) (store.ClaimsSnapshot, error) {
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return store.ClaimsSnapshot{}, mapErr("claims snapshot", err)
	}
	defer tx.Rollback()
	snap, now, err := readSnapshotHead(ctx, tx, q.ProjectID)
	if err != nil {
		return store.ClaimsSnapshot{}, mapErr("claims snapshot", err)
	}
	if err := readActiveClaims(ctx, tx, q, now, &snap); err != nil {
		return store.ClaimsSnapshot{}, mapErr("claims snapshot", err)
	}
	return snap, nil
}

// VoiceSnapshot reads the voice parts from one read snapshot. See
// store.Log.VoiceSnapshot.
func (db *DB) VoiceSnapshot(ctx context.Context, q store.VoiceQuery) (store.VoiceSnapshot, error) {
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return store.VoiceSnapshot{}, mapErr("voice snapshot", err)
	}
	defer tx.Rollback()
	head, now, err := readSnapshotHead(ctx, tx, q.ProjectID)
	if err != nil {
		return store.VoiceSnapshot{}, mapErr("voice snapshot", err)
	}
	v := store.VoiceSnapshot{ClaimsSnapshot: head}
	if err := readRecent(ctx, tx, q, &v); err != nil {
		return store.VoiceSnapshot{}, mapErr("voice snapshot", err)
	}
	// The other parts degrade alone: a failure is reported, not fatal,
	// unless the request itself ended.
	partFailed := func(part string, err error) error {
		if ctx.Err() != nil {
			return mapErr("voice snapshot", err)
		}
		db.logger.WarnContext(ctx, "voice part unavailable", "part", part, "project_id", q.ProjectID, "err", mapErr(part, err))
		v.Unavailable = append(v.Unavailable, part)
		return nil
	}
	cs := head
	if err := readActiveClaims(ctx, tx, store.ClaimsQuery{ProjectID: q.ProjectID, RepositoryID: q.RepositoryID, ThreadID: q.ThreadID}, now, &cs); err != nil {
		if err := partFailed(store.VoicePartClaims, err); err != nil {
			return store.VoiceSnapshot{}, err
		}
	} else {
		v.ClaimsSnapshot = cs
	}
	if err := readSessionForks(ctx, tx, q, &v); err != nil {
		v.SessionForks = nil
		if err := partFailed(store.VoicePartSessionForks, err); err != nil {
			return store.VoiceSnapshot{}, err
		}
	}
	return v, nil
}

// readSnapshotHead fills the head, lineage and clock fields; it returns the clock as the schema's text for the queries
// that follow. store.ErrNotFound for an unknown project.
func readSnapshotHead(ctx context.Context, tx *sql.Tx, projectID string) (store.ClaimsSnapshot, string, error) {
	var snap store.ClaimsSnapshot
	var headAt, changedAt sql.NullString
	var now string
	err := tx.QueryRowContext(ctx, snapshotHead, projectID).Scan(&snap.Head, &headAt, &snap.LineageIncomplete, &changedAt, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ClaimsSnapshot{}, "", store.ErrNotFound
	}
	if err != nil {
		return store.ClaimsSnapshot{}, "", err
	}
	snap.HeadAt, snap.LineageChangedAt = parseNullTime(headAt), parseNullTime(changedAt)
	snap.Now = parseTime(now)
	return snap, now, nil
}

// readActiveClaims fills snap.LastExpiredAt, snap.Claims and snap.Truncated
// (spec §8 bounds).
func readActiveClaims(ctx context.Context, tx *sql.Tx, q store.ClaimsQuery, now string, snap *store.ClaimsSnapshot) error {
	var lastExpired sql.NullString
	if err := tx.QueryRowContext(ctx, lastExpiredTip, q.ProjectID, q.RepositoryID, now).Scan(&lastExpired); err != nil {
		return err
	}
	snap.LastExpiredAt = parseNullTime(lastExpired)
	rows, err := tx.QueryContext(ctx, claimCandidates, q.ProjectID, q.RepositoryID, now, q.ThreadID, q.Path,
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
		var kind, paths string
		var expires sql.NullString
		if err := rows.Scan(&c.EventID, &c.ReceivedSeq, &c.ThreadID, &c.ClaimID, &kind, &c.Generation,
			&c.RootIdentityID, &c.DeviceID, &c.SessionID, &paths, &expires); err != nil {
			rows.Close()
			return err
		}
		c.RepositoryID = q.RepositoryID
		c.Kind = correspondence.Kind(kind)
		c.ExpiresAt = parseNullTime(expires)
		if err := json.Unmarshal([]byte(paths), &c.Paths); err != nil {
			rows.Close()
			return fmt.Errorf("tip paths: %w", store.ErrUnavailable)
		}
		claims = append(claims, c)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	truncated := n > store.MaxActiveClaims // covers the 513-row sentinel too
	if len(claims) == 0 {
		snap.Claims, snap.Truncated = claims, truncated
		return nil
	}
	// Up to 128 lookups of each kind: prepared once per snapshot.
	canonicalStmt, err := tx.PrepareContext(ctx, selectCanonical)
	if err != nil {
		return err
	}
	defer canonicalStmt.Close()
	competitorsStmt, err := tx.PrepareContext(ctx, claimCompetitors)
	if err != nil {
		return err
	}
	defer competitorsStmt.Close()
	for i := range claims {
		c := &claims[i]
		var canonical []byte
		if err := canonicalStmt.QueryRowContext(ctx, q.ProjectID, c.EventID).Scan(&canonical); err != nil {
			return err
		}
		if c.Scope, err = shared.ScopeOf(canonical); err != nil {
			return err
		}
		ids, more, err := listIDs(ctx, competitorsStmt, store.MaxCompetitors, q.ProjectID, q.RepositoryID, c.ClaimID, c.EventID, store.MaxCompetitors+1)
		if err != nil {
			return err
		}
		c.CompetingEventIDs = ids
		truncated = truncated || more
	}
	snap.Claims, snap.Truncated = claims, truncated
	return nil
}

// listIDs runs a one-column statement whose LIMIT is a sentinel of max+1
// and returns at most max ids and whether the sentinel row was there.
func listIDs(ctx context.Context, stmt *sql.Stmt, max int, args ...any) ([]string, bool, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	ids := []string{}
	more := false
	for rows.Next() {
		if len(ids) == max {
			more = true
			break
		}
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, false, err
		}
		ids = append(ids, id)
	}
	return ids, more, rows.Err()
}

// readRecent fills the newest VoiceRecent records, newest first.
func readRecent(ctx context.Context, tx *sql.Tx, q store.VoiceQuery, v *store.VoiceSnapshot) error {
	var rows *sql.Rows
	var err error
	if q.ThreadID == "" {
		rows, err = tx.QueryContext(ctx, recentRecords, q.ProjectID, q.RepositoryID, store.VoiceRecent+1)
	} else {
		rows, err = tx.QueryContext(ctx, recentThreadRecords, q.ProjectID, q.RepositoryID, q.ThreadID, store.VoiceRecent+1)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if len(v.Recent) == store.VoiceRecent {
			v.RecentTruncated = true
			break
		}
		rec, err := scanRecord(rows, q.ProjectID)
		if err != nil {
			return err
		}
		v.Recent = append(v.Recent, rec)
	}
	return rows.Err()
}

// readSessionForks looks up each distinct session tuple of the recent
// window with its own bounded query (spec §9).
func readSessionForks(ctx context.Context, tx *sql.Tx, q store.VoiceQuery, v *store.VoiceSnapshot) error {
	var rows *sql.Rows
	var err error
	if q.ThreadID == "" {
		rows, err = tx.QueryContext(ctx, recentTuples, q.ProjectID, q.RepositoryID, store.VoiceRecent)
	} else {
		rows, err = tx.QueryContext(ctx, recentThreadTuples, q.ProjectID, q.RepositoryID, q.ThreadID, store.VoiceRecent)
	}
	if err != nil {
		return err
	}
	type tuple struct {
		identity, device, session string
		seq                       int64
	}
	var tuples []tuple
	seen := make(map[tuple]bool)
	for rows.Next() {
		var t tuple
		if err := rows.Scan(&t.identity, &t.device, &t.session, &t.seq); err != nil {
			rows.Close()
			return err
		}
		if !seen[t] {
			seen[t] = true
			tuples = append(tuples, t)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(tuples) == 0 {
		return nil
	}
	lookup, err := tx.PrepareContext(ctx, forkLookup)
	if err != nil {
		return err
	}
	defer lookup.Close()
	for _, t := range tuples {
		ids, more, err := listIDs(ctx, lookup, store.MaxForkEvents, q.ProjectID, t.identity, t.device, t.session, t.seq, store.MaxForkEvents+1)
		if err != nil {
			return err
		}
		if len(ids) > 1 {
			v.SessionForks = append(v.SessionForks, store.SessionFork{IdentityID: t.identity, DeviceID: t.device,
				SessionID: t.session, SessionSeq: t.seq, EventIDs: ids, Truncated: more})
		}
	}
	return nil
}
