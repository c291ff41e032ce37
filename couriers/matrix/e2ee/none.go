//go:build !goolm

package e2ee

import (
	"context"
	"log/slog"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/store"
)

// Built reports whether this binary has Matrix encryption (the goolm tag).
const Built = false

// Options configure Open.
type Options struct {
	Client    *mautrix.Client
	Store     store.MatrixCrypto
	Logger    *slog.Logger
	OnRefused func(reason string, n int)
	// Password, Appservice and PrintRecoveryKey: see the goolm build.
	Password         string
	Appservice       *mautrix.Client
	PrintRecoveryKey func(recoveryKey string)
	SessionReceived  func(ctx context.Context, room id.RoomID, session id.SessionID)
}

// AppserviceDevice returns ErrNotBuilt (see the goolm build).
func AppserviceDevice(ctx context.Context, asCli *mautrix.Client, st store.MatrixCrypto) (*mautrix.Client, error) {
	return nil, ErrNotBuilt
}

// Open returns ErrNotBuilt: this binary was built without -tags goolm.
func Open(ctx context.Context, opt Options) (matrix.Crypto, error) { return nil, ErrNotBuilt }
