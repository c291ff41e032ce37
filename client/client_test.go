package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
)

func postN(t *testing.T, f *wireRelay, s *Session, n int) []*correspondence.Event {
	t.Helper()
	var out []*correspondence.Event
	for i := range n {
		ev, err := s.Sign(testAt(), Progress(fmt.Sprintf("step %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.appendDirect(t, ev)
		out = append(out, ev)
	}
	return out
}

func TestPostRetriesSameBytes(t *testing.T) {
	f := newWireRelay(t)
	c := f.client(t)
	c.Keys = testKeyring(t)
	ev, err := fixedSession(t).Sign(testAt(), Intent("Coordinate the first slice."))
	if err != nil {
		t.Fatal(err)
	}
	f.fail503 = 2
	res, err := c.Post(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Record.Receipt.ReceivedSeq != 1 || !res.Record.Verified || res.Record.Event.ID != ev.ID {
		t.Fatalf("result %+v", res)
	}
	want, _ := ev.CanonicalJSON()
	if len(f.postBodies) != 3 {
		t.Fatalf("%d POSTs, want 3 (two 503 then 201)", len(f.postBodies))
	}
	for i, b := range f.postBodies {
		if !bytes.Equal(b, want) {
			t.Fatalf("attempt %d sent other bytes", i)
		}
	}
	// An exact retry is 200 with the original receipt.
	res2, err := c.Post(t.Context(), ev)
	if err != nil || res2.Created || res2.Record.Receipt != res.Record.Receipt {
		t.Fatalf("retry: %+v, %v", res2, err)
	}
}

func TestPostGivesUpAndReportsCode(t *testing.T) {
	f := newWireRelay(t)
	c := f.client(t)
	c.Retry.MaxAttempts = 3
	ev, _ := fixedSession(t).Sign(testAt(), Intent("x"))
	f.fail503 = 5
	_, err := c.Post(t.Context(), ev)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 503 || ae.Code != "correspondence_append_unavailable" || ae.Hint != "retry the same event later" {
		t.Fatalf("err %v", err)
	}
	if len(f.postBodies) != 3 {
		t.Fatalf("%d attempts, want 3", len(f.postBodies))
	}
	if got := err.Error(); got != "relay answered 503 correspondence_append_unavailable: the event log is unavailable (hint: retry the same event later)" {
		t.Fatalf("message %q", got)
	}
}

func TestPostRefusalNotRetried(t *testing.T) {
	f := newWireRelay(t)
	c := f.client(t)
	ev, _ := fixedSession(t).Sign(testAt(), Intent("x"))
	ev.Parents = []string{} // the refs are fine; break the scope instead
	ev.Scope.Paths = []string{"/abs"}
	_ = testSigner(t).Sign(ev)
	_, err := c.Post(t.Context(), ev)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != correspondence.CodeEventInvalid || len(ae.Issues) == 0 {
		t.Fatalf("err %v", err)
	}
	if len(f.postBodies) != 1 {
		t.Fatalf("%d attempts, want 1", len(f.postBodies))
	}
	c.Token = "wrong"
	_, err = c.Post(t.Context(), ev)
	if !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("err %v", err)
	}
}

func TestPostNetworkErrorRetried(t *testing.T) {
	f := newWireRelay(t)
	// The first two attempts go to a closed port, then to the relay.
	dead := "http://127.0.0.1:1"
	c := f.client(t)
	n := 0
	c.HTTP = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		if n <= 2 {
			u, _ := url.Parse(dead + r.URL.Path)
			r2 := r.Clone(r.Context())
			r2.URL = u
			return http.DefaultTransport.RoundTrip(r2)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	ev, _ := fixedSession(t).Sign(testAt(), Intent("x"))
	res, err := c.Post(t.Context(), ev)
	if err != nil || !res.Created || n != 3 {
		t.Fatalf("res %+v err %v attempts %d", res, err, n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestEventsPaging(t *testing.T) {
	f := newWireRelay(t)
	evs := postN(t, f, fixedSession(t), 5)
	c := f.client(t)
	c.Keys = testKeyring(t)
	p, err := c.EventsPage(t.Context(), EventsQuery{RepositoryID: testAt().RepositoryID, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 2 || !p.HasMore || p.NextAfter != 4 {
		t.Fatalf("page: %d records next %d more %v", len(p.Records), p.NextAfter, p.HasMore)
	}
	if voice, err := p.Links.Get(RelVoice, ""); err != nil || voice != f.srv.URL+"/v1/correspondence/voice?repository_id="+testAt().RepositoryID {
		t.Fatalf("voice link %q %v", voice, err)
	}
	var ids []string
	var seqs []int64
	for r, err := range c.Events(t.Context(), EventsQuery{RepositoryID: testAt().RepositoryID, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if !r.Verified {
			t.Fatal("unverified record")
		}
		ids = append(ids, r.Event.ID)
		seqs = append(seqs, r.Receipt.ReceivedSeq)
	}
	var want []string
	for _, e := range evs {
		want = append(want, e.ID)
	}
	if !slices.Equal(ids, want) || !slices.Equal(seqs, []int64{1, 4, 7, 10, 13}) {
		t.Fatalf("ids %v seqs %v", ids, seqs)
	}
	// After the cursor, only the later records.
	p, _ = c.EventsPage(t.Context(), EventsQuery{RepositoryID: testAt().RepositoryID, After: 10})
	if len(p.Records) != 1 || p.Records[0].Event.ID != evs[4].ID || p.HasMore || p.NextAfter != 13 {
		t.Fatalf("after 10: %+v", p)
	}
	p, _ = c.EventsPage(t.Context(), EventsQuery{RepositoryID: testAt().RepositoryID, After: 13})
	if len(p.Records) != 0 || p.NextAfter != 13 {
		t.Fatalf("after 13: %+v", p)
	}
}

func TestReadRefusesBadRecords(t *testing.T) {
	f := newWireRelay(t)
	postN(t, f, fixedSession(t), 1)
	c := f.client(t)
	q := EventsQuery{RepositoryID: testAt().RepositoryID}

	c.Keys = Keyring{}
	if _, err := c.EventsPage(t.Context(), q); !errors.Is(err, ErrUnknownSigningKey) {
		t.Fatalf("unknown key: %v", err)
	}
	c.Keys = testKeyring(t)
	f.tamper = true
	if _, err := c.EventsPage(t.Context(), q); !errors.Is(err, correspondence.ErrSignatureInvalid) {
		t.Fatalf("tampered: %v", err)
	}
	// Without a keyring records are returned, marked unverified.
	c.Keys = nil
	p, err := c.EventsPage(t.Context(), q)
	if err != nil || len(p.Records) != 1 || p.Records[0].Verified {
		t.Fatalf("no keyring: %+v %v", p, err)
	}
}

func TestFollowExactlyOnce(t *testing.T) {
	f := newWireRelay(t)
	s := fixedSession(t)
	evs := postN(t, f, s, 2) // seqs 1, 4
	c := f.client(t)
	c.Keys = testKeyring(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan Record, 32)
	done := make(chan error, 1)
	go func() {
		for r, err := range c.Follow(ctx, FollowQuery{RepositoryID: testAt().RepositoryID, IdentityID: testSender.IdentityID, IdleTimeout: 5 * time.Second, ResyncInterval: -1}) {
			if err != nil {
				done <- err
				return
			}
			got <- r
		}
		done <- nil
	}()
	next := func() Record {
		t.Helper()
		select {
		case r := <-got:
			return r
		case err := <-done:
			t.Fatalf("follow ended: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("timed out waiting for a record")
		}
		return Record{}
	}
	// The replay after connecting yields the stored records.
	for _, e := range evs {
		if r := next(); r.Event.ID != e.ID {
			t.Fatalf("got %s want %s", r.Event.ID, e.ID)
		}
	}
	// New records, then the same frame three times and a stale one.
	more := postN(t, f, s, 2) // seqs 7, 10
	for _, fr := range []string{changeFrame(10), changeFrame(10), changeFrame(4), changeFrame(10)} {
		f.wake <- fr
	}
	for _, e := range more {
		if r := next(); r.Event.ID != e.ID || !r.Verified {
			t.Fatalf("got %s want %s", r.Event.ID, e.ID)
		}
	}
	// A record lands unannounced, then the stream drops; the reconnect
	// carries Last-Event-ID and its replay yields the record once. (Posting
	// before the drop keeps the test deterministic: posted after it, the
	// reconnect's replay could run first and the record would wait for a
	// wake frame that never comes.)
	last := postN(t, f, s, 1) // seq 13
	f.wake <- "CLOSE"
	if r := next(); r.Event.ID != last[0].ID || r.Receipt.ReceivedSeq != 13 {
		t.Fatalf("after reconnect got %s seq %d", r.Event.ID, r.Receipt.ReceivedSeq)
	}
	f.wake <- changeFrame(13)
	f.wake <- changeFrame(13)
	select {
	case r := <-got:
		t.Fatalf("duplicate record %s seq %d", r.Event.ID, r.Receipt.ReceivedSeq)
	case <-time.After(200 * time.Millisecond):
	}
	f.mu.Lock()
	ids := slices.Clone(f.lastEventID)
	f.mu.Unlock()
	if len(ids) != 2 || ids[0] != "" || ids[1] != "10" {
		t.Fatalf("Last-Event-ID per connection %q, want [\"\" \"10\"]", ids)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("end: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not end on cancel")
	}
}

func TestFollowStopsOnRefusal(t *testing.T) {
	f := newWireRelay(t)
	c := f.client(t)
	c.Token = "wrong"
	for _, err := range c.Follow(t.Context(), FollowQuery{RepositoryID: "r", IdentityID: testSender.IdentityID}) {
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 401 {
			t.Fatalf("err %v", err)
		}
		return
	}
	t.Fatal("Follow yielded nothing")
}

func TestFollowPollsWithoutWake(t *testing.T) {
	f := newWireRelay(t)
	s := fixedSession(t)
	first := postN(t, f, s, 1)
	c := f.client(t)
	// A relay without the wake route: every live URL is 404.
	inner := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/wake/voice" {
			writeErr(w, 404, "not_found", "no such resource", "")
			return
		}
		inner.ServeHTTP(w, r)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []string
	for r, err := range c.Follow(ctx, FollowQuery{RepositoryID: testAt().RepositoryID, IdentityID: testSender.IdentityID, PollInterval: 10 * time.Millisecond}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Event.ID)
		if len(got) == 1 {
			postN(t, f, s, 1)
		}
		if len(got) == 2 {
			break
		}
	}
	if got[0] != first[0].ID || got[1] == got[0] {
		t.Fatalf("got %v", got)
	}
}
