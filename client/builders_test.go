package client

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
)

// The sender and ids of the public signing vector (a TEST key).
var (
	testSeedHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	testProject = "11111111-1111-4111-8111-111111111111"
	testSender  = correspondence.Sender{
		IdentityID:   "22222222-2222-4222-8222-222222222222",
		SigningKeyID: "33333333-3333-4333-8333-333333333333",
		DeviceID:     "44444444-4444-4444-8444-444444444444",
		SessionID:    "55555555-5555-4555-8555-555555555555",
	}
	testClaimID = "66666666-6666-4666-8666-666666666666"
	idA         = "sha256:" + strings.Repeat("a", 64)
	idB         = "sha256:" + strings.Repeat("b", 64)
	revB        = strings.Repeat("b", 40)
)

func testKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	seed, _ := hex.DecodeString(testSeedHex)
	return ed25519.NewKeyFromSeed(seed)
}

func testSigner(t *testing.T) *Signer {
	t.Helper()
	s, err := NewSigner(testKey(t), testProject, testSender)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testKeyring(t *testing.T) Keyring {
	t.Helper()
	return Keyring{testSender.SigningKeyID: {IdentityID: testSender.IdentityID, PublicKey: testKey(t).Public().(ed25519.PublicKey)}}
}

func ptr(s string) *string { return &s }

func testAt() At {
	return At{
		RepositoryID: "repo:github.com/cambridgetcg/agenttool",
		ThreadID:     "task:renaissance-correspondence",
		Scope: correspondence.Scope{
			BaseRevision: ptr(strings.Repeat("a", 40)),
			Branch:       ptr("codex/renaissance-correspondence"),
			Paths:        []string{"docs", "docs/specs"},
		},
	}
}

func fixedSession(t *testing.T) *Session {
	t.Helper()
	s := NewSession(testSigner(t), NewMemorySequencer(0))
	s.Now = func() time.Time { return time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC) }
	return s
}

type vectorFile struct {
	SigningVector struct {
		PublicKeyB64URL  string `json:"public_key_b64url"`
		CoreJCS          string `json:"core_jcs"`
		SigningDigestHex string `json:"signing_digest_hex"`
		SignatureB64URL  string `json:"signature_b64url"`
		EventID          string `json:"event_id"`
	} `json:"signing_vector"`
	BodyMatrix []struct {
		Kind string          `json:"kind"`
		Body json.RawMessage `json:"body"`
	} `json:"body_matrix"`
}

func loadVectors(t *testing.T) vectorFile {
	t.Helper()
	data, err := os.ReadFile(shareddir.Path(t, "spec", "agent-correspondence-0.1-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSigningVector builds the public signing vector's event with the
// SDK (session, builder, signer) and checks every byte of spec §6.
func TestSigningVector(t *testing.T) {
	v := loadVectors(t).SigningVector
	s := fixedSession(t)
	if got := s.Signer.PublicKeyB64URL(); got != v.PublicKeyB64URL {
		t.Fatalf("public key %s, want %s", got, v.PublicKeyB64URL)
	}
	ev, err := s.Sign(testAt(), ClaimOpen(testClaimID, time.Date(2026, 7, 19, 12, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	core, _ := ev.CoreJCS()
	if string(core) != v.CoreJCS {
		t.Fatalf("core_jcs\n got %s\nwant %s", core, v.CoreJCS)
	}
	d := correspondence.SigningDigest(core)
	if hex.EncodeToString(d[:]) != v.SigningDigestHex {
		t.Errorf("digest %x", d)
	}
	if ev.Signature != v.SignatureB64URL || ev.ID != v.EventID {
		t.Errorf("signature %s id %s, want %s %s", ev.Signature, ev.ID, v.SignatureB64URL, v.EventID)
	}
}

// draftFor builds, with the SDK builders, the body of the vector file's
// body_matrix entry of each kind.
func draftFor(t *testing.T, kind string) Draft {
	t.Helper()
	open := &correspondence.Event{ID: idA, Kind: correspondence.KindClaimOpen, Scope: correspondence.Scope{Paths: []string{"docs"}},
		Body: canonicaljson.ObjectValue(
			canonicaljson.Member{Name: "claim_id", Value: canonicaljson.StringValue(testClaimID)},
			canonicaljson.Member{Name: "generation", Value: canonicaljson.IntValue(1)},
			canonicaljson.Member{Name: "expires_at", Value: canonicaljson.StringValue("2026-07-19T12:00:00.000Z")})}
	switch correspondence.Kind(kind) {
	case correspondence.KindIntent:
		return Intent("Coordinate the first slice.")
	case correspondence.KindClaimOpen:
		return ClaimOpen(testClaimID, time.Date(2026, 7, 19, 12, 0, 0, 0, time.UTC))
	case correspondence.KindClaimRenew:
		return ClaimRenew(open, time.Date(2026, 7, 19, 14, 0, 0, 0, time.UTC))
	case correspondence.KindClaimRelease:
		return ClaimRelease(open, "")
	case correspondence.KindProgress:
		return Progress("Schema drafted.")
	case correspondence.KindObservation:
		return Observation("Two path prefixes overlap.")
	case correspondence.KindArtifactOffer:
		return ArtifactOffer(GitCommit(revB), "")
	case correspondence.KindAckSeen:
		return AckSeen(idA, "")
	case correspondence.KindAckUnderstood:
		return AckUnderstood(idA, "")
	case correspondence.KindAckAccepted:
		return AckAccepted(idA, "")
	case correspondence.KindAckApplied:
		return AckApplied(idA, revB, "")
	case correspondence.KindAckRejected:
		return AckRejected(idA, "")
	case correspondence.KindConflictRaise:
		return ConflictRaise([]string{idA, idB}, "")
	case correspondence.KindConflictResolve:
		return ConflictResolve([]string{idA}, "Preserve both reports and use the reviewed patch.", "")
	case correspondence.KindPause:
		return Pause(time.Time{}, "")
	case correspondence.KindRest:
		return Rest(time.Time{}, "")
	case correspondence.KindResume:
		return Resume(idA, "")
	case correspondence.KindRefusal:
		return Refusal("", "")
	case correspondence.KindHandoff:
		return Handoff("The schema is ready for review.", "Run the focused conformance test.", "77777777-7777-4777-8777-777777777777")
	case correspondence.KindClose:
		return Close("")
	case correspondence.KindRepair:
		return Repair([]string{idA}, "Correct the earlier path report.", "")
	}
	t.Fatalf("no builder for %s", kind)
	return Draft{}
}

// TestBuildersMatchBodyMatrix: every builder yields exactly the body of
// the public vector file, the SDK-signed event passes the core's full
// validation and verification, and referenced ids are in parents.
func TestBuildersMatchBodyMatrix(t *testing.T) {
	m := loadVectors(t).BodyMatrix
	if len(m) != len(correspondence.Kinds) {
		t.Fatalf("body_matrix has %d kinds, want %d", len(m), len(correspondence.Kinds))
	}
	s := fixedSession(t)
	pub := s.Signer.PublicKey()
	for i, row := range m {
		t.Run(row.Kind, func(t *testing.T) {
			d := draftFor(t, row.Kind)
			if string(d.Kind) != row.Kind {
				t.Fatalf("kind %s", d.Kind)
			}
			want, err := canonicaljson.Parse(row.Body)
			if err != nil {
				t.Fatal(err)
			}
			wantJCS, _ := canonicaljson.Canonical(want)
			gotJCS, _ := canonicaljson.Canonical(d.Body)
			if !bytes.Equal(gotJCS, wantJCS) {
				t.Fatalf("body\n got %s\nwant %s", gotJCS, wantJCS)
			}
			at := testAt()
			at.Parents = []string{idA} // the builder's refs must not duplicate it
			ev, err := s.Sign(at, d)
			if err != nil {
				t.Fatal(err)
			}
			if ev.SessionSeq != int64(i+1) {
				t.Errorf("session_seq %d, want %d", ev.SessionSeq, i+1)
			}
			for _, ref := range ev.ReferencedEventIDs() {
				if !slices.Contains(ev.Parents, ref) {
					t.Errorf("reference %s not in parents %v", ref, ev.Parents)
				}
			}
			if n := len(ev.Parents); n != len(slices.Compact(slices.Sorted(slices.Values(ev.Parents)))) {
				t.Errorf("duplicate parents %v", ev.Parents)
			}
			// SDK-signed → core verifies, from the wire bytes.
			raw, _ := ev.CanonicalJSON()
			parsed, err := correspondence.ParseEvent(raw)
			if err != nil {
				t.Fatalf("core refuses SDK event: %v", err)
			}
			if err := parsed.Verify(pub); err != nil {
				t.Fatalf("core verify: %v", err)
			}
			if parsed.ID != ev.ID {
				t.Fatalf("id %s, want %s", parsed.ID, ev.ID)
			}
		})
	}
}

// TestCoreSignedSDKVerifies: events signed by the core alone (Event.Sign)
// over all 21 kinds are decoded and verified by the SDK, and any change
// to their bytes is refused.
func TestCoreSignedSDKVerifies(t *testing.T) {
	m := loadVectors(t).BodyMatrix
	kr := testKeyring(t)
	for _, row := range m {
		t.Run(row.Kind, func(t *testing.T) {
			b, err := canonicaljson.Parse(row.Body)
			if err != nil {
				t.Fatal(err)
			}
			at := testAt()
			ev := &correspondence.Event{ProjectID: testProject, RepositoryID: at.RepositoryID, ThreadID: at.ThreadID,
				Sender: testSender, Kind: correspondence.Kind(row.Kind), SessionSeq: 7, IssuedAt: "2026-07-19T10:00:00.000Z",
				Scope: at.Scope, Body: b}
			ev.Parents = (&correspondence.Event{Body: b}).ReferencedEventIDs()
			if ev.Parents == nil {
				ev.Parents = []string{}
			}
			if err := ev.Sign(testKey(t)); err != nil {
				t.Fatal(err)
			}
			raw, _ := ev.CanonicalJSON()
			got, err := DecodeEvent(raw)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := kr.Verify(got); err != nil {
				t.Fatalf("verify: %v", err)
			}
			// A changed session_seq keeps the JSON valid but breaks the signature.
			bad := bytes.Replace(raw, []byte(`"session_seq":7`), []byte(`"session_seq":8`), 1)
			got, err = DecodeEvent(bad)
			if err != nil {
				t.Fatal(err)
			}
			if err := kr.Verify(got); !errors.Is(err, correspondence.ErrSignatureInvalid) {
				t.Fatalf("tampered event: %v, want ErrSignatureInvalid", err)
			}
		})
	}
}

func TestKeyringRefusals(t *testing.T) {
	s := fixedSession(t)
	ev, err := s.Sign(testAt(), Intent("hello"))
	if err != nil {
		t.Fatal(err)
	}
	pub := s.Signer.PublicKey()
	other, _ := GenerateKey()
	tests := []struct {
		name string
		kr   Keyring
		mod  func(e *correspondence.Event)
		want error
	}{
		{"ok", Keyring{testSender.SigningKeyID: {IdentityID: testSender.IdentityID, PublicKey: pub}}, nil, nil},
		{"unknown key", Keyring{}, nil, ErrUnknownSigningKey},
		{"key of another identity", Keyring{testSender.SigningKeyID: {IdentityID: "99999999-9999-4999-8999-999999999999", PublicKey: pub}}, nil, ErrKeyIdentityMismatch},
		{"wrong public key", Keyring{testSender.SigningKeyID: {IdentityID: testSender.IdentityID, PublicKey: other.Public().(ed25519.PublicKey)}}, nil, correspondence.ErrSignatureInvalid},
		{"forged id", Keyring{testSender.SigningKeyID: {IdentityID: testSender.IdentityID, PublicKey: pub}}, func(e *correspondence.Event) { e.ID = idA }, correspondence.ErrEventIDMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := *ev
			if tc.mod != nil {
				tc.mod(&e)
			}
			err := tc.kr.Verify(&e)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestClaimSuccessors(t *testing.T) {
	s := fixedSession(t)
	at := testAt()
	open, err := s.Sign(at, ClaimOpen(testClaimID, time.Date(2026, 7, 19, 12, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	// The renew is signed at another scope; the predecessor's scope wins.
	at2 := at
	at2.Scope = correspondence.Scope{Paths: []string{"elsewhere"}}
	renew, err := s.Sign(at2, ClaimRenew(open, time.Date(2026, 7, 19, 14, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := renew.Claim()
	if !ok || c.ClaimID != testClaimID || c.Generation != 2 || c.PredecessorEventID != open.ID || c.ExpiresAt != "2026-07-19T14:00:00.000Z" {
		t.Fatalf("renew claim fields %+v", c)
	}
	if !slices.Equal(renew.Parents, []string{open.ID}) || !slices.Equal(renew.Scope.Paths, []string{"docs", "docs/specs"}) {
		t.Fatalf("renew parents %v paths %v", renew.Parents, renew.Scope.Paths)
	}
	rel, err := s.Sign(at, ClaimRelease(renew, "done"))
	if err != nil {
		t.Fatal(err)
	}
	c, _ = rel.Claim()
	if c.Generation != 3 || c.PredecessorEventID != renew.ID {
		t.Fatalf("release %+v", c)
	}
	if _, err := s.Sign(at, ClaimRenew(rel, time.Now())); !errors.Is(err, ErrNotClaim) {
		t.Fatalf("renew of a release: %v", err)
	}
	unsigned := *open
	unsigned.ID = ""
	if _, err := s.Sign(at, ClaimRelease(&unsigned, "")); !errors.Is(err, ErrNoPredecessorID) {
		t.Fatalf("release of an unsigned claim: %v", err)
	}
	// The Pause builder renders until in RFC3339-ms UTC.
	p, _ := s.Sign(at, Pause(time.Date(2026, 7, 20, 9, 30, 0, 5e6, time.FixedZone("x", 3600)), "lunch"))
	got, _ := canonicaljson.Canonical(p.Body)
	if string(got) != `{"detail":"lunch","until":"2026-07-20T08:30:00.005Z"}` {
		t.Fatalf("pause body %s", got)
	}
}

func TestFileSequencer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seq")
	f := &FileSequencer{Path: path}
	for want := int64(1); want <= 3; want++ {
		got, err := f.Next()
		if err != nil || got != want {
			t.Fatalf("Next = %d, %v; want %d", got, err, want)
		}
	}
	// A new sequencer on the same file continues, as after a restart.
	got, err := (&FileSequencer{Path: path}).Next()
	if err != nil || got != 4 {
		t.Fatalf("after restart Next = %d, %v; want 4", got, err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "4\n" {
		t.Fatalf("file holds %q", data)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	_ = os.WriteFile(path, []byte("-2\n"), 0o600)
	if _, err := f.Next(); err == nil {
		t.Fatal("negative value accepted")
	}
}

// TestFileSequencerReserve: Reserve spends nothing until Commit, and a
// value spent meanwhile is not committed twice.
func TestFileSequencerReserve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seq")
	f := &FileSequencer{Path: path}
	for range 2 {
		if n, err := f.Reserve(); err != nil || n != 1 {
			t.Fatalf("Reserve = %d, %v; want 1 (nothing spent yet)", n, err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Reserve wrote the file: %v", err)
	}
	if err := f.Commit(1); err != nil {
		t.Fatal(err)
	}
	n, err := f.Reserve()
	if err != nil || n != 2 {
		t.Fatalf("after Commit(1) Reserve = %d, %v; want 2", n, err)
	}
	if got, err := (&FileSequencer{Path: path}).Next(); err != nil || got != 2 {
		t.Fatalf("another writer's Next = %d, %v; want 2", got, err)
	}
	if err := f.Commit(n); err == nil {
		t.Fatal("Commit of a value spent since its Reserve succeeded")
	}
	if data, _ := os.ReadFile(path); string(data) != "2\n" {
		t.Fatalf("file holds %q", data)
	}
}

func TestParsePrivateKey(t *testing.T) {
	want := testKey(t)
	seed := want.Seed()
	pemBytes, err := MarshalPrivateKeyPEM(want)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"pkcs8 pem", pemBytes, true},
		{"hex seed with newline", []byte(testSeedHex + "\n"), true},
		{"base64url seed", []byte(base64.RawURLEncoding.EncodeToString(seed)), true},
		{"padded base64", []byte(base64.URLEncoding.EncodeToString(seed)), false},
		{"short hex", []byte(testSeedHex[:62]), false},
		{"other pem type", []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"), false},
		{"garbage", []byte("not a key"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePrivateKey(tc.in)
			if !tc.ok {
				if !errors.Is(err, ErrKeyFormat) {
					t.Fatalf("err %v, want ErrKeyFormat", err)
				}
				return
			}
			if err != nil || !got.Equal(want) {
				t.Fatalf("key mismatch (err %v)", err)
			}
		})
	}
	if !strings.HasPrefix(string(pemBytes), "-----BEGIN PRIVATE KEY-----\n") {
		t.Fatalf("pem header %q", pemBytes[:30])
	}
}
