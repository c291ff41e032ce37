package correspondence_test

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// benchEvent is one signed event prepared for the per-stage benchmarks.
type benchEvent struct {
	name string
	raw  []byte
	pub  ed25519.PublicKey
}

// benchEvents returns the seed's signing-vector event (about 1.1 KiB) and
// a valid handoff of about 60 KiB: 64 paths of 250 scalar values, 16
// parents, 2000- and 1000-scalar texts, maximal ids and branch.
func benchEvents(b *testing.B) []benchEvent {
	b.Helper()
	pub := testKey(b).Public().(ed25519.PublicKey)
	small, err := canonicaljson.Canonical(claimOpenEvent(b))
	if err != nil {
		b.Fatal(err)
	}

	body := canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue(strings.Repeat("Summary text \u00e9\u20ac. ", 117))},
		canonicaljson.Member{Name: "next_safe_action", Value: canonicaljson.StringValue(strings.Repeat("Run the tests. ", 66) + "Done._____")},
		canonicaljson.Member{Name: "handoff_id", Value: canonicaljson.StringValue("77777777-7777-4777-8777-777777777777")},
	)
	e := baseEvent(b, correspondence.KindHandoff, body, eventIDs(16))
	e.RepositoryID = "repo:" + strings.Repeat("r", 251)
	e.ThreadID = "task:" + strings.Repeat("t", 251)
	e.Scope.Branch = strp(strings.Repeat("feature/\u00e9", 28) + "abc")
	e.Scope.Paths = make([]string, 64)
	for i := range e.Scope.Paths {
		e.Scope.Paths[i] = eventID(i)[61:] + "/" + strings.Repeat("\U0001F600\U0001F601\U0001F602/", 59) + "end"
	}
	if err := e.Sign(testKey(b)); err != nil {
		b.Fatal(err)
	}
	big, err := e.CanonicalJSON()
	if err != nil {
		b.Fatal(err)
	}
	if len(big) < 55<<10 || len(big) > 64<<10 {
		b.Fatalf("big event is %d bytes, want about 60 KiB", len(big))
	}
	out := []benchEvent{{"small", small, pub}, {"big", big, pub}}
	for _, be := range out {
		ev, err := correspondence.ParseEvent(be.raw)
		if err != nil {
			b.Fatalf("%s: %v %+v", be.name, err, issuesOf(err))
		}
		if err := ev.Verify(pub); err != nil {
			b.Fatalf("%s: %v", be.name, err)
		}
	}
	return out
}

func BenchmarkStages(b *testing.B) {
	for _, be := range benchEvents(b) {
		v, _ := canonicaljson.ParseObject(be.raw)
		ev, _ := correspondence.ParseEvent(be.raw)
		core, _ := ev.CoreJCS()
		digest := correspondence.SigningDigest(core)
		sig, _ := correspondence.DecodeSignature(ev.Signature)

		b.Run(be.name+"/1-parse", func(b *testing.B) {
			b.SetBytes(int64(len(be.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := canonicaljson.ParseObject(be.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/2-validate", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if correspondence.Validate(v) != nil {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(be.name+"/2b-typed", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := correspondence.EventFromValue(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/3-core-canonicalize", func(b *testing.B) {
			b.ReportAllocs()
			// As Verify does it: rebuild the value, canonicalize into a
			// recycled buffer.
			buf := make([]byte, 0, 2048)
			for b.Loop() {
				var err error
				if buf, err = canonicaljson.AppendCanonicalWithout(buf[:0], ev.Value(), "event_id", "signature"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/4-digest-and-event-id", func(b *testing.B) {
			b.ReportAllocs()
			var signed []byte
			for b.Loop() {
				_ = correspondence.SigningDigest(core)
				signed = correspondence.AppendSignedFromCore(signed[:0], core, ev.Signature)
				if correspondence.EventIDOf(signed) != ev.ID {
					b.Fatal("id")
				}
			}
		})
		b.Run(be.name+"/5-ed25519-verify", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !ed25519.Verify(be.pub, digest[:], sig) {
					b.Fatal("verify")
				}
			}
		})
		b.Run(be.name+"/6a-parse-event", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := correspondence.ParseEvent(be.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/6b-verify-method", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ev.Verify(be.pub); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/6-parse-event-and-verify", func(b *testing.B) {
			b.SetBytes(int64(len(be.raw)))
			b.ReportAllocs()
			for b.Loop() {
				e, err := correspondence.ParseEvent(be.raw)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Verify(be.pub); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
