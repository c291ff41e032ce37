package matrix

import (
	"context"
	"errors"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// CryptoLease is the relay-wide lease over the relay's Matrix device: the
// one process holding it drives the device's olm machine (cmd/acrelay
// serve); the bindings' e2ee status reads it (E2EEStatus.LeaseHeld).
const CryptoLease = "matrix-crypto"

// BindingJSON is one binding as POST and GET …/matrix/bindings answer it
// and `acrelay matrix bind` / `acrelay matrix bindings --json` print it:
// one shape everywhere (docs/matrix.md "Encrypted rooms").
type BindingJSON struct {
	BindingID    string `json:"binding_id"`
	ProjectID    string `json:"project_id"`
	RepositoryID string `json:"repository_id,omitempty"`
	RoomID       string `json:"room_id"`
	CreatedAt    string `json:"created_at"` // RFC 3339
	// Encrypted: the room carries m.room.encryption; omitted unless it
	// does (omitzero: json v2's omitempty would keep a false).
	Encrypted bool `json:"encrypted,omitzero"`
	// E2EE is the relay's part in the room's encryption: set when the room
	// is encrypted, or when the relay cannot tell (its user is not in the
	// room yet, the homeserver did not answer: Detail says so).
	E2EE *E2EEStatus `json:"e2ee,omitempty"`
}

// E2EEStatus says whether the relay takes part in a bound room's
// end-to-end encryption, and why not.
type E2EEStatus struct {
	// Available: this relay has Matrix encryption (a build with -tags
	// goolm, a store that keeps the crypto state).
	Available bool `json:"available"`
	// DeviceID is the relay's device: the bot's access token's, or the
	// application service's own (omitted while there is none).
	DeviceID string `json:"device_id,omitempty"`
	// DeviceKeys: the homeserver has the device's published keys, so
	// members' clients can share room keys with it.
	DeviceKeys bool `json:"device_keys"`
	// LeaseHeld: a process of the relay holds the lease over the device
	// (CryptoLease) now, and so drives it.
	LeaseHeld bool `json:"lease_held"`
	// CrossSigned: the device carries the signature of the relay user's
	// self-signing key (clients that exclude unverified devices share
	// keys with it).
	CrossSigned bool `json:"cross_signed"`
	// TakesPart is Available, DeviceKeys and LeaseHeld together: the
	// relay encrypts what it sends to the room and decrypts what it reads.
	TakesPart bool `json:"takes_part"`
	// Detail is one line for an operator: what is missing, first thing
	// first; never a key.
	Detail string `json:"detail"`
}

// Details of E2EEStatus.
const (
	DetailTakesPart      = "the relay takes part: it encrypts records, notices and replies and decrypts submissions"
	DetailNotCrossSigned = "the relay takes part; its device is not cross-signed, so clients that exclude unverified devices send it no room keys"
	// DetailNotCrossSignedAppservice is DetailNotCrossSigned in
	// application-service mode, which has no password for the
	// homeserver's user-interactive auth.
	DetailNotCrossSignedAppservice = DetailNotCrossSigned + "; " + whyNotCrossSignedAppservice
	DetailNoEncryption             = "this relay has no Matrix encryption (build with -tags goolm): nothing is sent to the room, never plaintext"
	DetailNoDevice                 = "the relay has no Matrix device yet (serve makes it within seconds of its start)"
	DetailNoDeviceKeys             = "the relay's device has published no keys yet: members' clients cannot share room keys with it"
	DetailLeaseFree                = "no relay process drives the device now (lease matrix-crypto is free): nothing is sent or read until one does"
	DetailRoomUnknown              = "cannot read the room's m.room.encryption (the relay's user is not in the room, or the homeserver did not answer)"
)

// describeTimeout bounds what Describe asks of the homeserver, in all.
const describeTimeout = 10 * time.Second

// LeaseReader reads lease rows without taking them (store.Couriers).
type LeaseReader interface {
	LeaseStates(ctx context.Context, courier string, projectIDs []string) ([]store.LeaseState, error)
}

// BindingOut is b as the bindings route shows it, with no encryption
// status (see Binder.Describe).
func BindingOut(b store.MatrixBinding) BindingJSON {
	return BindingJSON{BindingID: b.ID, ProjectID: b.ProjectID, RepositoryID: b.RepositoryID, RoomID: b.RoomID,
		CreatedAt: correspondence.FormatTimestamp(b.CreatedAt), Encrypted: b.Encrypted}
}

// Describe returns bs as the bindings route shows them, each with its
// room's end-to-end encryption: whether the room is encrypted (its
// m.room.encryption state, asked of the homeserver once per room unless
// the binding already says so) and, for an encrypted room or one whose
// state cannot be read, the relay's part in it (E2EEStatus: the device's
// keys and cross-signing asked once for all rooms, the lease read from the
// store). Without a Client nothing is asked and bs are shown as stored.
// It never fails: what cannot be read is said in Detail. The homeserver
// is given describeTimeout (10 s) in all.
func (b *Binder) Describe(ctx context.Context, bs []store.MatrixBinding) []BindingJSON {
	out := make([]BindingJSON, 0, len(bs))
	for _, bd := range bs {
		out = append(out, BindingOut(bd))
	}
	if b.Client == nil || len(bs) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	type known struct{ encrypted, ok bool }
	rooms := map[string]known{}
	var status *E2EEStatus
	for i := range out {
		k, seen := rooms[out[i].RoomID]
		if !seen {
			k = known{encrypted: out[i].Encrypted, ok: out[i].Encrypted}
			if !k.ok {
				enc, err := RoomEncrypted(ctx, b.Client, id.RoomID(out[i].RoomID))
				k = known{encrypted: enc, ok: err == nil}
			}
			rooms[out[i].RoomID] = k
		}
		if k.ok && !k.encrypted {
			continue
		}
		if status == nil {
			s := b.e2eeStatus(ctx)
			status = &s
		}
		s := *status
		if !k.ok {
			s.Detail = DetailRoomUnknown + "; " + s.Detail
		}
		out[i].Encrypted, out[i].E2EE = k.encrypted, &s
	}
	return out
}

// e2eeStatus is the relay's part in encrypted rooms, one for all rooms.
func (b *Binder) e2eeStatus(ctx context.Context) E2EEStatus {
	s := E2EEStatus{Available: b.CanEncrypt}
	if !s.Available {
		s.Detail = DetailNoEncryption
		return s
	}
	var devErr error
	if b.Device != nil {
		user, dev, err := b.Device(ctx)
		if err == nil && dev != "" {
			s.DeviceID = dev.String()
			s.DeviceKeys, s.CrossSigned, devErr = deviceKeys(ctx, b.Client, user, dev)
		} else if err != nil {
			devErr = err
		}
	}
	if b.Leases != nil {
		if ls, err := b.Leases.LeaseStates(ctx, CryptoLease, []string{""}); err == nil {
			for _, l := range ls {
				s.LeaseHeld = s.LeaseHeld || l.ExpiresIn > 0
			}
		}
	}
	s.TakesPart = s.DeviceKeys && s.LeaseHeld
	switch {
	case devErr != nil:
		s.Detail = "cannot query the relay device's keys: " + shortError(devErr)
	case s.DeviceID == "":
		s.Detail = DetailNoDevice
	case !s.DeviceKeys:
		s.Detail = DetailNoDeviceKeys
	case !s.LeaseHeld:
		s.Detail = DetailLeaseFree
	case !s.CrossSigned && b.Appservice:
		s.Detail = DetailNotCrossSignedAppservice
	case !s.CrossSigned:
		s.Detail = DetailNotCrossSigned
	default:
		s.Detail = DetailTakesPart
	}
	return s
}

// deviceKeys asks the homeserver whether user's device dev has published
// its keys, and whether it carries the signature of the user's
// self-signing key. Errors: the homeserver's.
func deviceKeys(ctx context.Context, cli *mautrix.Client, user id.UserID, dev id.DeviceID) (published, crossSigned bool, err error) {
	if dev == "" {
		return false, false, errors.New("no device")
	}
	resp, err := cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{user: {dev}}})
	if err != nil {
		return false, false, err
	}
	keys, ok := resp.DeviceKeys[user][dev]
	if !ok || len(keys.Keys) == 0 {
		return false, false, nil
	}
	if ssk, ok := resp.SelfSigningKeys[user]; ok {
		for kid := range ssk.Keys {
			if _, s := keys.Signatures[user][kid]; s {
				return true, true, nil
			}
		}
	}
	return true, false, nil
}
