package store

import (
	"context"
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
}

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
	// MatrixSentParts returns the stored parts of eventIDs in roomID.
	MatrixSentParts(ctx context.Context, roomID string, eventIDs []string) ([]MatrixSent, error)

	// EnqueueMatrixSubmissions stores subs that are not stored yet (by
	// Matrix event id) and, when syncKey is not "", sets the sync token
	// of syncKey to since, in one transaction: a bot restarted after it
	// neither loses nor re-reads a submission.
	EnqueueMatrixSubmissions(ctx context.Context, subs []MatrixSubmission, syncKey, since string) error
	// MatrixSyncToken returns the stored sync token of syncKey ("" when none).
	MatrixSyncToken(ctx context.Context, syncKey string) (string, error)
	// PendingMatrixSubmissions lists, oldest first, at most limit
	// submissions not yet answered.
	PendingMatrixSubmissions(ctx context.Context, limit int) ([]MatrixSubmission, error)
	// SetMatrixSubmissionOutcome stores the outcome of a pending
	// submission unless one is stored; it returns the stored one.
	SetMatrixSubmissionOutcome(ctx context.Context, matrixEventID string, outcome []byte) ([]byte, error)
	// CompleteMatrixSubmission marks a submission answered by the reply
	// replyEventID. Errors: ErrNotFound.
	CompleteMatrixSubmission(ctx context.Context, matrixEventID, replyEventID string) error
}
