package store

import (
	"context"
	"time"
)

// Cosignature is a witness's C2SP tlog-cosignature/v1 on one of this
// relay's own checkpoints (spec/tlog.md §Checkpoints: the relay serves its
// checkpoint with the cosignatures it holds).
type Cosignature struct {
	ProjectID string
	// KeyName is the witness key's name, as in its signature line.
	KeyName string
	// Size and Root are the cosigned checkpoint's tree size and root hash.
	Size int64
	Root [32]byte
	// Body is the cosigned checkpoint's note text (origin, size and root
	// lines, each ending in a newline): the checkpoint served carries this
	// cosignature only while its text is exactly Body.
	Body []byte
	// Line is the signature line, "— <name> <base64>\n".
	Line string
	// SignedAt is the cosignature's own timestamp (whole seconds).
	SignedAt time.Time
	// StoredAt is when this relay stored it (millisecond precision).
	StoredAt time.Time
}

// WitnessState is what one peer link, as a witness of the remote's log for
// its project, last verified and cosigned (C2SP tlog-witness: the latest
// checkpoint a witness cosigned per origin), and the keys it pinned.
type WitnessState struct {
	ProjectID string
	PeerID    string
	// LogKey is the remote's log verifier key (note "name+hash+key") the
	// link verified the checkpoint with: pinned when first seen.
	LogKey string
	// WitnessKey is the remote's own witness verifier key (cosignature/v1,
	// "name+hash+key"), as its profile named it: this relay accepts
	// cosignatures on its own checkpoints by that key. "" when the remote
	// names none.
	WitnessKey string
	// Size, Root and Checkpoint: the latest remote checkpoint verified
	// consistent and cosigned (Checkpoint is the note with this relay's
	// cosignature appended, as submitted). Size 0 with a nil Checkpoint:
	// none yet.
	Size       int64
	Root       [32]byte
	Checkpoint []byte
	// CosignedAt is when it was cosigned (millisecond precision).
	CosignedAt time.Time
}

// SplitView kinds.
const (
	// SplitViewFork: two checkpoints of one origin and size with
	// different roots.
	SplitViewFork = "fork"
	// SplitViewInconsistent: a checkpoint that no valid consistency proof
	// joins to the one cosigned before it.
	SplitViewInconsistent = "inconsistent"
)

// SplitView is evidence that a peer's log showed two histories: both
// notes, each signed by the remote's log key. A peer link that holds one
// is stopped (it mirrors nothing more) until the operator removes it. The
// evidence outlives the link.
type SplitView struct {
	ID        int64 // assigned by the store, ascending
	ProjectID string
	PeerID    string
	Kind      string // SplitViewFork or SplitViewInconsistent
	Origin    string
	// Cosigned is the checkpoint the link had cosigned; Seen the
	// conflicting one the remote served after it.
	Cosigned, Seen []byte
	// LinkRemoved: the peer link is no longer configured.
	LinkRemoved bool
	DetectedAt  time.Time // millisecond precision
}

// Cosignatures keeps the cosignatures on this relay's checkpoints, the
// relay's own witness key, and each peer link's witness state and
// split-view evidence.
type Cosignatures interface {
	// WitnessKey returns the relay's witness signer key (note
	// "PRIVATE+KEY+…"), calling create and storing its result the first
	// time. Race-safe across processes: every caller gets the one key
	// stored first. Errors: create's, ErrUnavailable.
	WitnessKey(ctx context.Context, create func() (skey string, err error)) (string, error)

	// SaveCosignature keeps c as the cosignature of its witness key name on
	// its project, replacing one on a size no larger (a cosignature on a
	// smaller size than the one held changes nothing; stored is false).
	// StoredAt is set by the store. Errors: ErrNotFound (no such
	// project), ErrUnavailable.
	SaveCosignature(ctx context.Context, c Cosignature) (stored bool, err error)
	// Cosignatures lists the cosignatures held on projectID's checkpoints,
	// by ascending key name. Errors: ErrUnavailable.
	Cosignatures(ctx context.Context, projectID string) ([]Cosignature, error)

	// WitnessState reads peer link peerID's witness state. Errors:
	// ErrNotFound (none yet, or no such link), ErrUnavailable.
	WitnessState(ctx context.Context, projectID, peerID string) (WitnessState, error)
	// SaveWitnessState stores w as its link's witness state only while the
	// stored state's Size is oldSize (none stored counts as 0): the check
	// and the write are one step, so two writers never roll a state back
	// (C2SP tlog-witness). ok is false when the stored size differs.
	// Errors: ErrNotFound (no such link), ErrUnavailable.
	SaveWitnessState(ctx context.Context, w WitnessState, oldSize int64) (ok bool, err error)
	// PeerWitnessKeys lists the witness keys the peer links of projectID
	// learnt from their remotes (WitnessState.WitnessKey, non-empty), by
	// peer id. Errors: ErrUnavailable.
	PeerWitnessKeys(ctx context.Context, projectID string) (map[string]string, error)

	// SaveSplitView stores e (ID, LinkRemoved and DetectedAt are set by the
	// store) and returns it as stored. Errors: ErrUnavailable.
	SaveSplitView(ctx context.Context, e SplitView) (SplitView, error)
	// SplitViews lists the evidence of projectID's links ("" every
	// project's), ascending ID, with whether each link is still
	// configured. Errors: ErrUnavailable.
	SplitViews(ctx context.Context, projectID string) ([]SplitView, error)
}
