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

// LogWitnessPeerPrefix starts the PeerID of the split-view evidence an
// external witness's refusal of this relay's own checkpoint leaves
// (package logwitness): the prefix and the witness's key name. Such
// evidence has no peer link: LinkRemoved is always true for it.
const LogWitnessPeerPrefix = "log-witness:"

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

// LogWitnessState is what this relay knows of one external C2SP
// tlog-witness (configured with `serve --log-witness`) for one project's
// log: the size the witness last cosigned (from its 200, or its 409
// text/x.tlog.size answer), the last cosignature this relay got from it
// and the last failure. It is what the next add-checkpoint's "old" line
// and consistency proof start from, so a restart or another process does
// not start over from size 0.
type LogWitnessState struct {
	ProjectID string
	// Witness is the witness's verifier key ("name+hash+key",
	// cosignature/v1) as configured.
	Witness string
	// KnownSize is the size of the latest checkpoint the witness cosigned
	// for the project's origin, as far as this relay knows (0: none).
	KnownSize int64
	// CosignedSize and CosignedAt: the latest cosignature this relay
	// received from the witness (zero time: never).
	CosignedSize int64
	CosignedAt   time.Time
	// LastError is the last failure ("" after a success), at ErrorAt.
	LastError string
	ErrorAt   time.Time
	// UpdatedAt is set by the store (millisecond precision).
	UpdatedAt time.Time
}

// WitnessedLog is the latest checkpoint this relay cosigned, as a C2SP
// tlog-witness, for one log it witnesses (an origin an operator listed).
type WitnessedLog struct {
	Origin string
	Size   int64
	Root   [32]byte
	// Checkpoint is the note as cosigned: the log's signatures as
	// submitted, then this relay's cosignature line (witness.Add).
	Checkpoint []byte
	UpdatedAt  time.Time // set by the store (millisecond precision)
}

// LogWitnesses keeps the relay's witnessing state in the C2SP witness
// ecosystem: its own logs' external witnesses, and the logs it witnesses.
type LogWitnesses interface {
	// LogWitnessStates lists the external witnesses' states of projectID
	// ("" every project's), by project and witness. Errors:
	// ErrUnavailable.
	LogWitnessStates(ctx context.Context, projectID string) ([]LogWitnessState, error)
	// SaveLogWitnessState stores s (replacing the state of its project and
	// witness; UpdatedAt is set by the store). Errors: ErrNotFound (no
	// such project), ErrUnavailable.
	SaveLogWitnessState(ctx context.Context, s LogWitnessState) error

	// WitnessedLog reads the latest checkpoint cosigned for origin.
	// Errors: ErrNotFound (none yet: size 0), ErrUnavailable.
	WitnessedLog(ctx context.Context, origin string) (WitnessedLog, error)
	// SaveWitnessedLog stores l only while the stored size is oldSize
	// (none stored counts as 0) and l.Size ≥ oldSize: the check and the
	// write are one step (C2SP tlog-witness: "checking the old size …
	// and persisting the new checkpoint must be performed atomically"),
	// so two processes never cosign two trees of one size after it. ok is
	// false when the stored size differs. Errors: ErrUnavailable.
	SaveWitnessedLog(ctx context.Context, l WitnessedLog, oldSize int64) (ok bool, err error)
}
