package tlog

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// ErrBadLogKey: a stored log key that is not a note Ed25519 signer key
// (OpenLogKey). The error never quotes the key.
var ErrBadLogKey = errors.New("not an Ed25519 note signer key")

// LogKey is the relay's log key opened for use: Signer signs checkpoints,
// Verifier checks them, and VerifierKey is the public "name+hash+key" text
// the relay publishes (spec §Checkpoints; `acrelay log-key show`).
type LogKey struct {
	Signer      note.Signer
	Verifier    note.Verifier
	VerifierKey string
}

// OpenLogKey opens a signer key as NewLogKey makes it
// ("PRIVATE+KEY+<name>+<hash>+<base64 of 0x01 ‖ 32-byte seed>") and derives
// its verifier key. Errors: ErrBadLogKey.
func OpenLogKey(skey string) (LogKey, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return LogKey{}, ErrBadLogKey
	}
	// Names hold no "+" and hashes are hex, so the fifth field is the key
	// (whose base64 may hold "+").
	data, err := base64.StdEncoding.DecodeString(strings.SplitN(skey, "+", 5)[4])
	if err != nil || len(data) != 1+ed25519.SeedSize || data[0] != 1 {
		return LogKey{}, ErrBadLogKey
	}
	pub := ed25519.NewKeyFromSeed(data[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return LogKey{}, fmt.Errorf("%w: %w", ErrBadLogKey, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil || v.KeyHash() != s.KeyHash() {
		return LogKey{}, ErrBadLogKey
	}
	return LogKey{Signer: s, Verifier: v, VerifierKey: vkey}, nil
}
