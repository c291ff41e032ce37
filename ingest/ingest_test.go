package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

var ctx = context.Background()

// openStore opens a fresh SQLite store in a temporary directory.
func openStore(tb testing.TB) store.Store {
	tb.Helper()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// newProject creates a project in st and registers one signer in it.
func newProject(tb testing.TB, st store.Store) (string, *storetest.Signer) {
	tb.Helper()
	p, err := st.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		tb.Fatalf("create project: %v", err)
	}
	return p.ID, storetest.NewSigner(tb, p.ID).Register(tb, st)
}

// head returns the project's newest received_seq.
func head(tb testing.TB, st store.Store, projectID string) int64 {
	tb.Helper()
	seq, _, err := st.Head(ctx, projectID)
	if err != nil {
		tb.Fatalf("head: %v", err)
	}
	return seq
}

func TestAppendAcceptedAndExactRetry(t *testing.T) {
	st := openStore(t)
	pid, sg := newProject(t, st)
	in := ingest.New(st, ingest.Options{})
	ev, canonical := sg.Event(t, storetest.Spec{RepositoryID: "repo-a", ThreadID: "thread-b"})

	res, err := in.Append(ctx, pid, canonical)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if !res.Created || res.Record.ReceivedSeq != 1 || res.Record.EventID != ev.ID || !bytes.Equal(res.Record.Event, canonical) {
		t.Fatalf("result = created %v seq %d id %s, want created seq 1 id %s with the canonical bytes",
			res.Created, res.Record.ReceivedSeq, res.Record.EventID, ev.ID)
	}
	if res.Event.ID != ev.ID || res.Event.RepositoryID != "repo-a" || res.Event.ThreadID != "thread-b" {
		t.Fatalf("parsed event = %s %s %s", res.Event.ID, res.Event.RepositoryID, res.Event.ThreadID)
	}
	if len(res.Warnings) != 0 {
		t.Fatalf("warnings = %v, want none", res.Warnings)
	}

	again, err := in.Append(ctx, pid, bytes.Clone(canonical))
	if err != nil {
		t.Fatalf("exact retry: %v", err)
	}
	if again.Created {
		t.Fatal("exact retry reported Created")
	}
	if !reflect.DeepEqual(again.Record, res.Record) {
		t.Fatalf("retry record = %+v\nwant the original %+v", again.Record, res.Record)
	}
	if got := head(t, st, pid); got != 1 {
		t.Fatalf("head = %d after a retry, want 1", got)
	}
}

// TestAppendNonCanonicalInput: raw need not be canonical; the stored bytes
// are RFC 8785 and a retry in the other spelling is still exact.
func TestAppendNonCanonicalInput(t *testing.T) {
	st := openStore(t)
	pid, sg := newProject(t, st)
	in := ingest.New(st, ingest.Options{})
	_, canonical := sg.Event(t, storetest.Spec{})
	spaced := bytes.ReplaceAll(canonical, []byte(`,"`), []byte(`, "`))

	res, err := in.Append(ctx, pid, spaced)
	if err != nil || !res.Created || !bytes.Equal(res.Record.Event, canonical) {
		t.Fatalf("append spaced = created %v, stored canonical %v, err %v", res.Created, bytes.Equal(res.Record.Event, canonical), err)
	}
	again, err := in.Append(ctx, pid, canonical)
	if err != nil || again.Created || again.Record.ReceivedSeq != 1 {
		t.Fatalf("retry canonical = created %v seq %d err %v, want the original", again.Created, again.Record.ReceivedSeq, err)
	}
}

func TestAppendRefusals(t *testing.T) {
	st := openStore(t)
	pid, sg := newProject(t, st)
	other := storetest.NewSigner(t, pid).Register(t, st)
	otherPID, otherProjectSigner := newProject(t, st)
	in := ingest.New(st, ingest.Options{})

	// An unregistered key.
	unknown := storetest.NewSigner(t, pid)
	// sg's identity, signed by other's key: a key of another identity.
	borrowed := *other
	borrowed.IdentityID = sg.IdentityID
	// sg's key id and identity, signed by another private key.
	forger := *sg
	forger.Priv = other.Priv

	evOK, _ := sg.Event(t, storetest.Spec{})
	mismatched := *evOK
	mismatched.ID = "sha256:" + strings.Repeat("ab", 32)
	mismatchedRaw, err := mismatched.CanonicalJSON()
	if err != nil {
		t.Fatal(err)
	}

	_, unknownRaw := unknown.Event(t, storetest.Spec{})
	_, borrowedRaw := borrowed.Event(t, storetest.Spec{})
	_, forgedRaw := forger.Event(t, storetest.Spec{})
	_, otherProjectRaw := otherProjectSigner.Event(t, storetest.Spec{})
	oversize := append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), ingest.MaxEventBytes)...)
	oversize = append(oversize, `"}`...)

	var profileErr *canonicaljson.ProfileError
	var validationErr *correspondence.ValidationError
	tests := []struct {
		name    string
		project string
		raw     []byte
		is      error
		as      any
	}{
		{name: "wrong project", project: pid, raw: otherProjectRaw, is: ingest.ErrProjectMismatch},
		{name: "wrong project, caller of the other", project: otherPID, raw: unknownRaw, is: ingest.ErrProjectMismatch},
		{name: "unknown key", project: pid, raw: unknownRaw, is: ingest.ErrSenderNotActive},
		{name: "key of another identity", project: pid, raw: borrowedRaw, is: ingest.ErrSenderNotActive},
		{name: "bad signature", project: pid, raw: forgedRaw, is: correspondence.ErrSignatureInvalid},
		{name: "event id mismatch", project: pid, raw: mismatchedRaw, is: correspondence.ErrEventIDMismatch},
		{name: "malformed JSON", project: pid, raw: []byte(`{"protocol":`), as: &profileErr},
		{name: "duplicate member", project: pid, raw: []byte(`{"a":1,"a":2}`), as: &profileErr},
		{name: "not an event", project: pid, raw: []byte(`{}`), as: &validationErr},
		{name: "empty", project: pid, raw: nil, as: &profileErr},
		{name: "oversize", project: pid, raw: oversize, is: ingest.ErrEventTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := in.Append(ctx, tc.project, tc.raw)
			if err == nil {
				t.Fatalf("accepted (seq %d)", res.Record.ReceivedSeq)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if tc.as != nil && !errors.As(err, tc.as) {
				t.Fatalf("err = %v (%T), want %T", err, err, tc.as)
			}
		})
	}
	if got := head(t, st, pid); got != 0 {
		t.Fatalf("head = %d after refusals, want 0", got)
	}
	if got := head(t, st, otherPID); got != 0 {
		t.Fatalf("other project's head = %d after refusals, want 0", got)
	}
	if errors.Is(ingest.ErrSenderNotActive, store.ErrSenderNotActive) != true {
		t.Fatal("ingest.ErrSenderNotActive is not store.ErrSenderNotActive")
	}
}

// TestAppendRevokedKey: revocation takes effect on the very next append,
// although the key's facts are cached.
func TestAppendRevokedKey(t *testing.T) {
	st := openStore(t)
	pid, sg := newProject(t, st)
	in := ingest.New(st, ingest.Options{})
	_, first := sg.Event(t, storetest.Spec{})
	if _, err := in.Append(ctx, pid, first); err != nil {
		t.Fatalf("append before revocation: %v", err)
	}
	if _, err := st.RevokeKey(ctx, pid, sg.KeyID); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	_, second := sg.Event(t, storetest.Spec{})
	if _, err := in.Append(ctx, pid, second); !errors.Is(err, ingest.ErrSenderNotActive) {
		t.Fatalf("append after revocation: err = %v, want ErrSenderNotActive", err)
	}
	if got := head(t, st, pid); got != 1 {
		t.Fatalf("head = %d, want 1", got)
	}
}

// TestAppendUnavailable: an append whose context has ended is
// ErrAppendUnavailable (retry the same bytes), and the cause stays in the
// chain.
func TestAppendUnavailable(t *testing.T) {
	st := openStore(t)
	pid, sg := newProject(t, st)
	in := ingest.New(st, ingest.Options{})
	_, raw := sg.Event(t, storetest.Spec{})
	// Warm the key cache so the key lookup does not meet the ended context.
	if _, err := in.Append(ctx, pid, raw); err != nil {
		t.Fatal(err)
	}
	_, raw2 := sg.Event(t, storetest.Spec{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := in.Append(cctx, pid, raw2)
	if !errors.Is(err, ingest.ErrAppendUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrAppendUnavailable wrapping context.Canceled", err)
	}
}

// TestKeyCacheBound: a cache of one entry still verifies every sender.
func TestKeyCacheBound(t *testing.T) {
	st := openStore(t)
	pid, a := newProject(t, st)
	b := storetest.NewSigner(t, pid).Register(t, st)
	in := ingest.New(st, ingest.Options{KeyCacheSize: 1})
	for i, sg := range []*storetest.Signer{a, b, a, b} {
		_, raw := sg.Event(t, storetest.Spec{})
		if _, err := in.Append(ctx, pid, raw); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if got := head(t, st, pid); got != 4 {
		t.Fatalf("head = %d, want 4", got)
	}
}
