package matrix_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestMatrixSubmissionRevokedKey: a submission signed by a key the
// project has revoked is refused in the reply with
// sender_or_signing_key_not_active (403, as POST would say) and never
// stored.
func TestMatrixSubmissionRevokedKey(t *testing.T) {
	e := newEnv(t)
	e.bind()
	e.startRelay(e.st)
	revoked := storetest.NewSigner(t, e.signer.ProjectID).Register(t, e.st)
	_, raw := revoked.Event(t, storetest.Spec{Summary: "signed before the revocation"})
	if _, err := e.st.RevokeKey(ctx, e.signer.ProjectID, revoked.KeyID); err != nil {
		t.Fatal(err)
	}
	o := e.oneReply(e.submit(raw))
	if o.OK || o.Status != 403 || o.Error != "sender_or_signing_key_not_active" {
		t.Fatalf("outcome %+v, want 403 sender_or_signing_key_not_active", o)
	}
	if head, _, _ := e.st.Head(ctx, e.signer.ProjectID); head != 0 {
		t.Fatalf("head %d: the refused event was stored", head)
	}
}

// TestMatrixReferenceDendrite: a record too large for one PDU reaches the
// room as a reference (event id, kind, the relay URL of exactly that
// record) with a notice saying so, in order between whole records.
func TestMatrixReferenceDendrite(t *testing.T) {
	e := newEnv(t)
	e.bind()
	e.startRelay(e.st)
	e.appendN(1)
	// The largest events the schema admits: 64 paths of 4-byte scalars.
	var paths []string
	for i := range 64 {
		paths = append(paths, fmt.Sprintf("p%02d/%s", i, strings.Repeat("𝔸", 230)))
	}
	big, raw := e.signer.Event(t, storetest.Spec{Paths: paths, Summary: strings.Repeat("𝔸", 1000)})
	if len(raw) <= matrix.MaxContentBytes || len(raw) > ingest.MaxEventBytes {
		t.Fatalf("event of %d bytes does not test a reference", len(raw))
	}
	if _, err := ingest.New(e.st, ingest.Options{}).Append(ctx, e.signer.ProjectID, raw); err != nil {
		t.Fatal(err)
	}
	e.appendN(1)
	var recs, notices []*event.Event
	waitFor(t, 20*time.Second, "three records and three notices in the room", func() bool {
		recs, notices = nil, nil
		for _, ev := range e.roomEvents() {
			switch ev.Type {
			case event.EventMessage:
				notices = append(notices, ev)
			default:
				if ev.Type.Type == matrix.EventTypeRecord {
					recs = append(recs, ev)
				}
			}
		}
		return len(recs) >= 3 && len(notices) >= 3
	})
	if len(recs) != 3 || len(notices) != 3 {
		t.Fatalf("%d records, %d notices, want 3 each", len(recs), len(notices))
	}
	var c struct {
		Event     json.RawMessage   `json:"event"`
		Reference *matrix.Reference `json:"reference"`
	}
	if err := json.Unmarshal(recs[1].Content.VeryRaw, &c); err != nil || c.Reference == nil || c.Event != nil {
		t.Fatalf("the large record went as %s, want a reference only", recs[1].Content.VeryRaw[:min(200, len(recs[1].Content.VeryRaw))])
	}
	ref := c.Reference
	if ref.EventID != big.ID || ref.Kind != string(big.Kind) || ref.ReceivedSeq != "2" ||
		!strings.HasPrefix(ref.URL, "http://relay.test/v1/correspondence/events?") || !strings.Contains(ref.URL, "after=1") {
		t.Errorf("reference %+v", ref)
	}
	var n struct {
		Body string `json:"body"`
	}
	if err := json.Unmarshal(notices[1].Content.VeryRaw, &n); err != nil || !strings.Contains(n.Body, "too large") || len(n.Body) > 600 {
		t.Errorf("notice %.300q does not point to the relay in one short line", n.Body)
	}
	for _, i := range []int{0, 2} { // the neighbours go whole
		if !strings.Contains(string(recs[i].Content.VeryRaw), `"event":`) {
			t.Errorf("record %d went as a reference", i)
		}
	}
	e.caughtUp()
}

// TestMatrixOutageIsolation: with Dendrite stopped, appends succeed as
// fast as with it up, while the courier's Runner.Status shows the lag and
// a last error; after Dendrite is back the room catches up, each record
// once.
func TestMatrixOutageIsolation(t *testing.T) {
	e := newEnv(t)
	e.bind()
	e.startRelay(e.st)
	ids := e.appendN(3)
	e.verifyRoom(ids, 20*time.Second)
	e.caughtUp()

	timed := func(n int) []time.Duration {
		var d []time.Duration
		for range n {
			t0 := time.Now()
			ids = append(ids, e.appendN(1)...)
			d = append(d, time.Since(t0))
		}
		slices.Sort(d)
		return d
	}
	up := timed(20)
	e.verifyRoom(ids, 20*time.Second)
	e.hs.Stop()
	down := timed(20) // appendN fails the test on any error
	t.Logf("append latency p50/max: Dendrite up %v/%v, down %v/%v", up[10], up[19], down[10], down[19])
	if down[10] > 3*up[10]+20*time.Millisecond || down[19] > time.Second {
		t.Errorf("appends slowed by the outage: p50 %v (up %v), max %v", down[10], up[10], down[19])
	}
	var st couriers.Status
	waitFor(t, 20*time.Second, "the courier reports its lag and a last error", func() bool {
		st = e.runner.Status()
		return st.Behind >= 20 && st.Failing == 1 && st.LastError != ""
	})
	t.Logf("status while Dendrite is down: %+v", st)
	if err := e.hs.Resume(); err != nil {
		t.Fatal(err)
	}
	e.verifyRoom(ids, 40*time.Second)
	e.caughtUp()
	waitFor(t, 10*time.Second, "the courier reports no lag", func() bool {
		st = e.runner.Status()
		return st.Behind == 0 && st.Failing == 0
	})
}
