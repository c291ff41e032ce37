package store

import (
	"context"
	"database/sql"
	"time"
)

// MatrixBinding binds a project (or one of its repositories) to one Matrix
// room (spec/matrix.md "Decisions"): the Matrix courier sends the
// project's records there and takes signed submissions from it.
type MatrixBinding struct {
	ID           string // binding_id, a lowercase UUID
	ProjectID    string
	RepositoryID string // "" binds every repository of the project
	RoomID       string // "!opaque:server"
	CreatedAt    time.Time
	// Encrypted is set by the binder when it saw the room is end-to-end
	// encrypted (m.room.encryption); not stored.
	Encrypted bool
}

// Parts of a record in a room: the custom record event and the m.notice
// summary that carries the same record.
const (
	MatrixPartRecord = "record"
	MatrixPartNotice = "notice"
)

// MatrixSent says that one part of a record reached a room as the Matrix
// event MatrixEventID.
type MatrixSent struct {
	RoomID        string
	EventID       string // the correspondence event_id
	Part          string // MatrixPartRecord or MatrixPartNotice
	MatrixEventID string
}

// MatrixSubmission is a signed event a room member submitted
// (io.github.acrelay.correspondence.submit), queued durably by its Matrix
// event id until the relay has answered it in the room.
type MatrixSubmission struct {
	MatrixEventID string
	RoomID        string
	Sender        string // the Matrix user; it gains no authority
	Event         []byte // content.event as sent, untrusted
	// Outcome is the answer once decided (the receipt or the error code,
	// as JSON), nil before: a re-run after a crash replies the same.
	Outcome    []byte
	ReceivedAt time.Time

	// The retry state, kept in the store so that any process can take a
	// submission up and one room that refuses replies stalls no other.
	Attempts      int       // attempts claimed so far (ClaimMatrixSubmissions counts each)
	NextAttemptAt time.Time // not claimed again before this
	LastError     string    // why the last attempt failed, short (no bodies)
	// Final is "" while pending, else MatrixSubmissionReplied or
	// MatrixSubmissionGaveUp; FinishedAt is when it became final.
	Final        string
	ReplyEventID string
	FinishedAt   time.Time
}

// Final outcomes of a submission (MatrixSubmission.Final).
const (
	// MatrixSubmissionReplied: the relay's reply is in the room.
	MatrixSubmissionReplied = "replied"
	// MatrixSubmissionGaveUp: no reply could be sent (the room refused
	// it, or the attempts ran out); the outcome itself is still stored.
	MatrixSubmissionGaveUp = "gave_up"
)

// Matrix is the Matrix courier's durable state. Bindings are per project;
// sent parts make the room see each record exactly once; submissions are
// de-duplicated by Matrix event id and answered exactly once.
type Matrix interface {
	// CreateMatrixBinding stores b (CreatedAt is set by the store).
	// Errors: ErrNotFound for an unknown project, ErrExists for a taken id.
	CreateMatrixBinding(ctx context.Context, b MatrixBinding) (MatrixBinding, error)
	// MatrixBindings lists a project's bindings by id.
	MatrixBindings(ctx context.Context, projectID string) ([]MatrixBinding, error)
	// MatrixBinding returns one binding. Errors: ErrNotFound.
	MatrixBinding(ctx context.Context, projectID, id string) (MatrixBinding, error)
	// MatrixRoomBindings lists the bindings of a room, of every project.
	MatrixRoomBindings(ctx context.Context, roomID string) ([]MatrixBinding, error)
	// DeleteMatrixBinding removes a binding. Errors: ErrNotFound.
	DeleteMatrixBinding(ctx context.Context, projectID, id string) error
	// MatrixBoundProjects lists the projects with at least one binding.
	MatrixBoundProjects(ctx context.Context) ([]string, error)

	// RecordMatrixSent stores s; storing the same (room, event, part)
	// again keeps the first Matrix event id.
	RecordMatrixSent(ctx context.Context, s MatrixSent) error
	// RecordMatrixSentBound is RecordMatrixSent that also reports whether
	// the binding (projectID, bindingID) still exists, in the same
	// statement: the courier learns of an unbinding before its next
	// record without a binding read per record.
	RecordMatrixSentBound(ctx context.Context, s MatrixSent, projectID, bindingID string) (bool, error)
	// MatrixSentParts returns the stored parts of eventIDs in roomID.
	MatrixSentParts(ctx context.Context, roomID string, eventIDs []string) ([]MatrixSent, error)

	// EnqueueMatrixSubmissions stores subs that are not stored yet (by
	// Matrix event id) and, when syncKey is not "", sets the sync token
	// of syncKey to since, in one transaction: a bot restarted after it
	// neither loses nor re-reads a submission.
	EnqueueMatrixSubmissions(ctx context.Context, subs []MatrixSubmission, syncKey, since string) error
	// MatrixSyncToken returns the stored sync token of syncKey ("" when none).
	MatrixSyncToken(ctx context.Context, syncKey string) (string, error)
	// ClaimMatrixSubmissions takes at most limit pending submissions whose
	// next attempt is due (NextAttemptAt ≤ the store's now), earliest due
	// first, counts an attempt on each and sets its NextAttemptAt to now +
	// hold, all in one statement: another claim (of this or any process)
	// skips them until then, and a claimant that dies leaves them due again
	// after hold. The returned submissions carry the counted Attempts.
	ClaimMatrixSubmissions(ctx context.Context, limit int, hold time.Duration) ([]MatrixSubmission, error)
	// RetryMatrixSubmission sets a pending submission's next attempt to
	// the store's now + wait and remembers lastError. Errors: ErrNotFound
	// (unknown or final).
	RetryMatrixSubmission(ctx context.Context, matrixEventID string, wait time.Duration, lastError string) error
	// GiveUpMatrixSubmission makes a pending submission final without a
	// reply (MatrixSubmissionGaveUp), remembering lastError. Errors:
	// ErrNotFound (unknown or final).
	GiveUpMatrixSubmission(ctx context.Context, matrixEventID, lastError string) error
	// MatrixSubmission returns one submission with its retry state.
	// Errors: ErrNotFound.
	MatrixSubmission(ctx context.Context, matrixEventID string) (MatrixSubmission, error)
	// DeleteFinishedMatrixSubmissions deletes at most limit final
	// submissions that became final before before, oldest first, and
	// returns how many it deleted (housekeeping calls it until it returns
	// fewer than limit). A homeserver that replays a deleted submission
	// gets it answered again, with the same outcome: ingest is idempotent.
	DeleteFinishedMatrixSubmissions(ctx context.Context, before time.Time, limit int) (int, error)
	// SetMatrixSubmissionOutcome stores the outcome of a pending
	// submission unless one is stored; it returns the stored one.
	SetMatrixSubmissionOutcome(ctx context.Context, matrixEventID string, outcome []byte) ([]byte, error)
	// CompleteMatrixSubmission makes a submission final as answered by the
	// reply replyEventID (MatrixSubmissionReplied). Errors: ErrNotFound.
	CompleteMatrixSubmission(ctx context.Context, matrixEventID, replyEventID string) error
}

// Names of the Matrix crypto secrets (MatrixCrypto.MatrixCryptoSecret).
const (
	// MatrixPickleKey encrypts the relay device's olm/megolm state at
	// rest (mautrix's pickle key): 32 random bytes, base64.
	MatrixPickleKey = "pickle_key"
	// MatrixRecoveryKey is the cross-signing recovery key (SSSS).
	MatrixRecoveryKey = "recovery_key"
	// MatrixAppserviceDevice is the application-service mode's device:
	// {"device_id", "access_token"} from m.login.application_service.
	MatrixAppserviceDevice = "appservice_device"
)

// MatrixCrypto is where the Matrix courier keeps its end-to-end
// encryption state (issue 31): secrets of the deployment, and a
// database/sql handle on the relay's own database for mautrix's crypto
// store (its crypto_* and mx_* tables, created and upgraded by mautrix's
// dbutil). Both engines implement it; it is not part of Store so that
// stores that wrap another need not.
type MatrixCrypto interface {
	// MatrixCryptoSecret returns the secret name, created once with create
	// (the first process to store it wins; every process reads the stored
	// one). It is never logged. Errors: ErrUnavailable, create's error.
	MatrixCryptoSecret(ctx context.Context, name string, create func() (string, error)) (string, error)
	// MatrixCryptoDB opens a handle on the relay's own database for
	// mautrix's dbutil and returns it with its dbutil dialect ("sqlite" or
	// "pgx"); the caller closes it.
	MatrixCryptoDB(ctx context.Context) (db *sql.DB, dialect string, err error)
}
