package store

import (
	"context"
	"errors"
	"time"

	"github.com/acrelay/acrelay/correspondence"
)

// Sentinel errors. Wrap with %w; test with errors.Is.
var (
	ErrNotFound         = errors.New("not found")
	ErrExists           = errors.New("already exists")
	ErrUnavailable      = errors.New("store unavailable")
	ErrEventIDCollision = errors.New("event id stored with other bytes")
	// ErrSenderNotActive: the sender identity is not active in the project,
	// or the signing key is not an active key of that identity (spec §3).
	ErrSenderNotActive = errors.New("sender or signing key not active")
	// ErrHandoffExists: the project holds a handoff contract with this id
	// whose first version differs (spec/handoff-contract-1.md "HTTP").
	ErrHandoffExists = errors.New("handoff contract exists with other content")
	// ErrIdempotencyKeyReused: the project holds a handoff contract with
	// this idempotencyKey whose first version differs.
	ErrIdempotencyKeyReused = errors.New("idempotency key used for other content")
	// ErrVersionConflict: a new handoff version does not follow the
	// current one (another writer moved the contract first).
	ErrVersionConflict = errors.New("handoff version is not the next one")
)

// Registry statuses (spec §10).
const (
	StatusActive   = "active"
	StatusInactive = "inactive"
	StatusRevoked  = "revoked"
)

// Token scopes (spec §10). Scopes are independent.
const (
	ScopeRead   = "read"
	ScopeAppend = "append"
	ScopeAdmin  = "admin"
)

// Project is one independent event stream.
type Project struct {
	ID        string
	CreatedAt time.Time
}

// Identity is an accountable participant of one project.
type Identity struct {
	ID          string
	ProjectID   string
	DisplayName string
	Status      string // StatusActive or StatusInactive
	CreatedAt   time.Time
}

// SigningKey is an Ed25519 public key of one identity.
type SigningKey struct {
	ID         string
	IdentityID string
	ProjectID  string
	PublicKey  string // 43 characters of unpadded base64url
	Status     string // StatusActive or StatusRevoked
	CreatedAt  time.Time
}

// Token is a project bearer token. Only the SHA-256 of the secret token
// string is stored; the token itself is shown once, at creation.
type Token struct {
	ID        string
	ProjectID string
	Scopes    []string
	Hash      []byte // SHA-256 of the whole token string
	Revoked   bool
	CreatedAt time.Time
}

// HealthChecker is a store that can tell more about its health than
// whether it answers a read: Health is nil while it can keep its promises
// (the SQLite store: also while its WAL checkpoints succeed). The relay's
// GET /healthz answers 503 otherwise.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// Registry holds projects, identities, keys and token hashes.
// Create* return ErrExists for a duplicate id; Get*, Deactivate*, Revoke*
// return ErrNotFound for an unknown id.
//
// Identity and signing-key ids are scoped to their project: the same
// client-chosen UUID may exist in two projects as two unrelated records,
// and nothing about one project's ids is observable from another (spec
// §11: no existence oracle through 409s, no squatting of ids).
type Registry interface {
	CreateProject(ctx context.Context, id string) (Project, error)
	GetProject(ctx context.Context, id string) (Project, error)
	CountProjects(ctx context.Context) (int, error)

	CreateIdentity(ctx context.Context, id Identity) (Identity, error)
	GetIdentity(ctx context.Context, projectID, id string) (Identity, error)
	DeactivateIdentity(ctx context.Context, projectID, id string) (Identity, error)
	// ActiveIdentityIDs pages the active identity ids of a project in
	// ascending order, strictly after afterID ("" for the first page).
	ActiveIdentityIDs(ctx context.Context, projectID, afterID string, limit int) ([]string, error)
	// ListIdentities pages a project's identities of every status in
	// ascending id order, strictly after afterID, at most limit.
	ListIdentities(ctx context.Context, projectID, afterID string, limit int) ([]Identity, error)

	AddKey(ctx context.Context, k SigningKey) (SigningKey, error)
	GetKey(ctx context.Context, projectID, id string) (SigningKey, error)
	RevokeKey(ctx context.Context, projectID, id string) (SigningKey, error)
	// ListKeys pages the signing keys of every status of one identity of a
	// project in ascending id order, strictly after afterID, at most limit
	// (none for an unknown identity).
	ListKeys(ctx context.Context, projectID, identityID, afterID string, limit int) ([]SigningKey, error)

	CreateToken(ctx context.Context, t Token) (Token, error)
	GetToken(ctx context.Context, id string) (Token, error)
	RevokeToken(ctx context.Context, id string) error
	// ListTokens pages a project's tokens, revoked ones included, in
	// ascending id order, strictly after afterID, at most limit. Hash is
	// left empty: listings never carry it.
	ListTokens(ctx context.Context, projectID, afterID string, limit int) ([]Token, error)

	// Setting and PutSetting keep small server-wide values (such as the
	// operator token's hash). Setting returns ErrNotFound when unset.
	Setting(ctx context.Context, name string) (string, error)
	PutSetting(ctx context.Context, name, value string) error
}

// Record is one stored event with its receipt (spec §7) and the dynamic
// diagnostics reads attach (spec §9). Event holds the RFC 8785 bytes of the
// signed event exactly as stored.
type Record struct {
	ProjectID      string
	EventID        string
	RepositoryID   string
	ThreadID       string
	Kind           correspondence.Kind
	Event          []byte
	ReceivedSeq    int64
	ReceivedAt     time.Time // database clock, millisecond precision, UTC
	MissingParents []string  // parents not stored in the project, sorted
	LineageStatus  correspondence.LineageStatus
}

// FrontierBudget is how many ready-frontier rows each append, exact retry,
// claims read and voice read resolves (spec §8).
const FrontierBudget = 32

// POST warning codes (spec §9) and the bound on event ids in one warning.
const (
	WarnSessionFork         = "session_fork"
	WarnClaimLineagePending = "claim_lineage_pending"
	MaxWarningIDs           = 16
)

// Warning is one POST warning (spec §9): codes session_fork and
// claim_lineage_pending.
type Warning struct {
	Code     string
	Detail   string
	EventIDs []string
	Paths    []string
}

// AppendResult is the outcome of Append. Created is false for an exact
// retry, whose Record carries the original receipt.
type AppendResult struct {
	Record   Record
	Created  bool
	Warnings []Warning
}

// EventQuery selects records of one repository of one project in ascending
// received_seq, strictly after After, at most Limit (1–200).
type EventQuery struct {
	ProjectID    string
	RepositoryID string
	ThreadID     string // "" for all threads
	After        int64
	Limit        int
}

// EventPage is one page of records; HasMore is true when later matching
// records exist.
type EventPage struct {
	Records []Record
	HasMore bool
}

// Log is the append-only event log of every project.
type Log interface {
	// Append stores ev (already parsed, validated and signature-verified by
	// the caller) in one transaction: sender and key re-checked active, the
	// event row and its receipt (received_seq from the database, strictly
	// increasing per project; received_at from the database clock),
	// parent bookkeeping, lineage status and tips, at most 32 ready-frontier
	// rows (spec §8), and warnings. canonical is ev's RFC 8785 bytes.
	// An event id already stored with identical bytes returns the original
	// record with Created false. Errors: ErrSenderNotActive,
	// ErrEventIDCollision, ErrNotFound (unknown project), ErrUnavailable.
	Append(ctx context.Context, ev *correspondence.Event, canonical []byte) (AppendResult, error)

	// Events reads one page (spec §9). Errors: ErrUnavailable.
	Events(ctx context.Context, q EventQuery) (EventPage, error)

	// Head returns the project's newest received_seq and its received_at;
	// seq 0 and the zero time for an empty stream. Errors: ErrNotFound
	// (unknown project), ErrUnavailable.
	Head(ctx context.Context, projectID string) (seq int64, at time.Time, err error)

	// ReconcileLineage resolves at most max rows of the project's durable
	// ready frontier (spec §8) in one short write transaction serialized
	// with the project's appends, and returns the persisted
	// lineage_incomplete flag as left by that transaction (true while
	// frontier rows remain). Claims and voice reads call it before they
	// read the projection. Errors: ErrNotFound (unknown project),
	// ErrUnavailable.
	ReconcileLineage(ctx context.Context, projectID string, max int) (incomplete bool, err error)

	// LineageWatermark returns the project's persisted lineage_incomplete
	// flag and lineage_changed_at: the database time at which bounded
	// reconciliation last changed a lineage or tip row (the zero time when
	// it never has). Errors: ErrNotFound, ErrUnavailable.
	LineageWatermark(ctx context.Context, projectID string) (incomplete bool, changedAt time.Time, err error)

	// ClaimTips returns the branch tips of one repository (spec §8): valid
	// claim events without a valid direct child, expired and released ones
	// included, sorted by event id. Errors: ErrUnavailable.
	ClaimTips(ctx context.Context, projectID, repositoryID string) ([]ClaimTip, error)

	// ClaimsSnapshot reads the active-claims projection of one repository
	// (spec §8, §9) from one consistent read snapshot, without doing lineage
	// work (callers run ReconcileLineage first). Candidates are branch tips
	// of kind claim.open or claim.renew whose expires_at is after the
	// database clock, with q's thread and path filters applied in the scan,
	// BEFORE a sentinel of ClaimCandidateSentinel+1 rows; the first
	// MaxActiveClaims in (expires_at, event_id) order are returned, each
	// with at most MaxCompetitors competing tips (a sentinel row more sets
	// Truncated). Errors: ErrNotFound (unknown project), ErrUnavailable.
	ClaimsSnapshot(ctx context.Context, q ClaimsQuery) (ClaimsSnapshot, error)

	// VoiceSnapshot reads the voice parts of spec §9 from one consistent
	// read snapshot: the ClaimsSnapshot of (repository, thread), the newest
	// VoiceRecent records newest first (one more sets RecentTruncated), and
	// the session forks of the tuples in that window, each found by one
	// per-tuple lookup of at most MaxForkEvents+1 rows (never by grouping
	// all history). A part that fails after the snapshot began is reported
	// in Unavailable and left empty; the other parts are still returned.
	// Errors (total failure): ErrNotFound (unknown project), ErrUnavailable.
	VoiceSnapshot(ctx context.Context, q VoiceQuery) (VoiceSnapshot, error)
}

// Projection bounds of spec §8 and §9.
const (
	ClaimCandidateSentinel = 512 // candidates read before the cap; one more sets Truncated
	MaxActiveClaims        = 128 // active rows per claims or voice answer
	MaxCompetitors         = 16  // competing_event_ids per row; a 17th sets Truncated
	VoiceRecent            = 50  // recent_events of a voice answer
	MaxForkEvents          = 16  // event_ids per session fork; a 17th sets Truncated
)

// ClaimsQuery selects active claims of one repository of one project.
type ClaimsQuery struct {
	ProjectID    string
	RepositoryID string
	ThreadID     string // "" for every thread
	Path         string // "" for every path; else claims with a path overlapping it (spec §4)
}

// ActiveClaim is one active row of the projection (spec §8): an open or
// renew branch tip not yet expired, its event's scope, and the other tips
// of its (repository, claim_id), expired and released ones included.
type ActiveClaim struct {
	ClaimTip
	// Scope is the RFC 8785 bytes of the event's whole scope object
	// {base_revision, branch, paths}.
	Scope []byte
	// CompetingEventIDs are the other tips of the claim, sorted, at most
	// MaxCompetitors; non-empty means conflicted.
	CompetingEventIDs []string
}

// ClaimsSnapshot is one consistent read of a repository's projection.
// Times are the database clock, millisecond precision, UTC; zero when
// absent.
type ClaimsSnapshot struct {
	Head   int64     // the project's newest received_seq; 0 for an empty stream
	HeadAt time.Time // its received_at
	Now    time.Time // the database clock the expiry filter used
	// LineageIncomplete and LineageChangedAt are the persisted flag and
	// watermark (see LineageWatermark).
	LineageIncomplete bool
	LineageChangedAt  time.Time
	// LastExpiredAt is the newest expires_at among the repository's open
	// and renew tips that is not after Now (spec §8 evaluated_at (c)).
	LastExpiredAt time.Time
	Claims        []ActiveClaim
	// Truncated: more than ClaimCandidateSentinel candidates, more than
	// MaxActiveClaims, or more than MaxCompetitors competitors of a row.
	// It does not include LineageIncomplete.
	Truncated bool
}

// VoiceQuery selects the voice snapshot of one repository (spec §9).
type VoiceQuery struct {
	ProjectID    string
	RepositoryID string
	ThreadID     string // "" for every thread
}

// SessionFork is two or more events sharing one (identity, device,
// session, session_seq) (spec §7). EventIDs are sorted, at most
// MaxForkEvents; Truncated when more exist.
type SessionFork struct {
	IdentityID string
	DeviceID   string
	SessionID  string
	SessionSeq int64
	EventIDs   []string
	Truncated  bool
}

// Voice parts that may be reported in VoiceSnapshot.Unavailable.
const (
	VoicePartClaims       = "active_claims"
	VoicePartSessionForks = "session_forks"
)

// VoiceSnapshot is one consistent read of the voice parts (spec §9).
type VoiceSnapshot struct {
	ClaimsSnapshot
	Recent          []Record // newest first, at most VoiceRecent
	RecentTruncated bool     // older records of the selection exist
	// SessionForks of the tuples seen in Recent, in order of first
	// appearance there; at most one row per tuple.
	SessionForks []SessionFork
	Unavailable  []string // parts that failed: VoicePart*
}

// ClaimTip is one branch tip of the claim-lineage projection (spec §8).
type ClaimTip struct {
	EventID        string
	ReceivedSeq    int64
	RepositoryID   string
	ThreadID       string
	ClaimID        string
	Kind           correspondence.Kind // claim.open, claim.renew or claim.release
	Generation     int64
	RootIdentityID string // the identity of the lineage root (the owner)
	DeviceID       string
	SessionID      string
	Paths          []string  // scope.paths as signed
	ExpiresAt      time.Time // zero for claim.release
}

// Lease is a held lease of (Courier, ProjectID): the one relay process
// that delivers that courier's records of the project. Fence grows every
// time the lease is taken afresh (a new holder, or a lapsed lease taken
// again), never on a renewal; every cursor write names it, so a process
// whose lease lapsed can no longer move a cursor (ErrLeaseLost).
type Lease struct {
	Courier   string
	ProjectID string
	Holder    string
	Fence     int64
}

// LeaseState is one stored lease row as LeaseStates reads it, without
// taking it: who holds (or last held) the lease of (courier, ProjectID),
// under which fence, and how long it stays live.
type LeaseState struct {
	ProjectID string
	Holder    string
	Fence     int64
	// ExpiresIn is how long the lease stays live after the read, by the
	// database clock, millisecond precision; 0 when it has expired or was
	// released (anyone may take it).
	ExpiresIn time.Duration
}

// ErrLeaseLost: the lease a courier write names is no longer live with
// that holder and fence (it expired by the database clock, was released,
// or another process took it).
var ErrLeaseLost = errors.New("courier lease lost")

// TargetState is the durable delivery state of one courier target (a
// WebSub subscription, a Matrix room, an export file) of one project.
type TargetState struct {
	Target string
	// ReceivedSeq is the cursor: every record up to it was delivered.
	ReceivedSeq int64
	// Failures counts consecutive failed deliveries since the last
	// success; 0 when healthy.
	Failures int
	// RetryIn is how long until the next attempt is due, by the database
	// clock when the state was read; 0 when due now.
	RetryIn time.Duration
	// FailingSince is the database time of the first failure of the
	// current run of failures; zero when healthy.
	FailingSince time.Time
	// LastError is the courier's short description of the last failure
	// (never a secret or a body); "" when healthy.
	LastError string
}

// CursorAdvance is one target's new cursor (AdvanceCursors).
type CursorAdvance struct {
	Target      string
	ReceivedSeq int64
}

// Couriers keeps what couriers (export, WebSub, Matrix, federation) need
// to deliver each project's records at least once, in order, with stable
// ids, across several relay processes (DESIGN.md "Couriers"): a fenced
// lease per (courier, project) naming the one process that delivers, and
// per (courier, project, target) a cursor and durable backoff state.
//
// Lease expiry is decided by the database clock alone; relay clocks are
// never compared. Idle cost: renewing every lease a holder has is one
// write transaction, whatever the number of projects.
type Couriers interface {
	// AcquireLeases takes, for holder, the leases of (courier, p) for each
	// p of projectIDs that is free, expired by the database clock or
	// already holder's, until ttl (≥ 1ms) after the database clock, in one
	// write transaction, and returns every lease of projectIDs that holder
	// now holds (in projectIDs order). Unknown projects are skipped; the
	// project id "" names a relay-wide lease (a job with one holder for
	// the whole relay, such as the Matrix bot's /sync) and needs no
	// project. A lease live with another holder is left alone without being locked
	// or written (it is filtered out by a read first), so a keeper that
	// asks for leases held elsewhere costs a read, not a write per row.
	// Errors: ErrUnavailable.
	AcquireLeases(ctx context.Context, courier, holder string, projectIDs []string, ttl time.Duration) ([]Lease, error)

	// LeaseStates reads the lease rows of (courier, p) for each p of
	// projectIDs that has one, sorted by project id, taking no lock and
	// writing nothing: a keeper reads first and takes only the leases
	// that are free or expired (lease package). A project without a row
	// is absent (free). Errors: ErrUnavailable.
	LeaseStates(ctx context.Context, courier string, projectIDs []string) ([]LeaseState, error)

	// ReclaimLeases takes every live lease of courier that holder holds
	// under a new fence (fence + 1) until ttl (≥ 1ms) after the database
	// clock, in one write transaction, and returns them sorted by project
	// id. A process restarted with its predecessor's holder identity calls
	// it first: it resumes at once instead of waiting out its own dead
	// leases, and the new fence refuses any write the dead process still
	// had in flight (ErrLeaseLost). Errors: ErrUnavailable.
	ReclaimLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]Lease, error)

	// RenewLeases extends every live lease of courier that holder holds to
	// ttl after the database clock, in one write transaction, and returns
	// them sorted by project id; a lease that lapsed is not renewed (take
	// it again with AcquireLeases, under a new fence). Errors:
	// ErrUnavailable.
	RenewLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]Lease, error)

	// ReleaseLeases ends holder's leases of courier for projectIDs so
	// another process may take them at once; it skips leases holder does
	// not hold. Errors: ErrUnavailable.
	ReleaseLeases(ctx context.Context, courier, holder string, projectIDs []string) error

	// TargetStates returns the stored state of every target of (courier,
	// project), sorted by target. Targets never written are absent (their
	// state is the zero TargetState). Errors: ErrUnavailable.
	TargetStates(ctx context.Context, courier, projectID string) ([]TargetState, error)

	// AdvanceCursor moves target's cursor to seq (≥ 0) unless it is
	// already at or beyond it (a cursor never moves backwards) and clears
	// its failures, only while lease is live with its holder and fence.
	// Errors: ErrLeaseLost, ErrUnavailable.
	AdvanceCursor(ctx context.Context, lease Lease, target string, seq int64) error

	// AdvanceCursors is AdvanceCursor for several targets of lease's
	// project in one write transaction (the runner commits the cursors of
	// deliveries that finish together at once: one sync, not one per
	// delivery). A target listed twice takes its highest seq. Errors:
	// ErrLeaseLost (nothing is written), ErrUnavailable.
	AdvanceCursors(ctx context.Context, lease Lease, advances []CursorAdvance) error

	// RecordFailure counts one more failed delivery to target, due again
	// retryIn (≥ 0) after the database clock, with a short description
	// (at most 200 bytes are kept), only while lease is live. It returns
	// the target's state after the write. Errors: ErrLeaseLost,
	// ErrUnavailable.
	RecordFailure(ctx context.Context, lease Lease, target string, retryIn time.Duration, lastError string) (TargetState, error)

	// ForgetTarget deletes target's cursor and backoff state (a target that
	// is gone for good, such as a WebSub callback that answered 410).
	// Errors: ErrUnavailable.
	ForgetTarget(ctx context.Context, courier, projectID, target string) error
}

// Feed is what couriers read: every project, and each project's records
// across all repositories in receipt order.
type Feed interface {
	// ProjectIDs pages project ids in ascending order strictly after
	// afterID ("" for the first page). Errors: ErrUnavailable.
	ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)

	// RecordsAfter returns at most limit records of the project with
	// received_seq > after, in ascending received_seq, all repositories.
	// Only the immutable fields (event, receipt, ids, kind) are filled.
	// Errors: ErrUnavailable.
	RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]Record, error)
}

// HandoffVersion is one stored version of a handoff contract
// (spec/handoff-contract-1.md). Versions of a contract are append-only and
// numbered 1, 2, … within (ProjectID, HandoffID); the current version is
// the highest. Contract holds the RFC 8785 bytes of the normalized
// contract (handoff.Contract.Canonical); State, AssigneeID and
// IdempotencyKey repeat members of it for filtering and uniqueness.
type HandoffVersion struct {
	ProjectID      string
	HandoffID      string
	Version        int64
	Contract       []byte
	State          string
	AssigneeID     string
	IdempotencyKey string
	CreatedAt      time.Time // database clock when this version was stored, millisecond precision, UTC
}

// HandoffQuery selects the current versions of a project's contracts,
// newest first by creation of the contract (database clock, then handoff
// id descending), strictly after the contract After ("" for the first
// page), at most Limit (1–200).
type HandoffQuery struct {
	ProjectID  string
	State      string // "" for every state
	AssigneeID string // "" for every assignee
	After      string // a handoff id of the project: the last one of the previous page
	Limit      int
}

// HandoffPage is one page of current versions; HasMore is true when later
// matching contracts exist.
type HandoffPage struct {
	Versions []HandoffVersion
	HasMore  bool
}

// MaxHandoffEvents bounds the event ids HandoffEvents returns.
const MaxHandoffEvents = 256

// Handoffs stores handoff contracts per project as append-only versions
// (spec/handoff-contract-1.md "HTTP"). The store compares bytes and
// version numbers only; validation and the lifecycle belong to the caller.
type Handoffs interface {
	// CreateHandoff stores v (Version must be 1) as a new contract unless
	// the project already holds it. An idempotent replay (a contract with
	// v.IdempotencyKey whose version 1 has exactly v.Contract) returns the
	// current version of that contract with created false. Errors:
	// ErrIdempotencyKeyReused (the key names a contract with other version-1
	// bytes; checked first), ErrHandoffExists (v.HandoffID exists in the
	// project under another key), ErrNotFound (unknown project),
	// ErrUnavailable.
	CreateHandoff(ctx context.Context, v HandoffVersion) (current HandoffVersion, created bool, err error)

	// AppendHandoffVersion stores v as the next version of an existing
	// contract: v.Version must be exactly the current version + 1, checked
	// in the same transaction (optimistic concurrency). It returns v with
	// CreatedAt set. Errors: ErrVersionConflict, ErrNotFound (no such
	// contract in the project), ErrUnavailable.
	AppendHandoffVersion(ctx context.Context, v HandoffVersion) (HandoffVersion, error)

	// Handoff returns the current version. Errors: ErrNotFound (no such
	// contract in the project), ErrUnavailable.
	Handoff(ctx context.Context, projectID, handoffID string) (HandoffVersion, error)

	// HandoffVersions pages the versions of one contract in ascending
	// order, strictly after afterVersion, at most limit (1–200); hasMore is
	// true when later versions exist. Errors: ErrNotFound (no such contract
	// in the project), ErrUnavailable.
	HandoffVersions(ctx context.Context, projectID, handoffID string, afterVersion int64, limit int) (versions []HandoffVersion, hasMore bool, err error)

	// Handoffs pages current versions (see HandoffQuery). Errors:
	// ErrNotFound (q.After is not a contract of the project),
	// ErrUnavailable.
	Handoffs(ctx context.Context, q HandoffQuery) (HandoffPage, error)

	// HandoffEvents returns the ids of the project's correspondence events
	// of kind handoff whose body.handoff_id is handoffID, in received_seq
	// order, at most MaxHandoffEvents; truncated is true when more exist.
	// The contract need not exist: Append indexes such events whatever the
	// id names. Errors: ErrUnavailable.
	HandoffEvents(ctx context.Context, projectID, handoffID string) (ids []string, truncated bool, err error)
}

// Store is everything a relay process needs.
type Store interface {
	Registry
	Log
	Couriers
	Feed
	Tree
	Handoffs
	Advances
	WebSub
	WebSubLimits
	WebSubScans
	Visibility
	FeedTokens
	Archives
	Matrix
	Federation
	PeerSubscriptions
	UISessions
	Cosignatures
	LogWitnesses
	Close() error
}
