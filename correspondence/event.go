package correspondence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"filippo.io/edwards25519"

	"github.com/acrelay/acrelay/canonicaljson"
)

// Protocol is the constant value of every event's "protocol" member.
const Protocol = "agent-correspondence/v0.1"

// Kind is an event kind (spec §5).
type Kind string

// The 21 event kinds of spec §5.
const (
	KindIntent          Kind = "intent"
	KindClaimOpen       Kind = "claim.open"
	KindClaimRenew      Kind = "claim.renew"
	KindClaimRelease    Kind = "claim.release"
	KindProgress        Kind = "progress"
	KindObservation     Kind = "observation"
	KindArtifactOffer   Kind = "artifact.offer"
	KindAckSeen         Kind = "ack.seen"
	KindAckUnderstood   Kind = "ack.understood"
	KindAckAccepted     Kind = "ack.accepted"
	KindAckApplied      Kind = "ack.applied"
	KindAckRejected     Kind = "ack.rejected"
	KindConflictRaise   Kind = "conflict.raise"
	KindConflictResolve Kind = "conflict.resolve"
	KindPause           Kind = "pause"
	KindRest            Kind = "rest"
	KindResume          Kind = "resume"
	KindRefusal         Kind = "refusal"
	KindHandoff         Kind = "handoff"
	KindClose           Kind = "close"
	KindRepair          Kind = "repair"
)

// Kinds lists the 21 kinds in the order of spec §5's schema.
var Kinds = []Kind{
	KindIntent, KindClaimOpen, KindClaimRenew, KindClaimRelease, KindProgress,
	KindObservation, KindArtifactOffer, KindAckSeen, KindAckUnderstood,
	KindAckAccepted, KindAckApplied, KindAckRejected, KindConflictRaise,
	KindConflictResolve, KindPause, KindRest, KindResume, KindRefusal,
	KindHandoff, KindClose, KindRepair,
}

// IsClaim reports whether k is claim.open, claim.renew or claim.release.
func (k Kind) IsClaim() bool {
	return k == KindClaimOpen || k == KindClaimRenew || k == KindClaimRelease
}

// Sender names who signed an event (spec §3); all four are canonical UUIDs.
type Sender struct {
	IdentityID   string
	SigningKeyID string
	DeviceID     string
	SessionID    string
}

// Scope is an event's work scope (spec §3). BaseRevision and Branch are nil
// for JSON null. Paths holds 1–64 unique path prefixes (spec §4).
type Scope struct {
	BaseRevision *string
	Branch       *string
	Paths        []string
}

// SignatureAlgorithm is the only admitted signature algorithm.
const SignatureAlgorithm = "Ed25519"

// Event is one signed agent-correspondence/v0.1 event (spec §3). Body is the
// kind's closed body object, kept as a JSON value so that explicit nulls and
// absent members stay distinct. ID and Signature are empty until Sign (or
// ParseEvent) fills them.
type Event struct {
	ID           string // "sha256:" + 64 lowercase hex
	ProjectID    string
	RepositoryID string
	ThreadID     string
	Sender       Sender
	Kind         Kind
	Parents      []string
	SessionSeq   int64
	IssuedAt     string // RFC3339-ms, kept exactly as signed
	Scope        Scope
	Body         canonicaljson.Value
	Signature    string // unpadded base64url of the 64-byte Ed25519 signature
}

// Errors of signing and verification (spec §6).
var (
	ErrSignatureInvalid  = errors.New("signature does not verify")
	ErrEventIDMismatch   = errors.New("event_id does not match the signed event")
	ErrSignatureEncoding = errors.New("signature is not 86 characters of canonical unpadded base64url")
	ErrBadPublicKey      = errors.New("public key is not 32 bytes of unpadded base64url")
)

func optString(p *string) canonicaljson.Value {
	if p == nil {
		return canonicaljson.NullValue()
	}
	return canonicaljson.StringValue(*p)
}

// Value returns the event as a JSON object with all members of spec §3.
// event_id and signature are included only when set. The members of the
// event and of its sender, scope, authority and signature objects share
// one allocation, and the parents and paths arrays another.
func (e *Event) Value() canonicaljson.Value {
	const top, nested = 14, 4 + 3 + 2 + 2
	mb := make([]canonicaljson.Member, top+nested)
	m, sub := mb[:0:top], mb[top:]
	object := func(ms ...canonicaljson.Member) canonicaljson.Value {
		n := copy(sub, ms)
		v := canonicaljson.Value{Kind: canonicaljson.Object, Members: sub[:n:n]}
		sub = sub[n:]
		return v
	}
	strs := make([]canonicaljson.Value, len(e.Parents)+len(e.Scope.Paths))
	array := func(ss []string) canonicaljson.Value {
		elems := strs[:len(ss):len(ss)]
		for i, s := range ss {
			elems[i] = canonicaljson.StringValue(s)
		}
		strs = strs[len(ss):]
		return canonicaljson.Value{Kind: canonicaljson.Array, Elems: elems}
	}
	add := func(name string, v canonicaljson.Value) { m = append(m, canonicaljson.Member{Name: name, Value: v}) }
	add("protocol", canonicaljson.StringValue(Protocol))
	if e.ID != "" {
		add("event_id", canonicaljson.StringValue(e.ID))
	}
	add("project_id", canonicaljson.StringValue(e.ProjectID))
	add("repository_id", canonicaljson.StringValue(e.RepositoryID))
	add("thread_id", canonicaljson.StringValue(e.ThreadID))
	add("sender", object(
		canonicaljson.Member{Name: "identity_id", Value: canonicaljson.StringValue(e.Sender.IdentityID)},
		canonicaljson.Member{Name: "signing_key_id", Value: canonicaljson.StringValue(e.Sender.SigningKeyID)},
		canonicaljson.Member{Name: "device_id", Value: canonicaljson.StringValue(e.Sender.DeviceID)},
		canonicaljson.Member{Name: "session_id", Value: canonicaljson.StringValue(e.Sender.SessionID)},
	))
	add("kind", canonicaljson.StringValue(string(e.Kind)))
	add("parents", array(e.Parents))
	add("session_seq", canonicaljson.IntValue(e.SessionSeq))
	add("issued_at", canonicaljson.StringValue(e.IssuedAt))
	add("scope", object(
		canonicaljson.Member{Name: "base_revision", Value: optString(e.Scope.BaseRevision)},
		canonicaljson.Member{Name: "branch", Value: optString(e.Scope.Branch)},
		canonicaljson.Member{Name: "paths", Value: array(e.Scope.Paths)},
	))
	body := e.Body
	if body.Kind != canonicaljson.Object {
		body = canonicaljson.ObjectValue()
	}
	add("body", body)
	add("authority", object(
		canonicaljson.Member{Name: "automatic_action", Value: canonicaljson.StringValue("never")},
		canonicaljson.Member{Name: "grants", Value: canonicaljson.ArrayValue()},
	))
	if e.Signature != "" {
		add("signature", object(
			canonicaljson.Member{Name: "algorithm", Value: canonicaljson.StringValue(SignatureAlgorithm)},
			canonicaljson.Member{Name: "value_b64url", Value: canonicaljson.StringValue(e.Signature)},
		))
	}
	return canonicaljson.Value{Kind: canonicaljson.Object, Members: m}
}

// CoreJCS returns JCS(core): the event without event_id and signature
// (spec §6).
func (e *Event) CoreJCS() ([]byte, error) {
	return canonicaljson.AppendCanonicalWithout(make([]byte, 0, 1024), e.Value(), "event_id", "signature")
}

// SignedJCS returns JCS(signed): the event with its signature and without
// event_id (spec §6). The signature must be set.
func (e *Event) SignedJCS() ([]byte, error) {
	if e.Signature == "" {
		return nil, ErrSignatureEncoding
	}
	return canonicaljson.AppendCanonicalWithout(make([]byte, 0, 1024), e.Value(), "event_id")
}

// CanonicalJSON returns the RFC 8785 bytes of the whole signed event,
// event_id included: the exact bytes the relay stores and serves.
func (e *Event) CanonicalJSON() ([]byte, error) {
	return canonicaljson.AppendCanonical(make([]byte, 0, 1024), e.Value())
}

// threadIDMember starts the last member of every core_jcs: "thread_id"
// sorts after every other top-level name of spec §3, "signature" included.
var threadIDMember = []byte(`,"thread_id":`)

// appendSignedFromCore appends JCS(signed) built from JCS(core) without a
// second canonicalization (spec §6): the signature member is spliced in
// before thread_id, where RFC 8785 ordering puts it. The last occurrence
// of ,"thread_id": is the top-level one: it follows every nested member
// in the canonical bytes, and inside a JSON string every quote is escaped,
// so the pattern cannot occur there. sig is unpadded base64url, so it
// needs no escaping.
func appendSignedFromCore(dst, core []byte, sig string) []byte {
	k := bytes.LastIndex(core, threadIDMember)
	dst = append(dst, core[:k]...)
	dst = append(dst, `,"signature":{"algorithm":"`+SignatureAlgorithm+`","value_b64url":"`...)
	dst = append(dst, sig...)
	dst = append(dst, `"}`...)
	return append(dst, core[k:]...)
}

// signingDomain is UTF8("agent-correspondence/v0.1") || 0x00 (spec §6).
var signingDomain = append([]byte(Protocol), 0)

// SigningDigest returns SHA-256(UTF8(protocol) || 0x00 || coreJCS), the 32
// bytes that Ed25519 signs (spec §6).
func SigningDigest(coreJCS []byte) [32]byte {
	h := sha256.New()
	h.Write(signingDomain)
	h.Write(coreJCS)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// EventIDOf returns "sha256:" + lowerhex(SHA-256(signedJCS)) (spec §6).
func EventIDOf(signedJCS []byte) string {
	sum := sha256.Sum256(signedJCS)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Sign signs the event's core with priv and sets Signature and ID
// (spec §6). The event is not validated; call Validate first when its
// contents come from outside.
func (e *Event) Sign(priv ed25519.PrivateKey) error {
	if len(priv) != ed25519.PrivateKeySize {
		return fmt.Errorf("sign: private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	core, err := e.CoreJCS()
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	d := SigningDigest(core)
	e.Signature = base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, d[:]))
	e.ID = EventIDOf(appendSignedFromCore(make([]byte, 0, len(core)+160), core, e.Signature))
	return nil
}

// DecodeSignature decodes a value_b64url: exactly 86 characters of
// unpadded base64url whose unused trailing bits are zero (so each signature
// has one spelling). Error: ErrSignatureEncoding.
func DecodeSignature(s string) ([]byte, error) {
	if len(s) != 86 {
		return nil, ErrSignatureEncoding
	}
	// Go's decoders skip CR and LF even in Strict mode: re-encoding and
	// comparing admits exactly one spelling.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != ed25519.SignatureSize || base64.RawURLEncoding.EncodeToString(b) != s {
		return nil, ErrSignatureEncoding
	}
	return b, nil
}

// DecodePublicKey decodes an Ed25519 public key given as 43 characters of
// canonical unpadded base64url. The 32 bytes must be the canonical
// encoding of a curve point that is not of small order: with a small-order
// key (such as the identity point, all zero bytes but the sign) RFC 8032
// verification accepts signatures made without any private key, so such
// keys are refused at registration and never used to verify.
// Error: ErrBadPublicKey.
func DecodePublicKey(s string) (ed25519.PublicKey, error) {
	// Go's decoders skip CR and LF even in Strict mode: exactly 43
	// characters that re-encode to themselves admit one spelling per key.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(s) != 43 || len(b) != ed25519.PublicKeySize || base64.RawURLEncoding.EncodeToString(b) != s || !StrongPublicKey(b) {
		return nil, ErrBadPublicKey
	}
	return ed25519.PublicKey(b), nil
}

// StrongPublicKey reports whether pub is the canonical encoding of an
// Ed25519 point outside the small-order subgroup.
func StrongPublicKey(pub []byte) bool {
	p, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil || !bytes.Equal(p.Bytes(), pub) {
		return false
	}
	return new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) != 1
}

// EncodePublicKey is the inverse of DecodePublicKey.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return base64.RawURLEncoding.EncodeToString(pub)
}

// verifyBufs recycles Verify's two canonicalization buffers (core and
// signed), so that a 60 KiB event does not allocate them again each time.
var verifyBufs = sync.Pool{New: func() any { return &[2][]byte{make([]byte, 0, 2048), make([]byte, 0, 2048)} }}

// maxPooledBuf bounds a recycled buffer: the 65,536-byte POST limit plus
// the signature member.
const maxPooledBuf = 80 << 10

func putVerifyBufs(b *[2][]byte) {
	if cap(b[0]) <= maxPooledBuf && cap(b[1]) <= maxPooledBuf {
		verifyBufs.Put(b)
	}
}

// eventIDMember opens the event_id member spliced into JCS(signed).
const eventIDMember = `,"event_id":"`

// VerifyCanonical is Verify that also returns the RFC 8785 bytes of the
// whole signed event, event_id included (what CanonicalJSON returns: the
// bytes the relay stores and serves), from the one canonicalization of
// the core that verification needs: the signature member and then the
// event_id member are spliced into JCS(core) where RFC 8785 ordering puts
// them (spec §6). Errors: Verify's; a *canonicaljson.ProfileError for an
// event built by hand that the profile does not admit.
func (e *Event) VerifyCanonical(pub ed25519.PublicKey) ([]byte, error) {
	sig, err := DecodeSignature(e.Signature)
	if err != nil {
		return nil, err
	}
	bufs := verifyBufs.Get().(*[2][]byte)
	defer putVerifyBufs(bufs)
	core, at, err := canonicaljson.AppendCanonicalMark(bufs[0][:0], e.Value(), "event_id", "event_id", "signature")
	bufs[0] = core
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	d := SigningDigest(core)
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, d[:], sig) {
		return nil, ErrSignatureInvalid
	}
	// The signature member goes before thread_id, after event_id's place
	// (at): at is unchanged in signed.
	signed := appendSignedFromCore(bufs[1][:0], core, e.Signature)
	bufs[1] = signed
	sum := sha256.Sum256(signed)
	var id [len(eventIDPrefix) + 2*sha256.Size]byte
	copy(id[:], eventIDPrefix)
	hex.Encode(id[len(eventIDPrefix):], sum[:])
	if string(id[:]) != e.ID {
		return nil, ErrEventIDMismatch
	}
	// "protocol", "authority" and "body" sort before event_id, so at is
	// always the comma after body's value.
	out := make([]byte, 0, len(signed)+len(eventIDMember)+len(id)+1)
	out = append(out, signed[:at]...)
	out = append(out, eventIDMember...)
	out = append(out, id[:]...)
	out = append(out, '"')
	return append(out, signed[at:]...), nil
}

// eventIDPrefix starts every event id (spec §6).
const eventIDPrefix = "sha256:"

// Verify checks the event's signature under pub and that ID equals the
// recomputed event id (spec §6). Errors: ErrSignatureEncoding,
// ErrSignatureInvalid, ErrEventIDMismatch (in that order of checking, so a
// forged id over a valid signature is reported as a mismatch).
func (e *Event) Verify(pub ed25519.PublicKey) error {
	sig, err := DecodeSignature(e.Signature)
	if err != nil {
		return err
	}
	bufs := verifyBufs.Get().(*[2][]byte)
	defer putVerifyBufs(bufs)
	core, err := canonicaljson.AppendCanonicalWithout(bufs[0][:0], e.Value(), "event_id", "signature")
	bufs[0] = core
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	d := SigningDigest(core)
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, d[:], sig) {
		return ErrSignatureInvalid
	}
	signed := appendSignedFromCore(bufs[1][:0], core, e.Signature)
	bufs[1] = signed
	if EventIDOf(signed) != e.ID {
		return ErrEventIDMismatch
	}
	return nil
}
