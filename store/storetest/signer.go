package storetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// NewUUID returns a random version-4 UUID in canonical lowercase form.
func NewUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Signer is one sender: an identity with a fresh Ed25519 key, on one
// device and session of one project. Event hands out session_seq 1, 2, …
// unless a Spec fixes it.
type Signer struct {
	ProjectID  string
	IdentityID string
	KeyID      string
	DeviceID   string
	SessionID  string
	Priv       ed25519.PrivateKey
	Pub        ed25519.PublicKey
	seq        int64
}

// NewSigner makes a signer with random ids and a fresh key. It registers
// nothing; see Register.
func NewSigner(tb testing.TB, projectID string) *Signer {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return &Signer{
		ProjectID:  projectID,
		IdentityID: NewUUID(),
		KeyID:      NewUUID(),
		DeviceID:   NewUUID(),
		SessionID:  NewUUID(),
		Priv:       priv,
		Pub:        pub,
	}
}

// Register creates the signer's identity (active) and key (active) in reg.
func (s *Signer) Register(tb testing.TB, reg store.Registry) *Signer {
	tb.Helper()
	ctx := context.Background()
	if _, err := reg.CreateIdentity(ctx, store.Identity{ID: s.IdentityID, ProjectID: s.ProjectID, DisplayName: "agent " + s.IdentityID[:8]}); err != nil {
		tb.Fatalf("register identity: %v", err)
	}
	if _, err := reg.AddKey(ctx, store.SigningKey{ID: s.KeyID, IdentityID: s.IdentityID, ProjectID: s.ProjectID,
		PublicKey: correspondence.EncodePublicKey(s.Pub)}); err != nil {
		tb.Fatalf("register key: %v", err)
	}
	return s
}

// Spec describes one event to sign. Zero fields take defaults:
// Kind intent, RepositoryID "repo-1", ThreadID "thread-1", Paths ["docs"],
// IssuedAt "2026-07-19T10:00:00.000Z", SessionSeq the signer's next, Body
// {"summary": Summary or "work"} for summary kinds and {} otherwise.
type Spec struct {
	Kind         correspondence.Kind
	RepositoryID string
	ThreadID     string
	Parents      []string
	SessionSeq   int64
	IssuedAt     string
	Paths        []string
	Summary      string
	Body         *canonicaljson.Value
}

// Event builds and signs an event; it returns the event and its RFC 8785
// bytes (what Append stores).
func (s *Signer) Event(tb testing.TB, sp Spec) (*correspondence.Event, []byte) {
	tb.Helper()
	if sp.Kind == "" {
		sp.Kind = correspondence.KindIntent
	}
	if sp.RepositoryID == "" {
		sp.RepositoryID = "repo-1"
	}
	if sp.ThreadID == "" {
		sp.ThreadID = "thread-1"
	}
	if len(sp.Paths) == 0 {
		sp.Paths = []string{"docs"}
	}
	if sp.IssuedAt == "" {
		sp.IssuedAt = "2026-07-19T10:00:00.000Z"
	}
	if sp.SessionSeq == 0 {
		s.seq++
		sp.SessionSeq = s.seq
	}
	body := canonicaljson.ObjectValue()
	if sp.Body != nil {
		body = *sp.Body
	} else if sp.Kind == correspondence.KindIntent || sp.Kind == correspondence.KindProgress || sp.Kind == correspondence.KindObservation {
		summary := sp.Summary
		if summary == "" {
			summary = "work"
		}
		body = canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue(summary)})
	}
	ev := &correspondence.Event{
		ProjectID:    s.ProjectID,
		RepositoryID: sp.RepositoryID,
		ThreadID:     sp.ThreadID,
		Sender:       correspondence.Sender{IdentityID: s.IdentityID, SigningKeyID: s.KeyID, DeviceID: s.DeviceID, SessionID: s.SessionID},
		Kind:         sp.Kind,
		Parents:      append([]string{}, sp.Parents...),
		SessionSeq:   sp.SessionSeq,
		IssuedAt:     sp.IssuedAt,
		Scope:        correspondence.Scope{Paths: append([]string{}, sp.Paths...)},
		Body:         body,
	}
	if err := ev.Sign(s.Priv); err != nil {
		tb.Fatalf("sign: %v", err)
	}
	canonical, err := ev.CanonicalJSON()
	if err != nil {
		tb.Fatalf("canonical: %v", err)
	}
	return ev, canonical
}

// Claim builds and signs a claim event: claim.open when generation is 1,
// else claim.renew (expires non-zero) or claim.release (expires zero), with
// predecessor added to parents as spec §5 requires.
func (s *Signer) Claim(tb testing.TB, repositoryID, claimID string, generation int64, predecessor string,
	paths []string, expires time.Time) (*correspondence.Event, []byte) {
	tb.Helper()
	m := []canonicaljson.Member{
		{Name: "claim_id", Value: canonicaljson.StringValue(claimID)},
		{Name: "generation", Value: canonicaljson.IntValue(generation)},
	}
	kind := correspondence.KindClaimOpen
	if generation > 1 {
		kind = correspondence.KindClaimRenew
		if expires.IsZero() {
			kind = correspondence.KindClaimRelease
		}
		m = append(m, canonicaljson.Member{Name: "predecessor_event_id", Value: canonicaljson.StringValue(predecessor)})
	}
	if !expires.IsZero() {
		m = append(m, canonicaljson.Member{Name: "expires_at", Value: canonicaljson.StringValue(correspondence.FormatTimestamp(expires))})
	}
	body := canonicaljson.ObjectValue(m...)
	var parents []string
	if predecessor != "" {
		parents = []string{predecessor}
	}
	return s.Event(tb, Spec{Kind: kind, RepositoryID: repositoryID, Parents: parents, Paths: paths, Body: &body})
}
