package ingest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestAppendForeignKeyAtTime: history received by the remote before the
// key's revocation imports; a record received after it is refused, with
// the same error a local POST gets; a bad signature is refused first.
func TestAppendForeignKeyAtTime(t *testing.T) {
	st := openStore(t)
	pid, sg := newProject(t, st)
	in := ingest.New(st, ingest.Options{})
	if _, err := st.RevokeKey(ctx, pid, sg.KeyID); err != nil {
		t.Fatal(err)
	}
	keys, err := st.RegistryKeys(ctx, pid, "", 1)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v, %v", keys, err)
	}
	revokedAt := keys[0].RevokedAt

	_, before := sg.Event(t, storetest.Spec{Summary: "history"})
	res, err := in.AppendForeign(ctx, pid, before, revokedAt.Add(-time.Millisecond))
	if err != nil || !res.Created {
		t.Fatalf("history signed before the revocation: %+v, %v", res, err)
	}
	if res.Record.ReceivedAt.Before(revokedAt) {
		t.Fatalf("the local receipt %v is not this relay's (the remote's was before %v)", res.Record.ReceivedAt, revokedAt)
	}
	_, after := sg.Event(t, storetest.Spec{Summary: "late"})
	if _, err := in.AppendForeign(ctx, pid, after, revokedAt.Add(time.Millisecond)); !errors.Is(err, ingest.ErrSenderNotActive) {
		t.Fatalf("received after the revocation: %v, want ErrSenderNotActive", err)
	}
	if _, code, _ := ingest.Refusal(err); code == "" {
		t.Fatal("no refusal code")
	}
	bad := append([]byte(nil), before...)
	i := len(bad) - 10
	bad[i] ^= 1 // inside the signature's base64url
	if _, err := in.AppendForeign(ctx, pid, bad, revokedAt.Add(-time.Hour)); err == nil {
		t.Fatal("a changed record was accepted")
	}
	if n := head(t, st, pid); n != 1 {
		t.Fatalf("head %d, want 1", n)
	}
}
