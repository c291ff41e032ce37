// Package witness is what a relay needs to witness another relay's log
// and to take cosignatures on its own (spec/tlog.md §Checkpoints and
// §Auditing, issue 24 item 5): C2SP tlog-cosignature/v1 (timestamped
// Ed25519) keys, signing and verification through
// github.com/transparency-dev/formats/note on golang.org/x/mod/sumdb/note;
// opening a C2SP tlog-checkpoint (package tlog's parser); the witness's
// decision on a checkpoint against the last one it cosigned (Add, C2SP
// tlog-witness add-checkpoint, consistency by
// golang.org/x/mod/sumdb/tlog.CheckTree), taken alike for the
// add-checkpoint route and federation links; and the served checkpoint
// with the cosignatures held. It does no I/O of its own: no HTTP, and the
// store only through the interfaces StoredKey and Add are given.
//
// The witness key is not the log key. C2SP signed-note allows one key for
// several signature types only "if necessary (and if domain separation
// can be ensured)"; tlog-cosignature's Ed25519 message does not commit to
// the cosigner's name, and the relay's log key signs any checkpoint text
// the relay makes. Nothing needs the two roles on one key, so the relay
// keeps a separate Ed25519 witness key, created at first start and kept
// in the store (store.Cosignatures.WitnessKey): a client that trusts the
// relay as a witness configures another (name, key, cosignature/v1)
// tuple than one that trusts its log, and either key can be replaced
// without the other.
package witness

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/store"
	acrtlog "github.com/acrelay/acrelay/tlog"
)

// MaxCosignatures bounds the cosignatures a served checkpoint carries:
// with the log's own signature, 16 lines, the number C2SP signed-note
// requires every verifier to accept.
const MaxCosignatures = 15

// MaxNoteBytes bounds a checkpoint note this package opens (a checkpoint
// with 16 Ed25519 signature lines is well under 2 KiB).
const MaxNoteBytes = 16 << 10

// NewKey returns a fresh witness signer key named name (note
// "PRIVATE+KEY+<name>+<hash>+<keydata>", Ed25519). Its verifier key is
// VerifierKey(skey).
func NewKey(name string) (skey string, err error) {
	skey, _, err = note.GenerateKey(rand.Reader, name)
	return skey, err
}

// VerifierKey returns the C2SP cosignature/v1 verifier key
// ("<name>+<hash>+<keydata>", signature type 0x04) of the witness signer
// key skey: what a relay publishes for others to verify its
// cosignatures.
func VerifierKey(skey string) (string, error) {
	k, err := acrtlog.OpenLogKey(skey) // an Ed25519 note signer key, as the log key
	if err != nil {
		return "", fmt.Errorf("witness key: %w", err)
	}
	return fnote.VKeyToCosignatureV1(k.VerifierKey)
}

// NewSigner returns the cosignature/v1 signer of the witness signer key
// skey.
func NewSigner(skey string) (note.Signer, error) {
	return fnote.NewSignerForCosignatureV1(skey)
}

// NewVerifier returns the cosignature/v1 verifier of a witness verifier
// key (VerifierKey's form; a plain Ed25519 note key is taken as the same
// key's cosignature/v1 verifier).
func NewVerifier(vkey string) (note.Verifier, error) {
	return fnote.NewVerifierForCosignatureV1(vkey)
}

// Checkpoint is a C2SP tlog-checkpoint's body (origin, size, root), as
// package tlog writes and parses it.
type Checkpoint = acrtlog.Checkpoint

// Errors of Open and OpenCosigned.
var (
	// ErrNote: the note is malformed, too large, or not signed by the log
	// key (a known key's signature that fails is this too).
	ErrNote = errors.New("checkpoint note invalid or not signed by the log key")
	// ErrOrigin: the checkpoint names another origin than the one
	// expected.
	ErrOrigin = errors.New("checkpoint origin is not the one expected")
	// ErrNoCosignature: no cosignature by a known witness key verifies.
	ErrNoCosignature = errors.New("no cosignature by a known witness key")
)

// Open verifies the checkpoint note msg with the log verifier and parses
// it. With origin "", any origin is taken (the caller checks it); else
// the origin must be origin. Extension lines after the root are
// refused: this relay's logs write none. Errors: ErrNote, ErrOrigin.
func Open(msg []byte, logVerifier note.Verifier, origin string, others ...note.Verifier) (Checkpoint, *note.Note, error) {
	if len(msg) > MaxNoteBytes {
		return Checkpoint{}, nil, ErrNote
	}
	n, err := note.Open(msg, note.VerifierList(append([]note.Verifier{logVerifier}, others...)...))
	if err != nil {
		return Checkpoint{}, nil, ErrNote
	}
	logSigned := false
	for _, s := range n.Sigs {
		if s.Name == logVerifier.Name() && s.Hash == logVerifier.KeyHash() {
			logSigned = true
		}
	}
	if !logSigned {
		return Checkpoint{}, nil, ErrNote
	}
	c, err := acrtlog.ParseCheckpoint(n.Text) // canonical, no extension lines
	if err != nil {
		return Checkpoint{}, nil, ErrNote
	}
	if origin != "" && c.Origin != origin {
		return Checkpoint{}, nil, ErrOrigin
	}
	return c, n, nil
}

// Line is a note signature line: "— <name> <base64>\n".
func Line(s note.Signature) string { return "— " + s.Name + " " + s.Base64 + "\n" }

// Cosign cosigns the checkpoint note n (opened by Open) with the witness
// signer s and returns n with the cosignature appended (the note as
// submitted to the log's relay) and the cosignature's line.
func Cosign(s note.Signer, n *note.Note) (cosigned []byte, line string, err error) {
	signed, err := note.Sign(&note.Note{Text: n.Text}, s)
	if err != nil {
		return nil, "", fmt.Errorf("cosign: %w", err)
	}
	line = string(signed[len(n.Text)+1:])
	var b bytes.Buffer
	b.WriteString(n.Text)
	b.WriteString("\n")
	for _, sig := range n.Sigs {
		b.WriteString(Line(sig))
	}
	b.WriteString(line)
	return b.Bytes(), line, nil
}

// Cosig is one verified cosignature.
type Cosig struct {
	Name     string
	Line     string
	SignedAt time.Time // the cosignature's timestamp (whole seconds, UTC)
}

// OpenCosigned verifies a cosigned checkpoint note: signed by the log
// verifier, of origin, with at least one cosignature/v1 by one of the
// witness verifiers, none dated more than skew after now. It returns the
// checkpoint, its note text and the verified cosignatures (signatures by
// other keys are ignored). Errors: ErrNote, ErrOrigin, ErrNoCosignature.
func OpenCosigned(msg []byte, logVerifier note.Verifier, origin string, witnesses []note.Verifier, now time.Time, skew time.Duration) (Checkpoint, []byte, []Cosig, error) {
	c, n, err := Open(msg, logVerifier, origin, witnesses...)
	if err != nil {
		// note.Open refuses a whole note when a known witness key's
		// cosignature on it does not verify, though the checkpoint itself
		// may be this log's: opened with the log key alone, such a note is
		// a checkpoint without a valid cosignature (cosigner_unknown, not
		// checkpoint_not_published).
		if errors.Is(err, ErrNote) && len(witnesses) > 0 {
			if _, _, err2 := Open(msg, logVerifier, origin); err2 == nil {
				return Checkpoint{}, nil, nil, ErrNoCosignature
			}
		}
		return Checkpoint{}, nil, nil, err
	}
	var out []Cosig
	for _, s := range n.Sigs {
		if s.Name == logVerifier.Name() && s.Hash == logVerifier.KeyHash() {
			continue
		}
		at, err := fnote.CoSigV1Timestamp(s)
		if err != nil || at.After(now.Add(skew)) {
			return Checkpoint{}, nil, nil, ErrNoCosignature
		}
		out = append(out, Cosig{Name: s.Name, Line: Line(s), SignedAt: at.UTC()})
	}
	if len(out) == 0 {
		return Checkpoint{}, nil, nil, ErrNoCosignature
	}
	return c, []byte(n.Text), out, nil
}

// WithCosignatures returns the checkpoint note checkpoint with the lines
// of the held cosignatures whose cosigned text is its text appended (at
// most MaxCosignatures in all; lines it already carries are not
// repeated). A note that does not parse is returned as it is.
func WithCosignatures(checkpoint []byte, held []store.Cosignature) []byte {
	i := bytes.LastIndex(checkpoint, []byte("\n\n"))
	if i < 0 || len(held) == 0 {
		return checkpoint
	}
	text := checkpoint[:i+1]
	out := bytes.Clone(checkpoint)
	added := 0
	for _, c := range held {
		if added == MaxCosignatures {
			break
		}
		if !bytes.Equal(c.Body, text) || bytes.Contains(out[i+1:], []byte(c.Line)) {
			continue
		}
		out = append(out, c.Line...)
		added++
	}
	return out
}

// Paths of the relay routes witnessing uses.
const (
	// KeyPath serves the relay's witness verifier key (VerifierKey's
	// form) as text/plain, beside the log key's /v1/log-key.
	KeyPath = "/v1/witness-key"
)

// CosignaturesPath is the route a witness POSTs its cosigned checkpoint
// of projectID's log to.
func CosignaturesPath(projectID string) string { return "/v1/log/" + projectID + "/cosignatures" }

// KeyName is the witness key's name for a relay at publicURL: the log
// key's name (tlog.KeyName, host and path) followed by "/witness".
func KeyName(publicURL string) string { return acrtlog.KeyName(publicURL) + "/witness" }

// KeyStore is the store's part of the witness key
// (store.Cosignatures.WitnessKey).
type KeyStore interface {
	WitnessKey(ctx context.Context, create func() (string, error)) (string, error)
}

// StoredKey returns the relay's witness signer key kept in st, creating
// it (named KeyName(publicURL)) the first time any process asks.
func StoredKey(ctx context.Context, st KeyStore, publicURL string) (string, error) {
	return st.WitnessKey(ctx, func() (string, error) { return NewKey(KeyName(publicURL)) })
}
