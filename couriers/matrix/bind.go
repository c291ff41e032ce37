package matrix

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/matrix-org/gomatrixserverlib/spec"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Errors of Binder.Bind: a bad request, never the homeserver's fault.
var (
	ErrRoomIDInvalid       = errors.New("room_id is not a Matrix room id (!opaque:server)")
	ErrUserIDInvalid       = errors.New("invite holds a string that is not a Matrix user id (@local:server)")
	ErrRepositoryIDInvalid = errors.New("repository_id is not a valid opaque id")
	ErrRoomChoice          = errors.New(`give exactly one of room_id and "create": true; invite goes with create`)
	// ErrHomeserver wraps a homeserver failure while creating the room.
	ErrHomeserver = errors.New("the homeserver did not create the room")
)

// BindRequest is a binding to make: an existing room, or a new private
// room with invitations.
type BindRequest struct {
	RepositoryID string
	RoomID       string
	Create       bool
	Invite       []string
	// Encrypted, with Create, creates the room end-to-end encrypted
	// (m.room.encryption megolm in its initial state, as Element does for
	// private rooms). Errors: ErrEncryptionUnavailable without CanEncrypt.
	Encrypted bool
}

// BindStore is what a Binder writes.
type BindStore interface {
	CreateMatrixBinding(ctx context.Context, b store.MatrixBinding) (store.MatrixBinding, error)
	DeleteMatrixBinding(ctx context.Context, projectID, id string) error
}

// Binder makes and removes bindings, and tells the running courier
// (Refresh, may be nil) so no restart is needed. Client may be nil when
// rooms are never created here.
type Binder struct {
	Store   BindStore
	Client  *mautrix.Client
	Refresh func(projectID string)
	// CanEncrypt: the relay takes part in encrypted rooms (a goolm build
	// in bot mode); false: an encrypted room is refused
	// (ErrEncryptionUnavailable) instead of bound.
	CanEncrypt bool
	// Device, when set, names the relay's Matrix device (its user and
	// device id; "" while it has none) for Describe: the bot's access
	// token's, or the application service's stored one.
	Device func(ctx context.Context) (id.UserID, id.DeviceID, error)
	// Appservice: the relay runs as an application service, whose device
	// is cross-signed only where the homeserver takes the first
	// cross-signing keys without a password (Describe's detail says so).
	Appservice bool
	// Leases, when set, reads the lease over the device (CryptoLease)
	// for Describe.
	Leases LeaseReader
}

// ValidateRoomID checks a room id with gomatrixserverlib's spec.NewRoomID.
func ValidateRoomID(s string) error {
	if _, err := spec.NewRoomID(s); err != nil {
		return ErrRoomIDInvalid
	}
	return nil
}

// Bind validates req, creates the room when asked, and stores the
// binding. Errors: the Err* above, store.ErrNotFound for an unknown
// project.
func (b *Binder) Bind(ctx context.Context, projectID string, req BindRequest) (store.MatrixBinding, error) {
	if req.Create == (req.RoomID != "") || (!req.Create && len(req.Invite) > 0) {
		return store.MatrixBinding{}, ErrRoomChoice
	}
	if req.RepositoryID != "" && !correspondence.ValidOpaqueID(req.RepositoryID) {
		return store.MatrixBinding{}, ErrRepositoryIDInvalid
	}
	invite := make([]id.UserID, 0, len(req.Invite))
	for _, u := range req.Invite {
		if _, err := spec.NewUserID(u, true); err != nil {
			return store.MatrixBinding{}, ErrUserIDInvalid
		}
		invite = append(invite, id.UserID(u))
	}
	if req.Encrypted && !req.Create {
		return store.MatrixBinding{}, ErrRoomChoice
	}
	if req.Encrypted && !b.CanEncrypt {
		return store.MatrixBinding{}, ErrEncryptionUnavailable
	}
	room, encrypted := req.RoomID, req.Encrypted
	if req.Create {
		if b.Client == nil {
			return store.MatrixBinding{}, fmt.Errorf("%w: no Matrix client configured", ErrHomeserver)
		}
		create := CreateRoom
		if req.Encrypted {
			create = CreateEncryptedRoom
		}
		r, err := create(ctx, b.Client, "acrelay "+projectID, invite)
		if err != nil {
			return store.MatrixBinding{}, fmt.Errorf("%w: %w", ErrHomeserver, err)
		}
		room = r.String()
	} else if err := ValidateRoomID(room); err != nil {
		return store.MatrixBinding{}, err
	} else if b.Client != nil {
		// An encrypted room is seen now when the relay's user is in it (an
		// invited user cannot read its state: the courier checks again
		// before every delivery and refuses it then).
		if enc, err := RoomEncrypted(ctx, b.Client, id.RoomID(room)); err == nil && enc {
			if !b.CanEncrypt {
				return store.MatrixBinding{}, ErrEncryptionUnavailable
			}
			encrypted = true
		}
	}
	out, err := b.Store.CreateMatrixBinding(ctx, store.MatrixBinding{ID: uuid.NewString(), ProjectID: projectID, RepositoryID: req.RepositoryID, RoomID: room})
	if err != nil {
		return store.MatrixBinding{}, err
	}
	out.Encrypted = encrypted
	if b.Refresh != nil {
		b.Refresh(projectID)
	}
	return out, nil
}

// Unbind removes a binding; nothing more reaches its room. Errors:
// store.ErrNotFound.
func (b *Binder) Unbind(ctx context.Context, projectID, bindingID string) error {
	if err := b.Store.DeleteMatrixBinding(ctx, projectID, bindingID); err != nil {
		return err
	}
	if b.Refresh != nil {
		b.Refresh(projectID)
	}
	return nil
}
