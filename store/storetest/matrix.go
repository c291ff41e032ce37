package storetest

import (
	"bytes"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// RunMatrix runs the store.Matrix suite (bindings, sent parts,
// submissions, sync tokens); open is as for Run.
func RunMatrix(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"matrix/bindings", testMatrixBindings},
		{"matrix/sent", testMatrixSent},
		{"matrix/submissions", testMatrixSubmissions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func testMatrixBindings(t *testing.T, s store.Store) {
	p := must[store.Project](t, "create project")(s.CreateProject(ctx, NewUUID()))
	q := must[store.Project](t, "create project")(s.CreateProject(ctx, NewUUID()))
	_, err := s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: NewUUID(), RoomID: "!a:x"})
	wantErr(t, "bind unknown project", err, store.ErrNotFound)

	a := must[store.MatrixBinding](t, "bind")(s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: p.ID, RoomID: "!a:x"}))
	checkDBTime(t, "binding created_at", a.CreatedAt)
	_, err = s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: a.ID, ProjectID: p.ID, RoomID: "!b:x"})
	wantErr(t, "bind taken id", err, store.ErrExists)
	b := must[store.MatrixBinding](t, "bind repo")(s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: p.ID, RepositoryID: "repo-1", RoomID: "!b:x"}))
	must[store.MatrixBinding](t, "bind other project")(s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: q.ID, RoomID: "!a:x"}))

	bs := must[[]store.MatrixBinding](t, "list")(s.MatrixBindings(ctx, p.ID))
	if len(bs) != 2 {
		t.Fatalf("bindings of p = %+v, want 2", bs)
	}
	got := must[store.MatrixBinding](t, "get")(s.MatrixBinding(ctx, p.ID, b.ID))
	if got.RepositoryID != "repo-1" || got.RoomID != "!b:x" || !got.CreatedAt.Equal(b.CreatedAt) {
		t.Errorf("binding = %+v, want %+v", got, b)
	}
	_, err = s.MatrixBinding(ctx, q.ID, b.ID)
	wantErr(t, "get another project's binding", err, store.ErrNotFound)
	if rb := must[[]store.MatrixBinding](t, "room")(s.MatrixRoomBindings(ctx, "!a:x")); len(rb) != 2 {
		t.Errorf("room bindings = %+v, want 2 (two projects)", rb)
	}
	ps := must[[]string](t, "projects")(s.MatrixBoundProjects(ctx))
	if len(ps) != 2 {
		t.Errorf("bound projects = %v, want 2", ps)
	}
	wantErr(t, "delete another project's binding", s.DeleteMatrixBinding(ctx, q.ID, a.ID), store.ErrNotFound)
	if err := s.DeleteMatrixBinding(ctx, p.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete twice", s.DeleteMatrixBinding(ctx, p.ID, a.ID), store.ErrNotFound)
	if bs := must[[]store.MatrixBinding](t, "list")(s.MatrixBindings(ctx, p.ID)); len(bs) != 1 || bs[0].ID != b.ID {
		t.Errorf("bindings after delete = %+v", bs)
	}
}

func testMatrixSent(t *testing.T, s store.Store) {
	if got := must[[]store.MatrixSent](t, "none")(s.MatrixSentParts(ctx, "!r:x", nil)); len(got) != 0 {
		t.Fatalf("sent of no ids = %v", got)
	}
	rec := store.MatrixSent{RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartRecord, MatrixEventID: "$1"}
	for _, m := range []store.MatrixSent{rec, {RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartRecord, MatrixEventID: "$again"},
		{RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartNotice, MatrixEventID: "$2"},
		{RoomID: "!other:x", EventID: "sha256:bb", Part: store.MatrixPartRecord, MatrixEventID: "$3"}} {
		if err := s.RecordMatrixSent(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	got := must[[]store.MatrixSent](t, "sent")(s.MatrixSentParts(ctx, "!r:x", []string{"sha256:aa", "sha256:bb"}))
	if len(got) != 2 || got[0].Part != store.MatrixPartNotice || got[1] != rec {
		t.Errorf("sent parts = %+v, want the notice and the first record", got)
	}
}

func testMatrixSubmissions(t *testing.T, s store.Store) {
	if tok := must[string](t, "token")(s.MatrixSyncToken(ctx, "@bot:x")); tok != "" {
		t.Fatalf("sync token of nobody = %q", tok)
	}
	a := store.MatrixSubmission{MatrixEventID: "$a", RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{"a":1}`)}
	b := store.MatrixSubmission{MatrixEventID: "$b", RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{"b":1}`)}
	if err := s.EnqueueMatrixSubmissions(ctx, []store.MatrixSubmission{a}, "@bot:x", "s1"); err != nil {
		t.Fatal(err)
	}
	// A replay (a re-sent transaction, a re-read sync) adds nothing.
	if err := s.EnqueueMatrixSubmissions(ctx, []store.MatrixSubmission{a, b}, "@bot:x", "s2"); err != nil {
		t.Fatal(err)
	}
	if tok := must[string](t, "token")(s.MatrixSyncToken(ctx, "@bot:x")); tok != "s2" {
		t.Errorf("sync token = %q, want s2", tok)
	}
	p := must[[]store.MatrixSubmission](t, "pending")(s.PendingMatrixSubmissions(ctx, 10))
	if len(p) != 2 || p[0].MatrixEventID != "$a" || !bytes.Equal(p[0].Event, a.Event) || p[0].Outcome != nil {
		t.Fatalf("pending = %+v", p)
	}
	checkDBTime(t, "received_at", p[0].ReceivedAt)
	out := must[[]byte](t, "outcome")(s.SetMatrixSubmissionOutcome(ctx, "$a", []byte(`{"ok":1}`)))
	if string(out) != `{"ok":1}` {
		t.Errorf("outcome = %s", out)
	}
	out = must[[]byte](t, "outcome again")(s.SetMatrixSubmissionOutcome(ctx, "$a", []byte(`{"other":1}`)))
	if string(out) != `{"ok":1}` {
		t.Errorf("second outcome = %s, want the first kept", out)
	}
	_, err := s.SetMatrixSubmissionOutcome(ctx, "$none", []byte(`{}`))
	wantErr(t, "outcome of unknown", err, store.ErrNotFound)
	if err := s.CompleteMatrixSubmission(ctx, "$a", "$reply"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "complete unknown", s.CompleteMatrixSubmission(ctx, "$none", "$r"), store.ErrNotFound)
	p = must[[]store.MatrixSubmission](t, "pending")(s.PendingMatrixSubmissions(ctx, 10))
	if len(p) != 1 || p[0].MatrixEventID != "$b" {
		t.Errorf("pending after completion = %+v", p)
	}
	if err := s.EnqueueMatrixSubmissions(ctx, []store.MatrixSubmission{a}, "", ""); err != nil {
		t.Fatal(err)
	}
	if p = must[[]store.MatrixSubmission](t, "pending")(s.PendingMatrixSubmissions(ctx, 10)); len(p) != 1 {
		t.Errorf("a completed submission came back: %+v", p)
	}
}
