package ingest_test

import (
	"bytes"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store/storetest"
)

// FuzzAppend feeds arbitrary bytes to Append for a project with one
// registered signer. Append must never panic, and it must store only
// events that parse, belong to the project and verify under the signer's
// key: a refusal leaves the head where it was, and an acceptance advances
// it by one (or, for an exact retry, leaves it and reports Created false).
func FuzzAppend(f *testing.F) {
	st := openStore(f)
	pid, sg := newProject(f, st)
	in := ingest.New(st, ingest.Options{})
	for i := range 3 {
		_, raw := sg.Event(f, storetest.Spec{Summary: string(rune('a' + i))})
		f.Add(raw)
		f.Add(bytes.ReplaceAll(raw, []byte(`"work"`), []byte(`"w\u006frk"`)))
		f.Add(raw[:len(raw)/2])
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"protocol":"agent-correspondence/v0.1"}`))

	f.Fuzz(func(t *testing.T, raw []byte) {
		before := head(t, st, pid)
		res, err := in.Append(ctx, pid, raw)
		after := head(t, st, pid)
		if err != nil {
			if after != before {
				t.Fatalf("refused (%v) but head moved %d → %d", err, before, after)
			}
			return
		}
		want := before
		if res.Created {
			want++
		}
		if after != want {
			t.Fatalf("created %v but head moved %d → %d", res.Created, before, after)
		}
		ev, err := correspondence.ParseEvent(res.Record.Event)
		if err != nil {
			t.Fatalf("stored bytes do not parse: %v", err)
		}
		if ev.ProjectID != pid || ev.Sender.SigningKeyID != sg.KeyID || ev.Sender.IdentityID != sg.IdentityID {
			t.Fatalf("stored an event of %s/%s/%s", ev.ProjectID, ev.Sender.IdentityID, ev.Sender.SigningKeyID)
		}
		if err := ev.Verify(sg.Pub); err != nil {
			t.Fatalf("stored an event that does not verify: %v", err)
		}
	})
}
