package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// testRetryAfterRevocation: revoking a key (or deactivating an identity)
// stops new events, but an exact retry of an event accepted before still
// gets its original receipt (spec §7: the retry adds no event).
func testRetryAfterRevocation(t *testing.T, st store.Store) {
	ctx := context.Background()
	p, err := st.CreateProject(ctx, NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := NewSigner(t, p.ID).Register(t, st)
	ev, canonical := s.Event(t, Spec{})
	first, err := st.Append(ctx, ev, canonical)
	if err != nil || !first.Created {
		t.Fatalf("first append: %+v, %v", first, err)
	}
	if _, err := st.RevokeKey(ctx, p.ID, s.KeyID); err != nil {
		t.Fatal(err)
	}
	again, err := st.Append(ctx, ev, canonical)
	if err != nil {
		t.Fatalf("exact retry after revocation: %v", err)
	}
	if again.Created || again.Record.ReceivedSeq != first.Record.ReceivedSeq || !again.Record.ReceivedAt.Equal(first.Record.ReceivedAt) {
		t.Fatalf("retry receipt %d@%v, want the original %d@%v (created=%v)", again.Record.ReceivedSeq, again.Record.ReceivedAt,
			first.Record.ReceivedSeq, first.Record.ReceivedAt, again.Created)
	}
	next, nextCanonical := s.Event(t, Spec{Summary: "after revocation"})
	if _, err := st.Append(ctx, next, nextCanonical); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("new event after revocation: %v, want ErrSenderNotActive", err)
	}
}
