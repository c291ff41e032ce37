package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// readCommitted is the transaction mode of appends and lineage work: each
// statement after the stream lock sees everything committed before it.
var readCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// Append stores ev and its receipt (spec §7) in one READ COMMITTED
// transaction under the project's stream lock. See store.Log.Append.
// Errors: store.ErrNotFound (unknown project), store.ErrSenderNotActive,
// store.ErrEventIDCollision, store.ErrUnavailable, or ctx's error.
func (db *DB) Append(ctx context.Context, ev *correspondence.Event, canonical []byte) (store.AppendResult, error) {
	if ev == nil || ev.ID == "" {
		return store.AppendResult{}, errors.New("append: event without an id")
	}
	in := appendInput{ev: ev, canonical: bytes.Clone(canonical), paths: append([]string{}, ev.Scope.Paths...)}
	in.node, in.isClaim = correspondence.NodeOf(ev)
	res, err := db.submitAppend(ctx, in)
	if err == nil && res.Created {
		// Subscribers in this process hear of it at once; the others (and
		// this one again) through NOTIFY, which the transaction queued.
		db.advances.Publish(ev.ProjectID, res.Record.ReceivedSeq)
	}
	return res, err
}

// appendInput is what Append derives from the event before its transaction.
type appendInput struct {
	ev        *correspondence.Event
	canonical []byte
	paths     []string // scope.paths as signed, never nil
	node      correspondence.LineageNode
	isClaim   bool
	// activeAt, when set, is a foreign record's remote receipt time
	// (AppendAt): the sender must have been active then, not now.
	activeAt time.Time
}

func appendTx(ctx context.Context, tx pgx.Tx, in appendInput) (store.AppendResult, error) {
	ev := in.ev
	// The stream lock, then the state, pipelined in one round trip: the
	// server runs them in order and the state statement takes its snapshot
	// only once the lock is held (see doc.go).
	var found bool
	var idStatus, keyStatus *string
	var stored []byte
	var incomplete bool
	var deactivatedAt, revokedAt *time.Time
	b := &pgx.Batch{}
	b.Queue(lockStreamSQL, streamLockKey(ev.ProjectID))
	b.Queue(selectAppendState, ev.ProjectID, ev.Sender.SigningKeyID, ev.Sender.IdentityID, ev.ID).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				found = true
				if err := rows.Scan(&idStatus, &keyStatus, &stored, &incomplete, &deactivatedAt, &revokedAt); err != nil {
					return err
				}
			}
			return rows.Err()
		})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return store.AppendResult{}, err
	}
	if !found {
		return store.AppendResult{}, store.ErrNotFound
	}
	// An exact retry is answered with the original receipt even after the
	// key or identity stopped being active: it adds no new event (spec §7).
	if stored == nil && !senderActive(in.activeAt, idStatus, keyStatus, deactivatedAt, revokedAt) {
		return store.AppendResult{}, store.ErrSenderNotActive
	}
	if stored != nil {
		if !bytes.Equal(stored, in.canonical) {
			return store.AppendResult{}, store.ErrEventIDCollision
		}
		return finishAppend(ctx, tx, in, false, incomplete)
	}

	// The event row (with its receipt), its parents, its handoff reference
	// and its advance notification in one round trip; for a non-claim also
	// the release of the claims waiting on it and the read-back, which
	// frontier work cannot change.
	var released int64
	var rec store.Record
	var forks []string
	b = &pgx.Batch{}
	b.Queue(insertEvent, ev.ProjectID, ev.ID, ev.RepositoryID, ev.ThreadID, string(ev.Kind), ev.Sender.IdentityID,
		ev.Sender.DeviceID, ev.Sender.SessionID, ev.SessionSeq, in.canonical)
	for _, p := range ev.Parents {
		b.Queue(insertParent, ev.ProjectID, ev.ID, p)
	}
	if h := ev.HandoffID(); h != "" {
		b.Queue(insertHandoffRef, ev.ProjectID, h, ev.ID)
	}
	b.Queue(notifyAdvance, ev.ProjectID)
	if !in.isClaim {
		// Any arrival that is not itself pending readies the claims
		// waiting on it, whatever its kind (spec §8).
		b.Queue(releaseWaiters, ev.ProjectID, ev.ID).Exec(func(tag pgconn.CommandTag) error {
			released = tag.RowsAffected()
			return nil
		})
		queueReadBack(b, ev, &rec, &forks)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return store.AppendResult{}, err
	}
	if !in.isClaim {
		if incomplete || released > 0 {
			if err := reconcileAndFlag(ctx, tx, ev.ProjectID, store.FrontierBudget); err != nil {
				return store.AppendResult{}, err
			}
		}
		return buildResult(in, rec, forks, true), nil
	}
	status, err := placeClaim(ctx, tx, in)
	if err != nil {
		return store.AppendResult{}, err
	}
	if status != correspondence.LineagePending {
		tag, err := tx.Exec(ctx, releaseWaiters, ev.ProjectID, ev.ID)
		if err != nil {
			return store.AppendResult{}, err
		}
		released = tag.RowsAffected()
	}
	return finishAppend(ctx, tx, in, true, incomplete || released > 0)
}

// finishAppend resolves this append's share of the ready frontier when it
// may hold rows (frontier: the persisted flag was set or this append
// readied rows; otherwise it is empty and the flags stay as they are),
// then reads back the record and the session tuple in one round trip.
func finishAppend(ctx context.Context, tx pgx.Tx, in appendInput, created, frontier bool) (store.AppendResult, error) {
	if frontier {
		if err := reconcileAndFlag(ctx, tx, in.ev.ProjectID, store.FrontierBudget); err != nil {
			return store.AppendResult{}, err
		}
	}
	var rec store.Record
	var forks []string
	b := &pgx.Batch{}
	queueReadBack(b, in.ev, &rec, &forks)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return store.AppendResult{}, err
	}
	return buildResult(in, rec, forks, created), nil
}

// reconcileAndFlag resolves at most budget frontier rows and persists the
// incomplete flag and watermark.
func reconcileAndFlag(ctx context.Context, tx pgx.Tx, projectID string, budget int) error {
	incomplete, changed, err := reconcileRows(ctx, tx, projectID, budget)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, updateLineageFlags, incomplete, changed, projectID)
	return err
}

// queueReadBack queues the read of ev's record and of its session tuple.
func queueReadBack(b *pgx.Batch, ev *correspondence.Event, rec *store.Record, forks *[]string) {
	b.Queue(selectRecord, ev.ProjectID, ev.ID).QueryRow(func(row pgx.Row) error {
		var err error
		*rec, err = scanRecord(row, ev.ProjectID)
		return err
	})
	b.Queue(selectSessionTuple, ev.ProjectID, ev.Sender.IdentityID, ev.Sender.DeviceID, ev.Sender.SessionID,
		ev.SessionSeq).Query(func(rows pgx.Rows) error {
		var err error
		*forks, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
}

// buildResult derives the warnings of spec §9 from what is stored.
func buildResult(in appendInput, rec store.Record, forks []string, created bool) store.AppendResult {
	ev := in.ev
	res := store.AppendResult{Record: rec, Created: created}
	if len(forks) > 1 {
		res.Warnings = append(res.Warnings, store.Warning{
			Code:     store.WarnSessionFork,
			Detail:   fmt.Sprintf("%d events share this identity, device, session and session_seq %d", len(forks), ev.SessionSeq),
			EventIDs: forks[:min(len(forks), store.MaxWarningIDs)],
		})
	}
	if rec.LineageStatus == correspondence.LineagePending {
		res.Warnings = append(res.Warnings, store.Warning{
			Code:     store.WarnClaimLineagePending,
			Detail:   "the claim's predecessor is not stored yet (or is itself pending); the claim is not active until it is",
			EventIDs: []string{in.node.PredecessorEventID},
		})
	}
	return res
}

// lineageRow is one claim_lineage row.
type lineageRow struct {
	node   correspondence.LineageNode
	status correspondence.LineageStatus
	root   string
}

func loadLineage(ctx context.Context, tx pgx.Tx, projectID, eventID string) (lineageRow, bool, error) {
	var r lineageRow
	var kind, status string
	var expires *time.Time
	err := tx.QueryRow(ctx, selectLineage, projectID, eventID).Scan(&r.node.RepositoryID, &r.node.ThreadID,
		&r.node.ClaimID, &r.node.IdentityID, &kind, &r.node.Generation, &r.node.PredecessorEventID, &r.node.Paths,
		&expires, &status, &r.root)
	if errors.Is(err, pgx.ErrNoRows) {
		return lineageRow{}, false, nil
	}
	if err != nil {
		return lineageRow{}, false, err
	}
	r.node.EventID = eventID
	r.node.Kind = correspondence.Kind(kind)
	r.node.ExpiresAt = nullTime(expires)
	r.status = correspondence.LineageStatus(status)
	return r, true, nil
}

// placeClaim decides a newly stored claim event's first lineage status and
// records it (spec §8): a claim.open takes correspondence.RootStatus (and
// is a tip when valid); a renew/release whose predecessor is absent or
// pending waits for it; otherwise correspondence.Successor decides.
func placeClaim(ctx context.Context, tx pgx.Tx, in appendInput) (correspondence.LineageStatus, error) {
	ev, n := in.ev, in.node
	var status correspondence.LineageStatus
	root := ""
	if n.Kind == correspondence.KindClaimOpen {
		if status = correspondence.RootStatus(n); status == correspondence.LineageValid {
			root = n.IdentityID
		}
	} else {
		var err error
		if status, root, err = judge(ctx, tx, ev.ProjectID, n); err != nil {
			return "", err
		}
	}
	if _, err := tx.Exec(ctx, insertLineage, ev.ProjectID, ev.ID, n.RepositoryID, n.ThreadID, n.ClaimID,
		n.IdentityID, ev.Sender.DeviceID, ev.Sender.SessionID, string(n.Kind), n.Generation, n.PredecessorEventID,
		in.paths, nullable(n.ExpiresAt), string(status), root); err != nil {
		return "", err
	}
	switch status {
	case correspondence.LineagePending:
		_, err := tx.Exec(ctx, insertWaiting, ev.ProjectID, n.PredecessorEventID, ev.ID)
		return status, err
	case correspondence.LineageValid:
		return status, becomeTip(ctx, tx, ev.ProjectID, n, root)
	}
	return status, nil
}

// judge decides a renew/release child from its stored predecessor: pending
// when the predecessor is absent or pending, else Successor's verdict. A
// stored predecessor that is not a claim event makes the child invalid.
func judge(ctx context.Context, tx pgx.Tx, projectID string, child correspondence.LineageNode) (correspondence.LineageStatus, string, error) {
	pred, isClaim, err := loadLineage(ctx, tx, projectID, child.PredecessorEventID)
	if err != nil {
		return "", "", err
	}
	if !isClaim {
		var exists bool
		if err := tx.QueryRow(ctx, eventExists, projectID, child.PredecessorEventID).Scan(&exists); err != nil {
			return "", "", err
		}
		if !exists {
			return correspondence.LineagePending, "", nil
		}
		pred.node.EventID = child.PredecessorEventID
		pred.status = correspondence.LineageNotApplicable
	}
	if pred.status == correspondence.LineagePending {
		return correspondence.LineagePending, "", nil
	}
	s := correspondence.Successor(pred.node, pred.status, pred.root, child)
	if s == correspondence.LineageValid {
		return s, pred.root, nil
	}
	return s, "", nil
}

// becomeTip makes a newly valid event a branch tip and ends its
// predecessor's tip: a valid direct child now exists (spec §8).
func becomeTip(ctx context.Context, tx pgx.Tx, projectID string, n correspondence.LineageNode, root string) error {
	if n.PredecessorEventID != "" {
		if _, err := tx.Exec(ctx, deleteTip, projectID, n.PredecessorEventID); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, insertTip, root, projectID, n.EventID)
	return err
}

// reconcileRows resolves at most budget ready-frontier rows of the
// project, in arrival order, including rows readied along the way. It
// returns whether rows remain and whether a lineage or tip row changed;
// the caller persists both (updateLineageFlags). The stream lock is held.
func reconcileRows(ctx context.Context, tx pgx.Tx, projectID string, budget int) (incomplete, changed bool, err error) {
	drained := false
	for range budget {
		var eventID string
		err := tx.QueryRow(ctx, popFrontier, projectID).Scan(&eventID)
		if errors.Is(err, pgx.ErrNoRows) {
			drained = true
			break
		}
		if err != nil {
			return false, false, err
		}
		c, err := resolveOne(ctx, tx, projectID, eventID)
		if err != nil {
			return false, false, err
		}
		changed = changed || c
	}
	if !drained {
		if err := tx.QueryRow(ctx, frontierRemains, projectID).Scan(&incomplete); err != nil {
			return false, false, err
		}
	}
	return incomplete, changed, nil
}

// resolveOne re-judges one frontier child; changed reports a lineage row
// update.
func resolveOne(ctx context.Context, tx pgx.Tx, projectID, eventID string) (changed bool, err error) {
	child, ok, err := loadLineage(ctx, tx, projectID, eventID)
	if err != nil || !ok || child.status != correspondence.LineagePending {
		return false, err
	}
	status, root, err := judge(ctx, tx, projectID, child.node)
	if err != nil {
		return false, err
	}
	if status == correspondence.LineagePending {
		_, err := tx.Exec(ctx, insertWaiting, projectID, child.node.PredecessorEventID, eventID)
		return false, err
	}
	if _, err := tx.Exec(ctx, updateLineage, string(status), root, projectID, eventID); err != nil {
		return false, err
	}
	if status == correspondence.LineageValid {
		if err := becomeTip(ctx, tx, projectID, child.node, root); err != nil {
			return false, err
		}
	}
	_, err = tx.Exec(ctx, releaseWaiters, projectID, eventID)
	return true, err
}

// ReconcileLineage resolves at most max frontier rows in one short READ
// COMMITTED transaction under the project's stream lock, so it is
// serialized with the project's appends. See store.Log.ReconcileLineage.
func (db *DB) ReconcileLineage(ctx context.Context, projectID string, max int) (bool, error) {
	var incomplete bool
	err := db.inTx(ctx, "reconcile lineage", readCommitted, func(tx pgx.Tx) error {
		if err := lockStream(ctx, tx, projectID); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, projectExists, projectID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return store.ErrNotFound
		}
		var changed bool
		var err error
		if incomplete, changed, err = reconcileRows(ctx, tx, projectID, max); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, updateLineageFlags, incomplete, changed, projectID)
		return err
	})
	return incomplete, err
}

// LineageWatermark reads the persisted incomplete flag and
// lineage_changed_at. Errors: store.ErrNotFound, store.ErrUnavailable.
func (db *DB) LineageWatermark(ctx context.Context, projectID string) (bool, time.Time, error) {
	var incomplete bool
	var at *time.Time
	if err := db.pool.QueryRow(ctx, selectLineageFlags, projectID).Scan(&incomplete, &at); err != nil {
		return false, time.Time{}, mapErr("lineage watermark", err)
	}
	return incomplete, nullTime(at), nil
}

// ClaimTips lists the repository's branch tips by event id.
func (db *DB) ClaimTips(ctx context.Context, projectID, repositoryID string) ([]store.ClaimTip, error) {
	rows, err := db.pool.Query(ctx, selectTips, projectID, repositoryID)
	if err != nil {
		return nil, mapErr("claim tips", err)
	}
	tips, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ClaimTip, error) {
		var t store.ClaimTip
		var kind string
		var expires *time.Time
		err := row.Scan(&t.EventID, &t.ReceivedSeq, &t.RepositoryID, &t.ThreadID, &t.ClaimID, &kind,
			&t.Generation, &t.RootIdentityID, &t.DeviceID, &t.SessionID, &t.Paths, &expires)
		t.Kind = correspondence.Kind(kind)
		t.ExpiresAt = nullTime(expires)
		return t, err
	})
	if err != nil {
		return nil, mapErr("claim tips", err)
	}
	return tips, nil
}

// Events reads one page of a repository's records in ascending
// received_seq (spec §9). A Limit outside 1–200 is clamped (0 means 100).
func (db *DB) Events(ctx context.Context, q store.EventQuery) (store.EventPage, error) {
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = 100
	case limit > 200:
		limit = 200
	}
	var rows pgx.Rows
	var err error
	if q.ThreadID == "" {
		rows, err = db.pool.Query(ctx, selectRecordsAfter, q.ProjectID, q.RepositoryID, q.After, limit+1)
	} else {
		rows, err = db.pool.Query(ctx, selectThreadRecordsAfter, q.ProjectID, q.RepositoryID, q.ThreadID, q.After, limit+1)
	}
	if err != nil {
		return store.EventPage{}, mapErr("events", err)
	}
	recs, err := collectRecords(rows, q.ProjectID)
	if err != nil {
		return store.EventPage{}, mapErr("events", err)
	}
	page := store.EventPage{Records: recs}
	if len(recs) > limit {
		page.Records, page.HasMore = recs[:limit], true
	}
	return page, nil
}

// Head returns the newest received_seq and its received_at. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) Head(ctx context.Context, projectID string) (int64, time.Time, error) {
	var seq int64
	var at *time.Time
	if err := db.pool.QueryRow(ctx, selectHead, projectID).Scan(&seq, &at); err != nil {
		return 0, time.Time{}, mapErr("head", err)
	}
	return seq, nullTime(at), nil
}

func scanRecord(row pgx.Row, projectID string) (store.Record, error) {
	rec := store.Record{ProjectID: projectID}
	var kind, status string
	if err := row.Scan(&rec.EventID, &rec.RepositoryID, &rec.ThreadID, &kind, &rec.Event, &rec.ReceivedSeq,
		&rec.ReceivedAt, &status, &rec.MissingParents); err != nil {
		return store.Record{}, err
	}
	rec.Kind = correspondence.Kind(kind)
	rec.ReceivedAt = utc(rec.ReceivedAt)
	rec.LineageStatus = correspondence.LineageStatus(status)
	if rec.MissingParents == nil {
		rec.MissingParents = []string{}
	}
	slices.Sort(rec.MissingParents) // already in COLLATE "C" order; kept as a guarantee
	return rec, nil
}

func collectRecords(rows pgx.Rows, projectID string) ([]store.Record, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Record, error) {
		return scanRecord(row, projectID)
	})
}
