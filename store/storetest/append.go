package storetest

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

func encodePub(s *Signer) string { return correspondence.EncodePublicKey(s.Pub) }

// newProject creates a project with one registered signer.
func newProject(t *testing.T, s store.Store) (string, *Signer) {
	t.Helper()
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	return pid, NewSigner(t, pid).Register(t, s)
}

func appendOK(t *testing.T, s store.Store, ev *correspondence.Event, canonical []byte) store.AppendResult {
	t.Helper()
	res, err := s.Append(ctx, ev, canonical)
	if err != nil {
		t.Fatalf("append %s: %v", ev.Kind, err)
	}
	return res
}

func testAppendCreatedAndRetry(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	ev, canonical := sg.Event(t, Spec{Parents: []string{"sha256:" + string(bytes.Repeat([]byte("ab"), 32))}})
	res := appendOK(t, s, ev, canonical)
	if !res.Created || len(res.Warnings) != 0 {
		t.Fatalf("created = %v, warnings = %v", res.Created, res.Warnings)
	}
	r := res.Record
	want := store.Record{
		ProjectID: pid, EventID: ev.ID, RepositoryID: "repo-1", ThreadID: "thread-1", Kind: correspondence.KindIntent,
		Event: canonical, ReceivedSeq: 1, ReceivedAt: r.ReceivedAt, MissingParents: ev.Parents,
		LineageStatus: correspondence.LineageNotApplicable,
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("record = %+v\nwant %+v", r, want)
	}
	checkDBTime(t, "received_at", r.ReceivedAt)

	again := appendOK(t, s, ev, bytes.Clone(canonical))
	if again.Created {
		t.Fatal("exact retry reported Created")
	}
	if !reflect.DeepEqual(again.Record, r) {
		t.Fatalf("retry record = %+v\nwant original %+v", again.Record, r)
	}
	seq, at, err := s.Head(ctx, pid)
	if err != nil || seq != 1 || !at.Equal(r.ReceivedAt) {
		t.Fatalf("head = %d %v %v, want 1 %v", seq, at, err, r.ReceivedAt)
	}
	page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: "repo-1", Limit: 10}))
	if len(page.Records) != 1 || page.HasMore || !reflect.DeepEqual(page.Records[0], r) {
		t.Fatalf("page = %+v", page)
	}
}

func testAppendCollision(t *testing.T, s store.Store) {
	_, sg := newProject(t, s)
	ev, canonical := sg.Event(t, Spec{})
	appendOK(t, s, ev, canonical)
	other := bytes.Replace(canonical, []byte(`"work"`), []byte(`"play"`), 1)
	if bytes.Equal(other, canonical) {
		t.Fatal("test bytes did not change")
	}
	_, err := s.Append(ctx, ev, other)
	wantErr(t, "same id, other bytes", err, store.ErrEventIDCollision)
}

func testAppendUnknownProject(t *testing.T, s store.Store) {
	sg := NewSigner(t, NewUUID())
	ev, canonical := sg.Event(t, Spec{})
	_, err := s.Append(ctx, ev, canonical)
	wantErr(t, "unknown project", err, store.ErrNotFound)
}

func testAppendSenderNotActive(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	b := NewSigner(t, pid).Register(t, s)
	c := NewSigner(t, pid).Register(t, s)
	d := NewSigner(t, pid).Register(t, s)
	must[store.Identity](t, "deactivate")(s.DeactivateIdentity(ctx, pid, b.IdentityID))
	must[store.SigningKey](t, "revoke")(s.RevokeKey(ctx, pid, c.KeyID))
	// d signs with a's key id: a key of another identity.
	d.KeyID, d.Priv, d.Pub = a.KeyID, a.Priv, a.Pub
	// e is registered in another project.
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	e := NewSigner(t, other).Register(t, s)
	e.ProjectID = pid
	// f is not registered at all.
	f := NewSigner(t, pid)
	for _, tc := range []struct {
		name string
		sg   *Signer
	}{{"inactive identity", b}, {"revoked key", c}, {"key of another identity", d}, {"identity of another project", e}, {"unknown identity", f}} {
		t.Run(tc.name, func(t *testing.T) {
			ev, canonical := tc.sg.Event(t, Spec{})
			_, err := s.Append(ctx, ev, canonical)
			wantErr(t, tc.name, err, store.ErrSenderNotActive)
		})
	}
	if seq, _, _ := s.Head(ctx, pid); seq != 0 {
		t.Fatalf("refused appends moved the head to %d", seq)
	}
}

func testReceivedSeq(t *testing.T, s store.Store) {
	p1, a := newProject(t, s)
	p2, b := newProject(t, s)
	var seqs1, seqs2 []int64
	for i := range 5 {
		ev, c := a.Event(t, Spec{})
		seqs1 = append(seqs1, appendOK(t, s, ev, c).Record.ReceivedSeq)
		if i%2 == 0 {
			ev, c := b.Event(t, Spec{})
			seqs2 = append(seqs2, appendOK(t, s, ev, c).Record.ReceivedSeq)
		}
	}
	// Spec §7 allows gaps, so only order and independence are required: a
	// fresh project starts at 1 whatever the other project holds.
	for _, seqs := range [][]int64{seqs1, seqs2} {
		if seqs[0] != 1 {
			t.Fatalf("seqs = %v and %v, want each project to start at 1", seqs1, seqs2)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Fatalf("seqs = %v and %v, want strictly increasing", seqs1, seqs2)
			}
		}
	}
	for _, tc := range []struct {
		pid  string
		want int64
	}{{p1, seqs1[len(seqs1)-1]}, {p2, seqs2[len(seqs2)-1]}} {
		if seq, _, err := s.Head(ctx, tc.pid); err != nil || seq != tc.want {
			t.Fatalf("head = %d %v, want %d", seq, err, tc.want)
		}
	}
}

func testEventsPaging(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	type stored struct {
		repo, thread string
		rec          store.Record
	}
	var all []stored
	layout := []struct{ repo, thread string }{
		{"repo-1", "t-a"}, {"repo-1", "t-b"}, {"repo-2", "t-a"}, {"repo-1", "t-a"}, {"repo-1", "t-b"},
		{"repo-1", "t-a"}, {"repo-2", "t-b"}, {"repo-1", "t-a"},
	}
	for _, l := range layout {
		ev, c := sg.Event(t, Spec{RepositoryID: l.repo, ThreadID: l.thread})
		all = append(all, stored{l.repo, l.thread, appendOK(t, s, ev, c).Record})
	}
	pick := func(repo, thread string, after int64) []store.Record {
		var out []store.Record
		for _, x := range all {
			if x.repo == repo && (thread == "" || x.thread == thread) && x.rec.ReceivedSeq > after {
				out = append(out, x.rec)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		repo, thread string
		after        int64
		limit        int
	}{
		{"repo first page", "repo-1", "", 0, 2},
		{"repo after 2", "repo-1", "", 2, 2},
		{"repo after 6", "repo-1", "", 6, 2},
		{"repo rest", "repo-1", "", 0, 200},
		{"repo exact fit", "repo-1", "", 0, 6},
		{"thread", "repo-1", "t-a", 0, 3},
		{"thread after", "repo-1", "t-a", 4, 3},
		{"other repo", "repo-2", "", 0, 1},
		{"unknown repo", "repo-9", "", 0, 10},
		{"after the end", "repo-1", "", 8, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			match := pick(tc.repo, tc.thread, tc.after)
			want := store.EventPage{Records: match[:min(len(match), tc.limit)], HasMore: len(match) > tc.limit}
			got, err := s.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: tc.repo, ThreadID: tc.thread, After: tc.after, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Records) == 0 && len(want.Records) == 0 {
				got.Records, want.Records = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("page = %+v\nwant %+v", seqsOf(got.Records), seqsOf(want.Records))
			}
		})
	}
	// Another project's records never appear.
	p2, b := newProject(t, s)
	ev, c := b.Event(t, Spec{RepositoryID: "repo-1"})
	appendOK(t, s, ev, c)
	page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: p2, RepositoryID: "repo-1", Limit: 100}))
	if len(page.Records) != 1 || page.Records[0].EventID != ev.ID || page.Records[0].ProjectID != p2 {
		t.Fatalf("project 2 page = %v", seqsOf(page.Records))
	}
}

func seqsOf(rs []store.Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.ReceivedSeq)
	}
	return out
}

func testMissingParents(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	parentA, ca := sg.Event(t, Spec{Summary: "a"})
	parentB, cb := sg.Event(t, Spec{Summary: "b"})
	wantMissing := []string{parentA.ID, parentB.ID}
	slices.Sort(wantMissing)
	child, cc := sg.Event(t, Spec{Parents: []string{parentB.ID, parentA.ID}})
	res := appendOK(t, s, child, cc)
	if !slices.Equal(res.Record.MissingParents, wantMissing) {
		t.Fatalf("missing = %v, want %v", res.Record.MissingParents, wantMissing)
	}
	read := func() []string {
		t.Helper()
		page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: "repo-1", Limit: 100}))
		for _, r := range page.Records {
			if r.EventID == child.ID {
				return r.MissingParents
			}
		}
		t.Fatal("child not read back")
		return nil
	}
	appendOK(t, s, parentA, ca)
	if got := read(); !slices.Equal(got, []string{parentB.ID}) {
		t.Fatalf("after parent A: missing = %v", got)
	}
	// The same parent id stored in another project does not count.
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	x := NewSigner(t, other).Register(t, s)
	xe, xc := x.Event(t, Spec{})
	appendOK(t, s, xe, xc)
	appendOK(t, s, parentB, cb)
	if got := read(); len(got) != 0 || got == nil {
		t.Fatalf("after both parents: missing = %#v, want []", got)
	}
	again := appendOK(t, s, child, cc)
	if len(again.Record.MissingParents) != 0 {
		t.Fatalf("retry after parents arrived: missing = %v", again.Record.MissingParents)
	}
}

func testSessionFork(t *testing.T, s store.Store) {
	_, sg := newProject(t, s)
	first, c1 := sg.Event(t, Spec{SessionSeq: 7, Summary: "one"})
	if res := appendOK(t, s, first, c1); len(res.Warnings) != 0 {
		t.Fatalf("first: warnings %v", res.Warnings)
	}
	// Same session, other seq: no fork. Same seq, other device: no fork.
	other, c2 := sg.Event(t, Spec{SessionSeq: 8})
	if res := appendOK(t, s, other, c2); len(res.Warnings) != 0 {
		t.Fatalf("other seq: warnings %v", res.Warnings)
	}
	dev := *sg
	dev.DeviceID = NewUUID()
	odev, c3 := dev.Event(t, Spec{SessionSeq: 7})
	if res := appendOK(t, s, odev, c3); len(res.Warnings) != 0 {
		t.Fatalf("other device: warnings %v", res.Warnings)
	}
	second, c4 := sg.Event(t, Spec{SessionSeq: 7, Summary: "two"})
	res := appendOK(t, s, second, c4)
	want := []string{first.ID, second.ID}
	slices.Sort(want)
	if !res.Created || len(res.Warnings) != 1 || res.Warnings[0].Code != "session_fork" ||
		!slices.Equal(res.Warnings[0].EventIDs, want) || res.Warnings[0].Detail == "" {
		t.Fatalf("fork warnings = %+v, want session_fork %v", res.Warnings, want)
	}
	// Both are kept, in receipt order.
	page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: sg.ProjectID, RepositoryID: "repo-1", Limit: 100}))
	if len(page.Records) != 4 || page.Records[0].EventID != first.ID || page.Records[3].EventID != second.ID {
		t.Fatalf("records = %v", seqsOf(page.Records))
	}
}

// testConcurrentAppends: 16 goroutines × 50 appends over 4 projects.
func testConcurrentAppends(t *testing.T, s store.Store) {
	const workers, each, projects = 16, 50, 4
	signers := make([]*Signer, projects)
	for i := range signers {
		_, signers[i] = newProject(t, s)
	}
	type got struct {
		pid string
		rec store.Record
	}
	results := make([][]got, workers)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		sg := *signers[w%projects]
		sg.SessionID = NewUUID() // a session per worker, so no forks
		sg.seq = 0
		evs := make([]*correspondence.Event, each)
		cs := make([][]byte, each)
		for i := range each {
			evs[i], cs[i] = sg.Event(t, Spec{Summary: fmt.Sprintf("w%d e%d", w, i)})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := s.Append(ctx, evs[i], cs[i])
				if err != nil {
					errs <- err
					return
				}
				if !res.Created || len(res.Warnings) != 0 {
					errs <- fmt.Errorf("append %d/%d: created %v warnings %v", w, i, res.Created, res.Warnings)
					return
				}
				results[w] = append(results[w], got{sg.ProjectID, res.Record})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	byProject := map[string]map[int64]store.Record{}
	for w, rs := range results {
		last := int64(0)
		for _, g := range rs {
			if g.rec.ReceivedSeq <= last {
				t.Fatalf("worker %d: seq %d after %d", w, g.rec.ReceivedSeq, last)
			}
			last = g.rec.ReceivedSeq
			m := byProject[g.pid]
			if m == nil {
				m = map[int64]store.Record{}
				byProject[g.pid] = m
			}
			if prev, dup := m[g.rec.ReceivedSeq]; dup {
				t.Fatalf("seq %d given to %s and %s", g.rec.ReceivedSeq, prev.EventID, g.rec.EventID)
			}
			m[g.rec.ReceivedSeq] = g.rec
		}
	}
	for _, sg := range signers {
		m := byProject[sg.ProjectID]
		n := int64(workers / projects * each)
		if int64(len(m)) != n {
			t.Fatalf("project has %d receipts, want %d", len(m), n)
		}
		var read []store.Record
		after := int64(0)
		for {
			page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: sg.ProjectID, RepositoryID: "repo-1", After: after, Limit: 200}))
			read = append(read, page.Records...)
			if !page.HasMore {
				break
			}
			after = page.Records[len(page.Records)-1].ReceivedSeq
		}
		if int64(len(read)) != n {
			t.Fatalf("read %d records, want %d", len(read), n)
		}
		for i, r := range read {
			if i > 0 && r.ReceivedSeq <= read[i-1].ReceivedSeq {
				t.Fatalf("read order: %d after %d", r.ReceivedSeq, read[i-1].ReceivedSeq)
			}
			if !reflect.DeepEqual(m[r.ReceivedSeq], r) {
				t.Fatalf("seq %d: read %s, receipt said %s", r.ReceivedSeq, r.EventID, m[r.ReceivedSeq].EventID)
			}
		}
		if seq, _, _ := s.Head(ctx, sg.ProjectID); seq != read[len(read)-1].ReceivedSeq {
			t.Fatalf("head %d, last read %d", seq, read[len(read)-1].ReceivedSeq)
		}
	}
}
