package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Append stores ev and its receipt (spec §7) through the group committer,
// in a batch transaction shared with concurrent appends (writer.go). See
// store.Log.Append.
// Checks run in this order: project exists, sender identity and key active
// (so an exact retry after a revocation is refused too), then exact retry
// or collision. Warnings (spec §9) are derived from the stored rows after
// the append's ≤32 frontier rows are resolved, for retries as well.
// Errors: store.ErrNotFound (unknown project), store.ErrSenderNotActive,
// store.ErrEventIDCollision, store.ErrUnavailable, or ctx's error (the
// append may still have committed; an exact retry tells).
func (db *DB) Append(ctx context.Context, ev *correspondence.Event, canonical []byte) (store.AppendResult, error) {
	if ev == nil || ev.ID == "" {
		return store.AppendResult{}, errors.New("append: event without an id")
	}
	in, err := newAppendInput(ev, canonical)
	if err != nil {
		return store.AppendResult{}, err
	}
	var res store.AppendResult
	err = db.submit(ctx, "append", func(t *txn) error {
		var err error
		res, err = appendTx(t, in)
		return err
	})
	if err != nil {
		return store.AppendResult{}, err
	}
	if res.Created {
		db.advances.Publish(ev.ProjectID, res.Record.ReceivedSeq)
	}
	return res, nil
}

// appendInput is everything Append derives from the event before queueing,
// so the writer goroutine only does SQL.
type appendInput struct {
	ev        *correspondence.Event
	canonical []byte
	paths     string // JSON array of scope.paths
	node      correspondence.LineageNode
	isClaim   bool
	// activeAt, when set, is a foreign record's remote receipt time
	// (AppendAt): the sender must have been active then, not now.
	activeAt time.Time
}

func newAppendInput(ev *correspondence.Event, canonical []byte) (appendInput, error) {
	paths, err := json.Marshal(append([]string{}, ev.Scope.Paths...))
	if err != nil {
		return appendInput{}, fmt.Errorf("append: paths: %w", err)
	}
	in := appendInput{ev: ev, canonical: bytes.Clone(canonical), paths: string(paths)}
	in.node, in.isClaim = correspondence.NodeOf(ev)
	return in, nil
}

func appendTx(t *txn, in appendInput) (store.AppendResult, error) {
	ev := in.ev
	sender := senderKey{ev.ProjectID, ev.Sender.SigningKeyID, ev.Sender.IdentityID}
	if !t.ws.senderActive(sender) {
		var idStatus, keyStatus string
		var active bool
		var err error
		if in.activeAt.IsZero() {
			err = t.queryRow(selectSender, ev.Sender.SigningKeyID, ev.Sender.IdentityID, ev.ProjectID, ev.ProjectID).
				Scan(&idStatus, &keyStatus)
			active = idStatus == store.StatusActive && keyStatus == store.StatusActive
		} else {
			active, err = senderActiveAt(t, ev, in.activeAt)
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return store.AppendResult{}, err
		}
		if err != nil || !active {
			// An exact retry is answered with the original receipt even after
			// the key or identity stopped being active: it adds no new event
			// (spec §7).
			if res, ok, err := retryOf(t, in); ok || err != nil {
				return res, err
			}
			// Name the first problem: an unknown project before an unknown sender.
			if err := t.mustExist(projectExists, ev.ProjectID); err != nil {
				return store.AppendResult{}, err
			}
			return store.AppendResult{}, store.ErrSenderNotActive
		}
		if in.activeAt.IsZero() {
			t.onRelease(func() { t.ws.rememberSender(sender) })
		}
	}

	ps, err := t.ws.project(t, ev.ProjectID)
	if err != nil {
		return store.AppendResult{}, err
	}
	seq := ps.lastSeq + 1
	at := receiptTime(t.now, ps.lastAt)
	r, err := t.exec(insertEvent, ev.ProjectID, seq, ev.ID, at, ev.RepositoryID, ev.ThreadID,
		string(ev.Kind), ev.Sender.IdentityID, ev.Sender.DeviceID, ev.Sender.SessionID, ev.SessionSeq,
		in.canonical)
	if err != nil {
		// Not the client's doing (a received_seq already taken means the
		// remembered counter was stale; the writer re-reads it): a
		// temporary failure, never ErrExists. The driver's error is
		// logged here and goes no further.
		if t.log != nil {
			t.log.Error("sqlite insert event failed", "seq", seq, "err", err)
		}
		return store.AppendResult{}, fmt.Errorf("insert event: %w", store.ErrUnavailable)
	}
	if n, err := r.RowsAffected(); err != nil || n == 0 {
		// Already stored: answer as an exact retry, or a collision. Nothing
		// was written, and this receipt number is not used.
		res, ok, err := retryOf(t, in)
		if err == nil && !ok {
			err = fmt.Errorf("append: event neither inserted nor stored: %w", store.ErrUnavailable)
		}
		return res, err
	}
	t.onRelease(func() { ps.lastSeq, ps.lastAt, ps.dirty = seq, at, true })
	for _, p := range ev.Parents {
		if _, err := t.exec(insertParent, ev.ProjectID, ev.ID, p); err != nil {
			return store.AppendResult{}, err
		}
	}
	if h := ev.HandoffID(); h != "" {
		if err := indexHandoffRef(t, ev.ProjectID, h, seq, ev.ID); err != nil {
			return store.AppendResult{}, err
		}
	}
	status := correspondence.LineageNotApplicable
	if in.isClaim {
		var err error
		if status, err = placeClaim(t, in, seq); err != nil {
			return store.AppendResult{}, err
		}
		if status == correspondence.LineagePending {
			t.ws.markWaiting(ev.ProjectID)
		}
	}
	// Any arrival that is not itself pending readies the claims waiting on
	// it, whatever its kind (spec §8). With no claim waiting and an empty
	// frontier there is nothing to ready or resolve.
	if ps.waiting || ps.incomplete {
		if status != correspondence.LineagePending {
			if err := releaseWaitersOf(t, ev.ProjectID, ev.ID); err != nil {
				return store.AppendResult{}, err
			}
		}
		if err := reconcileStaged(t, ps, ev.ProjectID, store.FrontierBudget); err != nil {
			return store.AppendResult{}, err
		}
	}
	// The record is what this transaction wrote; only its lineage status
	// may have moved during reconciliation (when it was pending).
	rec := store.Record{ProjectID: ev.ProjectID, EventID: ev.ID, RepositoryID: ev.RepositoryID, ThreadID: ev.ThreadID,
		Kind: ev.Kind, Event: in.canonical, ReceivedSeq: seq, ReceivedAt: parseTime(at), LineageStatus: status,
		MissingParents: []string{}}
	if status == correspondence.LineagePending {
		if l, ok, err := loadLineage(t, ev.ProjectID, ev.ID); err != nil {
			return store.AppendResult{}, err
		} else if ok {
			rec.LineageStatus = l.status
		}
	}
	if len(ev.Parents) > 0 {
		if rec.MissingParents, err = missingParents(t, ev.ProjectID, ev.ID); err != nil {
			return store.AppendResult{}, err
		}
	}
	return warnings(t, in, store.AppendResult{Record: rec, Created: true})
}

// reconcileStaged runs reconcile for an append inside a batch and stages
// the resulting lineage flag into the project's remembered state.
func reconcileStaged(t *txn, ps *projectState, projectID string, budget int) error {
	persisted := ps.incomplete
	incomplete, err := reconcile(t, projectID, budget, &persisted)
	if err != nil {
		return err
	}
	t.onRelease(func() { ps.incomplete = incomplete })
	return nil
}

// retryOf answers an event id that is already stored: the original record
// when the bytes are identical (an exact retry), ErrEventIDCollision when
// they differ; ok is false when the id is not stored.
func retryOf(t *txn, in appendInput) (store.AppendResult, bool, error) {
	var stored []byte
	err := t.queryRow(selectCanonical, in.ev.ProjectID, in.ev.ID).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.AppendResult{}, false, nil
	case err != nil:
		return store.AppendResult{}, false, err
	case !bytes.Equal(stored, in.canonical):
		return store.AppendResult{}, true, store.ErrEventIDCollision
	}
	res, err := finishRetry(t, in)
	return res, true, err
}

// finishRetry is an exact retry: it resolves this append's share of the
// ready frontier, then reads back the stored record (spec §7: the original
// receipt) and derives the warnings from what is stored.
func finishRetry(t *txn, in appendInput) (store.AppendResult, error) {
	ev := in.ev
	ps, err := t.ws.project(t, ev.ProjectID)
	if err != nil {
		return store.AppendResult{}, err
	}
	if ps.waiting || ps.incomplete {
		if err := reconcileStaged(t, ps, ev.ProjectID, store.FrontierBudget); err != nil {
			return store.AppendResult{}, err
		}
	}
	rec, err := scanRecord(t.queryRow(selectRecord, ev.ProjectID, ev.ID), ev.ProjectID)
	if err != nil {
		return store.AppendResult{}, err
	}
	return warnings(t, in, store.AppendResult{Record: rec})
}

func missingParents(t *txn, projectID, eventID string) ([]string, error) {
	rows, err := t.query(selectMissingParents, projectID, eventID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// warnings adds the POST warnings of spec §9, from facts this transaction
// reads: session forks and a pending lineage.
func warnings(t *txn, in appendInput, res store.AppendResult) (store.AppendResult, error) {
	ev := in.ev
	forks, err := sessionForks(t, ev)
	if err != nil {
		return store.AppendResult{}, err
	}
	if len(forks) > 1 {
		res.Warnings = append(res.Warnings, store.Warning{
			Code:     store.WarnSessionFork,
			Detail:   fmt.Sprintf("%d events share this identity, device, session and session_seq %d", len(forks), ev.SessionSeq),
			EventIDs: forks[:min(len(forks), store.MaxWarningIDs)],
		})
	}
	if res.Record.LineageStatus == correspondence.LineagePending {
		res.Warnings = append(res.Warnings, store.Warning{
			Code:     store.WarnClaimLineagePending,
			Detail:   "the claim's predecessor is not stored yet (or is itself pending); the claim is not active until it is",
			EventIDs: []string{in.node.PredecessorEventID},
		})
	}
	return res, nil
}

// sessionForks lists the ids of the stored events sharing ev's (identity,
// device, session, session_seq), sorted, or nil when ev (already stored by
// this transaction) is alone. An event whose session_seq is above every
// one remembered for its session is alone without a lookup: the common
// case of a session counting up.
func sessionForks(t *txn, ev *correspondence.Event) ([]string, error) {
	k := sessionKey{ev.ProjectID, ev.Sender.IdentityID, ev.Sender.DeviceID, ev.Sender.SessionID}
	max, ok := t.ws.sessionMax(k)
	if ok && ev.SessionSeq > max {
		t.onRelease(func() { t.ws.rememberSession(k, ev.SessionSeq) })
		return nil, nil
	}
	if !ok {
		// ev itself is stored, so the session has a row.
		if err := t.queryRow(selectSessionMax, k.projectID, k.sessionID, k.identityID, k.deviceID).Scan(&max); err != nil {
			return nil, err
		}
		t.onRelease(func() { t.ws.rememberSession(k, max) })
	}
	return sessionTuple(t, ev)
}

// sessionTuple lists the ids of the events sharing ev's (identity, device,
// session, session_seq), sorted; more than one is a session fork (spec §7).
func sessionTuple(t *txn, ev *correspondence.Event) ([]string, error) {
	rows, err := t.query(selectSessionTuple, ev.ProjectID, ev.Sender.IdentityID, ev.Sender.DeviceID,
		ev.Sender.SessionID, ev.SessionSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// lineageRow is one claim_lineage row.
type lineageRow struct {
	node   correspondence.LineageNode
	status correspondence.LineageStatus
	root   string
}

func loadLineage(t *txn, projectID, eventID string) (lineageRow, bool, error) {
	var r lineageRow
	var kind, paths string
	var expires sql.NullString
	err := t.queryRow(selectLineage, projectID, eventID).Scan(&r.node.RepositoryID, &r.node.ThreadID,
		&r.node.ClaimID, &r.node.IdentityID, &kind, &r.node.Generation, &r.node.PredecessorEventID, &paths,
		&expires, &r.status, &r.root)
	if errors.Is(err, sql.ErrNoRows) {
		return lineageRow{}, false, nil
	}
	if err != nil {
		return lineageRow{}, false, err
	}
	r.node.EventID = eventID
	r.node.Kind = correspondence.Kind(kind)
	r.node.ExpiresAt = parseNullTime(expires)
	if err := json.Unmarshal([]byte(paths), &r.node.Paths); err != nil {
		return lineageRow{}, false, fmt.Errorf("lineage paths of %s: %w", eventID, store.ErrUnavailable)
	}
	return r, true, nil
}

// placeClaim decides a newly stored claim event's first lineage status and
// records it (spec §8): claim.open is valid and a tip; a renew/release
// whose predecessor is absent or pending waits for it; otherwise
// correspondence.Successor decides.
func placeClaim(t *txn, in appendInput, seq int64) (correspondence.LineageStatus, error) {
	ev, n := in.ev, in.node
	status, root := correspondence.LineagePending, ""
	if n.Kind == correspondence.KindClaimOpen {
		status, root = correspondence.RootStatus(n), n.IdentityID
	} else {
		var err error
		status, root, err = judge(t, ev.ProjectID, n)
		if err != nil {
			return "", err
		}
	}
	var expires any
	if !n.ExpiresAt.IsZero() {
		expires = correspondence.FormatTimestamp(n.ExpiresAt)
	}
	if _, err := t.exec(insertLineage, ev.ProjectID, ev.ID, seq, n.RepositoryID, n.ThreadID, n.ClaimID,
		n.IdentityID, ev.Sender.DeviceID, ev.Sender.SessionID, string(n.Kind), n.Generation, n.PredecessorEventID,
		in.paths, expires, string(status), root); err != nil {
		return "", err
	}
	switch status {
	case correspondence.LineagePending:
		_, err := t.exec(insertWaiting, ev.ProjectID, n.PredecessorEventID, ev.ID)
		return status, err
	case correspondence.LineageValid:
		return status, becomeTip(t, ev.ProjectID, n, root)
	}
	return status, nil
}

// judge decides a renew/release child from its stored predecessor: pending
// when the predecessor is absent or pending, else Successor's verdict. A
// stored predecessor that is not a claim event makes the child invalid.
func judge(t *txn, projectID string, child correspondence.LineageNode) (correspondence.LineageStatus, string, error) {
	pred, isClaim, err := loadLineage(t, projectID, child.PredecessorEventID)
	if err != nil {
		return "", "", err
	}
	if !isClaim {
		var one int
		err := t.queryRow(eventExists, projectID, child.PredecessorEventID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return correspondence.LineagePending, "", nil
		}
		if err != nil {
			return "", "", err
		}
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
func becomeTip(t *txn, projectID string, n correspondence.LineageNode, root string) error {
	if n.PredecessorEventID != "" {
		if _, err := t.exec(deleteTip, projectID, n.PredecessorEventID); err != nil {
			return err
		}
	}
	_, err := t.exec(insertTip, root, projectID, n.EventID)
	return err
}

// releaseWaitersOf moves the children waiting on eventID to the frontier,
// in event id order.
func releaseWaitersOf(t *txn, projectID, eventID string) error {
	rows, err := t.query(takeWaiters, projectID, eventID)
	if err != nil {
		return err
	}
	var children []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		children = append(children, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	slices.Sort(children)
	for _, id := range children {
		if _, err := t.exec(insertFrontier, projectID, id); err != nil {
			return err
		}
	}
	return nil
}

// reconcile resolves at most budget ready-frontier rows of the project, in
// arrival order, including rows readied along the way; then persists the
// incomplete flag and, when a lineage or tip row changed, the watermark.
// persisted, when known, is the flag as stored: an empty frontier that
// leaves a false flag false writes nothing.
func reconcile(t *txn, projectID string, budget int, persisted *bool) (incomplete bool, err error) {
	changed := false
	for i := range budget {
		var rowID int64
		var eventID string
		err := t.queryRow(selectFrontierHead, projectID).Scan(&rowID, &eventID)
		if errors.Is(err, sql.ErrNoRows) {
			if i == 0 && persisted != nil && !*persisted {
				return false, nil // nothing queued, nothing to record
			}
			break
		}
		if err != nil {
			return false, err
		}
		if _, err := t.exec(deleteFrontierRow, rowID); err != nil {
			return false, err
		}
		c, err := resolveOne(t, projectID, eventID)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	if err := t.queryRow(frontierRemains, projectID).Scan(&incomplete); err != nil {
		return false, err
	}
	if _, err := t.exec(updateLineageFlags, incomplete, changed, projectID); err != nil {
		return false, err
	}
	return incomplete, nil
}

// resolveOne re-judges one frontier child; changed reports a lineage row
// update.
func resolveOne(t *txn, projectID, eventID string) (changed bool, err error) {
	child, ok, err := loadLineage(t, projectID, eventID)
	if err != nil || !ok || child.status != correspondence.LineagePending {
		return false, err
	}
	status, root, err := judge(t, projectID, child.node)
	if err != nil {
		return false, err
	}
	if status == correspondence.LineagePending {
		t.ws.markWaiting(projectID)
		_, err := t.exec(insertWaiting, projectID, child.node.PredecessorEventID, eventID)
		return false, err
	}
	if _, err := t.exec(updateLineage, string(status), root, projectID, eventID); err != nil {
		return false, err
	}
	if status == correspondence.LineageValid {
		if err := becomeTip(t, projectID, child.node, root); err != nil {
			return false, err
		}
	}
	return true, releaseWaitersOf(t, projectID, eventID)
}

// ReconcileLineage resolves at most max frontier rows in a short write
// transaction through the group committer (so it is serialized with the
// project's appends). See store.Log.ReconcileLineage.
func (db *DB) ReconcileLineage(ctx context.Context, projectID string, max int) (bool, error) {
	var incomplete bool
	err := db.submit(ctx, "reconcile lineage", func(t *txn) error {
		if err := t.mustExist(projectExists, projectID); err != nil {
			return err
		}
		ps, err := t.ws.project(t, projectID)
		if err != nil {
			return err
		}
		persisted := ps.incomplete
		incomplete, err = reconcile(t, projectID, max, &persisted)
		if err == nil {
			t.onRelease(func() { ps.incomplete = incomplete })
		}
		return err
	})
	return incomplete, err
}

// LineageWatermark reads the persisted incomplete flag and
// lineage_changed_at. Errors: store.ErrNotFound, store.ErrUnavailable.
func (db *DB) LineageWatermark(ctx context.Context, projectID string) (bool, time.Time, error) {
	var incomplete bool
	var at sql.NullString
	if err := db.rd.QueryRowContext(ctx, selectLineageFlags, projectID).Scan(&incomplete, &at); err != nil {
		return false, time.Time{}, mapErr("lineage watermark", err)
	}
	return incomplete, parseNullTime(at), nil
}

// ClaimTips lists the repository's branch tips by event id.
func (db *DB) ClaimTips(ctx context.Context, projectID, repositoryID string) ([]store.ClaimTip, error) {
	rows, err := db.rd.QueryContext(ctx, selectTips, projectID, repositoryID)
	if err != nil {
		return nil, mapErr("claim tips", err)
	}
	defer rows.Close()
	var tips []store.ClaimTip
	for rows.Next() {
		var t store.ClaimTip
		var kind, paths string
		var expires sql.NullString
		if err := rows.Scan(&t.EventID, &t.ReceivedSeq, &t.RepositoryID, &t.ThreadID, &t.ClaimID, &kind,
			&t.Generation, &t.RootIdentityID, &t.DeviceID, &t.SessionID, &paths, &expires); err != nil {
			return nil, mapErr("claim tips", err)
		}
		t.Kind = correspondence.Kind(kind)
		t.ExpiresAt = parseNullTime(expires)
		if err := json.Unmarshal([]byte(paths), &t.Paths); err != nil {
			return nil, fmt.Errorf("claim tips: paths: %w", store.ErrUnavailable)
		}
		tips = append(tips, t)
	}
	return tips, mapErr("claim tips", rows.Err())
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
	var rows *sql.Rows
	var err error
	if q.ThreadID == "" {
		rows, err = db.rd.QueryContext(ctx, selectRecordsAfter, q.ProjectID, q.RepositoryID, q.After, limit+1)
	} else {
		rows, err = db.rd.QueryContext(ctx, selectThreadRecordsAfter, q.ProjectID, q.RepositoryID, q.ThreadID, q.After, limit+1)
	}
	if err != nil {
		return store.EventPage{}, mapErr("events", err)
	}
	defer rows.Close()
	var page store.EventPage
	for rows.Next() {
		if len(page.Records) == limit {
			page.HasMore = true
			break
		}
		rec, err := scanRecord(rows, q.ProjectID)
		if err != nil {
			return store.EventPage{}, mapErr("events", err)
		}
		page.Records = append(page.Records, rec)
	}
	if err := rows.Err(); err != nil {
		return store.EventPage{}, mapErr("events", err)
	}
	return page, nil
}

// Head returns the newest received_seq and its received_at. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) Head(ctx context.Context, projectID string) (int64, time.Time, error) {
	var seq int64
	var at sql.NullString
	if err := db.rd.QueryRowContext(ctx, selectHead, projectID).Scan(&seq, &at); err != nil {
		return 0, time.Time{}, mapErr("head", err)
	}
	return seq, parseNullTime(at), nil
}

type scanner interface{ Scan(dest ...any) error }

func scanRecord(s scanner, projectID string) (store.Record, error) {
	rec := store.Record{ProjectID: projectID}
	var kind, at, status, missing string
	if err := s.Scan(&rec.EventID, &rec.RepositoryID, &rec.ThreadID, &kind, &rec.Event, &rec.ReceivedSeq, &at,
		&status, &missing); err != nil {
		return store.Record{}, err
	}
	rec.Kind = correspondence.Kind(kind)
	rec.ReceivedAt = parseTime(at)
	rec.LineageStatus = correspondence.LineageStatus(status)
	if err := json.Unmarshal([]byte(missing), &rec.MissingParents); err != nil {
		return store.Record{}, fmt.Errorf("missing parents: %w", store.ErrUnavailable)
	}
	if len(rec.MissingParents) == 0 {
		rec.MissingParents = []string{}
	}
	slices.Sort(rec.MissingParents) // already sorted by SQLite's BINARY collation; kept as a guarantee
	return rec, nil
}
