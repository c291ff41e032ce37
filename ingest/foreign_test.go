package ingest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
	"github.com/acrelay/acrelay/wire"
)

// appendOne is AppendForeign of a page of one record.
func appendOne(in *ingest.Ingester, pid string, raw []byte, at time.Time) (ingest.Result, error) {
	out := in.AppendForeign(ctx, pid, []ingest.ForeignRecord{{Raw: raw, RemoteReceivedAt: at}})
	return out[0].Result, out[0].Err
}

// TestAppendForeignKeyAtTime: history received by the remote before the
// key's revocation imports; a record received after it is refused, with
// the same error a local POST gets; a bad signature is refused first.
func TestAppendForeignKeyAtTime(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		st := open(t)
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
		res, err := appendOne(in, pid, before, revokedAt.Add(-time.Millisecond))
		if err != nil || !res.Created {
			t.Fatalf("history signed before the revocation: %+v, %v", res, err)
		}
		if res.Record.ReceivedAt.Before(revokedAt) {
			t.Fatalf("the local receipt %v is not this relay's (the remote's was before %v)", res.Record.ReceivedAt, revokedAt)
		}
		_, after := sg.Event(t, storetest.Spec{Summary: "late"})
		_, err = appendOne(in, pid, after, revokedAt.Add(time.Millisecond))
		if !errors.Is(err, ingest.ErrSenderNotActive) || errors.Is(err, ingest.ErrSenderUnknown) {
			t.Fatalf("received after the revocation: %v, want ErrSenderNotActive (not unknown)", err)
		}
		if code, _ := ingest.Refusal(err); code != wire.CodeSenderOrSigningKeyNotActive {
			t.Fatalf("refusal code %q", code)
		}
		bad := append([]byte(nil), before...)
		i := len(bad) - 10
		bad[i] ^= 1 // inside the signature's base64url
		if _, err := appendOne(in, pid, bad, revokedAt.Add(-time.Hour)); err == nil {
			t.Fatal("a changed record was accepted")
		}
		if n := head(t, st, pid); n != 1 {
			t.Fatalf("head %d, want 1", n)
		}
	})
}

// TestAppendForeignPage: a page of twelve records with a bad signature,
// an unknown key, a duplicate and a record of another project among them
// is appended in page order (this relay's received_seq follows the
// page), each record with its own verdict; the refused ones leave no
// trace.
func TestAppendForeignPage(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		st := open(t)
		pid, sg := newProject(t, st)
		stranger := storetest.NewSigner(t, pid) // never registered here
		in := ingest.New(st, ingest.Options{})
		at := time.Now()
		var page []ingest.ForeignRecord
		var ids []string
		for range 12 {
			ev, raw := sg.Event(t, storetest.Spec{Summary: "page"})
			ids = append(ids, ev.ID)
			page = append(page, ingest.ForeignRecord{Raw: raw, RemoteReceivedAt: at})
		}
		res, err := appendOne(in, pid, page[3].Raw, at) // stored before: a duplicate in the page
		if err != nil || !res.Created {
			t.Fatal(res, err)
		}
		bad := append([]byte(nil), page[5].Raw...)
		bad[len(bad)-10] ^= 1
		page[5].Raw = bad
		_, unknownRaw := stranger.Event(t, storetest.Spec{})
		page[7].Raw = unknownRaw
		other := storetest.NewSigner(t, storetest.NewUUID())
		_, otherRaw := other.Event(t, storetest.Spec{})
		page[9].Raw = otherRaw

		out := in.AppendForeign(ctx, pid, page)
		if len(out) != len(page) {
			t.Fatalf("%d verdicts for %d records", len(out), len(page))
		}
		want := []string{"created", "created", "created", "duplicate", "created", "signature", "created", "unknown",
			"created", "project", "created", "created"}
		seq := int64(1) // the duplicate holds 1
		for i, o := range out {
			got := "created"
			switch {
			case errors.Is(o.Err, correspondence.ErrSignatureInvalid):
				got = "signature"
			case errors.Is(o.Err, ingest.ErrSenderUnknown):
				got = "unknown"
			case errors.Is(o.Err, ingest.ErrProjectMismatch):
				got = "project"
			case o.Err != nil:
				got = "error: " + o.Err.Error()
			case !o.Created:
				got = "duplicate"
			}
			if got != want[i] {
				t.Fatalf("record %d: %s, want %s", i, got, want[i])
			}
			if got == "created" {
				seq++
				if o.Record.ReceivedSeq != seq || o.Record.EventID != ids[i] {
					t.Fatalf("record %d stored as %d %s, want %d %s: not in page order", i, o.Record.ReceivedSeq, o.Record.EventID, seq, ids[i])
				}
			}
		}
		if n := head(t, st, pid); n != 9 {
			t.Fatalf("head %d, want 9 (1 before, 8 of the page)", n)
		}
		if _, err := st.GetKey(ctx, pid, stranger.KeyID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the unknown key: %v", err)
		}
	})
}
