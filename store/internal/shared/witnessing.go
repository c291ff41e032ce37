package shared

import (
	"context"
	"time"

	"github.com/acrelay/acrelay/store"
)

// WitnessingSQL is one dialect's statements for the relay's witnessing
// (store.Cosignatures and store.LogWitnesses). Arguments are in the
// order given, as positional parameters.
type WitnessingSQL struct {
	// SelectWitnessKey → skey; InsertWitnessKey (skey) stores it unless
	// one is stored (the create-once witness key).
	SelectWitnessKey, InsertWitnessKey string
	// UpsertCosignature (project, key name, size, root, body, line,
	// signed_at, stored_at): a row for an existing project whose held
	// cosignature of that name is of no larger size; Cosignatures
	// (project) → (project_id, key_name, tree_size, root, body, line,
	// signed_at, stored_at) by key name; ProjectExists (project) → 1.
	UpsertCosignature, Cosignatures, ProjectExists string

	// WitnessState (project, peer) → (project_id, peer_id, log_key,
	// witness_key, tree_size, root, checkpoint, cosigned_at).
	// InsertWitnessState (project, peer, log key, witness key, size,
	// root, checkpoint, cosigned_at) writes a link's state while none or
	// one of size 0 is stored; UpdateWitnessState (the same, old size)
	// while the stored size is the old size. PeerExists (project, peer)
	// → 1; PeerWitnessKeys (project) → (peer_id, witness_key), non-empty
	// keys.
	WitnessState, InsertWitnessState, UpdateWitnessState, PeerExists, PeerWitnessKeys string
	// InsertSplitView (project, peer, kind, origin, cosigned, seen,
	// detected_at) → (id, whether the link is gone); SplitViews (project
	// or "") → (id, project_id, peer_id, kind, origin, cosigned, seen,
	// detected_at, link removed) by id.
	InsertSplitView, SplitViews string

	// LogWitnessStates (project or "") → (project_id, witness,
	// known_size, cosigned_size, cosigned_at, last_error, error_at,
	// updated_at) by project and witness; UpsertLogWitnessState (the
	// same columns in that order; a NULL time is none) for an existing
	// project only.
	LogWitnessStates, UpsertLogWitnessState string
	// WitnessedLog (origin) → (origin, tree_size, root, checkpoint,
	// updated_at); InsertWitnessedLog (origin, size, root, checkpoint,
	// updated_at) unless one is stored; UpdateWitnessedLog (the same,
	// old size) while the stored size is the old size.
	WitnessedLog, InsertWitnessedLog, UpdateWitnessedLog string
}

// Witnessing is store.Cosignatures and store.LogWitnesses over one
// dialect's SQL: a dialect's DB embeds it (NewWitnessing), so its own
// file holds the statements only.
type Witnessing struct {
	e   Engine
	sql *WitnessingSQL
}

// NewWitnessing returns the witnessing methods over e and sql.
func NewWitnessing(e Engine, sql *WitnessingSQL) Witnessing { return Witnessing{e: e, sql: sql} }

// ms is a stored time: UTC, millisecond precision; optMS the same, NULL
// for the zero time.
func (f Witnessing) ms(t time.Time) any { return f.e.TimeArg(t.UTC().Truncate(time.Millisecond)) }
func (f Witnessing) optMS(t time.Time) any {
	return f.e.NullTimeArg(t.UTC().Truncate(time.Millisecond))
}

// WitnessKey returns the witness signer key, created once.
func (f Witnessing) WitnessKey(ctx context.Context, create func() (string, error)) (string, error) {
	return f.e.CreateOnce(ctx, "witness key", f.sql.SelectWitnessKey, f.sql.InsertWitnessKey, create)
}

// SaveCosignature keeps c unless one of a larger size is held. Errors:
// store.ErrNotFound (no such project), store.ErrUnavailable.
func (f Witnessing) SaveCosignature(ctx context.Context, c store.Cosignature) (bool, error) {
	const op = "save cosignature"
	n, err := f.e.ExecN(ctx, op, f.sql.UpsertCosignature, c.ProjectID, c.KeyName, c.Size, c.Root[:], c.Body, c.Line,
		f.ms(c.SignedAt), f.ms(time.Now()))
	if err != nil || n == 1 {
		return n == 1, err
	}
	if err := MustExist(ctx, f.e.Read, f.sql.ProjectExists, c.ProjectID); err != nil {
		return false, f.e.MapErr(op, err)
	}
	return false, nil
}

// Cosignatures lists projectID's held cosignatures.
func (f Witnessing) Cosignatures(ctx context.Context, projectID string) ([]store.Cosignature, error) {
	return List(ctx, f.e, "cosignatures", func(row Row) (store.Cosignature, error) {
		var c store.Cosignature
		var root []byte
		var signed, stored Time
		err := row.Scan(&c.ProjectID, &c.KeyName, &c.Size, &root, &c.Body, &c.Line, &signed, &stored)
		copy(c.Root[:], root)
		c.SignedAt, c.StoredAt = signed.T, stored.T
		return c, err
	}, f.sql.Cosignatures, projectID)
}

// WitnessState reads a link's witness state. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (f Witnessing) WitnessState(ctx context.Context, projectID, peerID string) (store.WitnessState, error) {
	var w store.WitnessState
	var root []byte
	var at Time
	err := f.e.Read.QueryRow(ctx, f.sql.WitnessState, projectID, peerID).Scan(&w.ProjectID, &w.PeerID, &w.LogKey, &w.WitnessKey,
		&w.Size, &root, &w.Checkpoint, &at)
	if err != nil {
		return store.WitnessState{}, f.e.MapErr("witness state", err)
	}
	copy(w.Root[:], root)
	w.CosignedAt = at.T
	return w, nil
}

// SaveWitnessState stores w while the stored size is oldSize (none
// counts as 0). Errors: store.ErrNotFound (no such link),
// store.ErrUnavailable.
func (f Witnessing) SaveWitnessState(ctx context.Context, w store.WitnessState, oldSize int64) (bool, error) {
	const op = "save witness state"
	args := []any{w.ProjectID, w.PeerID, w.LogKey, w.WitnessKey, w.Size, w.Root[:], w.Checkpoint, f.ms(w.CosignedAt)}
	q := f.sql.InsertWitnessState
	if oldSize != 0 {
		q, args = f.sql.UpdateWitnessState, append(args, oldSize)
	}
	n, err := f.e.ExecN(ctx, op, q, args...)
	if err != nil || n == 1 {
		return n == 1, err
	}
	if err := MustExist(ctx, f.e.Read, f.sql.PeerExists, w.ProjectID, w.PeerID); err != nil {
		return false, f.e.MapErr(op, err)
	}
	return false, nil
}

// PeerWitnessKeys maps projectID's links to the witness keys they learnt.
func (f Witnessing) PeerWitnessKeys(ctx context.Context, projectID string) (map[string]string, error) {
	type kv struct{ peer, key string }
	rows, err := List(ctx, f.e, "peer witness keys", func(row Row) (kv, error) {
		var v kv
		return v, row.Scan(&v.peer, &v.key)
	}, f.sql.PeerWitnessKeys, projectID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rows))
	for _, v := range rows {
		out[v.peer] = v.key
	}
	return out, nil
}

// SaveSplitView stores e and returns it as stored.
func (f Witnessing) SaveSplitView(ctx context.Context, e store.SplitView) (store.SplitView, error) {
	e.DetectedAt = time.Now().UTC().Truncate(time.Millisecond)
	if err := f.e.Write.QueryRow(ctx, f.sql.InsertSplitView, e.ProjectID, e.PeerID, e.Kind, e.Origin, e.Cosigned, e.Seen,
		f.ms(e.DetectedAt)).Scan(&e.ID, &e.LinkRemoved); err != nil {
		return store.SplitView{}, f.e.MapErr("save split view", err)
	}
	return e, nil
}

// SplitViews lists the evidence of projectID's links ("" every
// project's).
func (f Witnessing) SplitViews(ctx context.Context, projectID string) ([]store.SplitView, error) {
	return List(ctx, f.e, "split views", func(row Row) (store.SplitView, error) {
		var e store.SplitView
		var at Time
		err := row.Scan(&e.ID, &e.ProjectID, &e.PeerID, &e.Kind, &e.Origin, &e.Cosigned, &e.Seen, &at, &e.LinkRemoved)
		e.DetectedAt = at.T
		return e, err
	}, f.sql.SplitViews, projectID)
}

// LogWitnessStates lists external witnesses' states of projectID (""
// every project's).
func (f Witnessing) LogWitnessStates(ctx context.Context, projectID string) ([]store.LogWitnessState, error) {
	return List(ctx, f.e, "log witness states", func(row Row) (store.LogWitnessState, error) {
		var s store.LogWitnessState
		var cosignedAt, errorAt, updatedAt Time
		err := row.Scan(&s.ProjectID, &s.Witness, &s.KnownSize, &s.CosignedSize, &cosignedAt, &s.LastError, &errorAt, &updatedAt)
		s.CosignedAt, s.ErrorAt, s.UpdatedAt = cosignedAt.T, errorAt.T, updatedAt.T
		return s, err
	}, f.sql.LogWitnessStates, projectID)
}

// SaveLogWitnessState stores s over the state of its project and
// witness. Errors: store.ErrNotFound (no such project),
// store.ErrUnavailable.
func (f Witnessing) SaveLogWitnessState(ctx context.Context, s store.LogWitnessState) error {
	return f.e.execOne(ctx, "save log witness state", f.sql.UpsertLogWitnessState, s.ProjectID, s.Witness, s.KnownSize, s.CosignedSize,
		f.optMS(s.CosignedAt), s.LastError, f.optMS(s.ErrorAt), f.ms(time.Now()))
}

// WitnessedLog reads the latest checkpoint cosigned for origin, on the
// writer (a compare-and-set follows). Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (f Witnessing) WitnessedLog(ctx context.Context, origin string) (store.WitnessedLog, error) {
	var l store.WitnessedLog
	var root []byte
	var at Time
	if err := f.e.Write.QueryRow(ctx, f.sql.WitnessedLog, origin).Scan(&l.Origin, &l.Size, &root, &l.Checkpoint, &at); err != nil {
		return store.WitnessedLog{}, f.e.MapErr("witnessed log", err)
	}
	copy(l.Root[:], root)
	l.UpdatedAt = at.T
	return l, nil
}

// SaveWitnessedLog stores l while the stored size is oldSize (none
// counts as 0) and l.Size is no smaller: one statement each, so the
// check and the write are atomic across processes (C2SP tlog-witness).
func (f Witnessing) SaveWitnessedLog(ctx context.Context, l store.WitnessedLog, oldSize int64) (bool, error) {
	const op = "save witnessed log"
	if l.Size < oldSize {
		return false, nil
	}
	now := f.ms(time.Now())
	if oldSize == 0 {
		n, err := f.e.ExecN(ctx, op, f.sql.InsertWitnessedLog, l.Origin, l.Size, l.Root[:], l.Checkpoint, now)
		if err != nil || n == 1 {
			return n == 1, err
		}
	}
	n, err := f.e.ExecN(ctx, op, f.sql.UpdateWitnessedLog, l.Origin, l.Size, l.Root[:], l.Checkpoint, now, oldSize)
	return n == 1, err
}
