package store

import (
	"context"
	"errors"
	"time"

	"github.com/acrelay/acrelay/correspondence"
)

// SourceLocal is the Source of keys and identities created on this relay;
// anything else is the id of the peer link whose registry they came from.
const SourceLocal = ""

// ErrKeyConflict: a peer's registry names a signing key id this relay
// holds with another identity or public key (ImportKey).
var ErrKeyConflict = errors.New("signing key id held with other facts")

// RegistryKey is one signing key of a project with its identity, as the
// key registry export lists it (GET /v1/correspondence/keys) and a peer
// link imports it. Change times are the database clock of the relay that
// made the change (for an imported key: the remote's, as it listed them);
// zero when the change has not happened.
type RegistryKey struct {
	SigningKeyID string
	IdentityID   string
	PublicKey    string // 43 characters of unpadded base64url
	Status       string // StatusActive or StatusRevoked
	CreatedAt    time.Time
	RevokedAt    time.Time
	Source       string // SourceLocal or a peer id

	DisplayName       string
	IdentityStatus    string // StatusActive or StatusInactive
	IdentityCreatedAt time.Time
	DeactivatedAt     time.Time
	IdentitySource    string
}

// ForeignAppend is one record of AppendPageAt: a parsed, verified event,
// its canonical bytes and the remote's receipt time of it (At, non-zero).
type ForeignAppend struct {
	Event     *correspondence.Event
	Canonical []byte
	At        time.Time
}

// AppendOutcome is one record's verdict of AppendPageAt: what AppendAt
// would have returned for it.
type AppendOutcome struct {
	Result AppendResult
	Err    error
}

// Peer is one federation peer link of a project (spec/federation.md): this
// relay mirrors the project from RemoteURL, all of it or only
// RepositoryID. Token is the remote's read capability, a secret: it is
// stored so the link can use it and never listed.
type Peer struct {
	ID           string
	ProjectID    string
	RemoteURL    string // the remote relay's public URL, no trailing slash
	Token        string
	RepositoryID string // "" for the whole project
	CreatedAt    time.Time
}

// Federation is what peer links need beyond the Log and the Couriers (the
// remote cursor is a courier cursor of courier "federation", target the
// peer id, fenced by the link's lease).
type Federation interface {
	// AppendAt is Log.Append for a foreign record (spec/federation.md
	// "Revoked keys"): instead of requiring the sender identity and key to
	// be active now, it requires each to be active now or to have stopped
	// being active (revoked_at, deactivated_at) strictly after at, the
	// remote's receipt time of the record. A revocation without a time
	// (made before the times were kept) refuses. Errors as Append.
	AppendAt(ctx context.Context, ev *correspondence.Event, canonical []byte, at time.Time) (AppendResult, error)

	// AppendPageAt is AppendAt for a page of foreign records (a backfill
	// page, a push): they are appended in page order, so this relay's
	// received_seq follows the remote's, in one transaction where the
	// dialect batches appends (one group commit). Each record gets
	// AppendAt's checks and its own verdict: a refused record is rolled
	// back alone and the others are stored. Outcomes are in page order,
	// one per record; a failure of the whole transaction
	// (ErrUnavailable) or ctx ending is the error of every record it
	// reaches.
	AppendPageAt(ctx context.Context, page []ForeignAppend) []AppendOutcome

	// ProjectEvents reads one page of a project's records of every
	// repository in ascending received_seq, strictly after after, at most
	// limit (clamped to 1–200), with the diagnostics Events attaches.
	// Errors: ErrUnavailable.
	ProjectEvents(ctx context.Context, projectID string, after int64, limit int) (EventPage, error)

	// RegistryKeys pages a project's signing keys of every status, with
	// their identities, in ascending key id strictly after afterKeyID, at
	// most limit. Errors: ErrUnavailable.
	RegistryKeys(ctx context.Context, projectID, afterKeyID string, limit int) ([]RegistryKey, error)

	// ImportKey brings one key of a peer's registry into the project, with
	// source as its Source, in one transaction: an unknown identity or key
	// is created with the remote's status and change times; a key or
	// identity of this source or another peer (never a local one) that is
	// active here and revoked or deactivated there becomes so here, with
	// the earlier of the two change times. Revocation is one-way: nothing
	// is re-activated. changed reports whether anything was written.
	// Errors: ErrKeyConflict (the key id is held with another identity or
	// public key),
	// ErrNotFound (unknown project), ErrUnavailable.
	ImportKey(ctx context.Context, projectID, source string, k RegistryKey) (changed bool, err error)

	// CreatePeer stores p (ID, ProjectID, RemoteURL, Token required) and
	// returns it with CreatedAt. Errors: ErrExists (the id, or a link of
	// the project to the same remote and repository), ErrNotFound
	// (unknown project), ErrUnavailable.
	CreatePeer(ctx context.Context, p Peer) (Peer, error)
	// Peers lists the project's links ("" for every project's) in
	// ascending (project, peer id). Errors: ErrUnavailable.
	Peers(ctx context.Context, projectID string) ([]Peer, error)
	// Peer reads one link of the project. Errors: ErrNotFound,
	// ErrUnavailable.
	Peer(ctx context.Context, projectID, peerID string) (Peer, error)
	// RemovePeer deletes one link (its imported keys stay: they verify
	// history) and its refusals. Errors: ErrNotFound, ErrUnavailable.
	RemovePeer(ctx context.Context, projectID, peerID string) error

	Refusals
}
