package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// claimSpec describes one claim event appended by addClaim. Zero fields
// take defaults: Repo "repo-1", Thread "thread-1", a fresh ClaimID,
// generation 1, Paths ["src"], Status valid. Edit, when set, changes the
// built event before it is signed again.
type claimSpec struct {
	Repo, Thread, ClaimID string
	Gen                   int64
	Pred                  string
	Paths                 []string
	Expires               time.Time // zero: claim.release
	Edit                  func(ev *correspondence.Event)
	Status                correspondence.LineageStatus
}

// addClaim signs and appends a claim of sg and returns the active row the
// projection would show for it (without competitors): every field derived
// from what was signed and the append's receipt, Scope spelled out by hand.
func addClaim(t *testing.T, s store.Store, sg *Signer, sp claimSpec) store.ActiveClaim {
	t.Helper()
	if sp.Repo == "" {
		sp.Repo = "repo-1"
	}
	if sp.Thread == "" {
		sp.Thread = "thread-1"
	}
	if sp.ClaimID == "" {
		sp.ClaimID = NewUUID()
	}
	if sp.Gen == 0 {
		sp.Gen = 1
	}
	if sp.Paths == nil {
		sp.Paths = []string{"src"}
	}
	if sp.Status == "" {
		sp.Status = correspondence.LineageValid
	}
	ev, canonical := sg.Claim(t, sp.Repo, sp.ClaimID, sp.Gen, sp.Pred, sp.Paths, sp.Expires)
	if ev.ThreadID != sp.Thread || sp.Edit != nil {
		ev.ThreadID = sp.Thread
		if sp.Edit != nil {
			sp.Edit(ev)
		}
		if err := ev.Sign(sg.Priv); err != nil {
			t.Fatal(err)
		}
		var err error
		if canonical, err = ev.CanonicalJSON(); err != nil {
			t.Fatal(err)
		}
	}
	res := appendOK(t, s, ev, canonical)
	if res.Record.LineageStatus != sp.Status {
		t.Fatalf("append %s generation %d: lineage %s, want %s", ev.Kind, sp.Gen, res.Record.LineageStatus, sp.Status)
	}
	return store.ActiveClaim{
		ClaimTip: store.ClaimTip{
			EventID: ev.ID, ReceivedSeq: res.Record.ReceivedSeq, RepositoryID: sp.Repo, ThreadID: sp.Thread,
			ClaimID: sp.ClaimID, Kind: ev.Kind, Generation: sp.Gen, RootIdentityID: sg.IdentityID,
			DeviceID: ev.Sender.DeviceID, SessionID: ev.Sender.SessionID, Paths: ev.Scope.Paths, ExpiresAt: sp.Expires,
		},
		Scope: scopeJSON(t, ev.Scope),
	}
}

// scopeJSON spells the RFC 8785 bytes of a scope object by hand (members in
// code-point order, absent strings as null). Paths here are plain ASCII,
// which encoding/json writes as RFC 8785 does.
func scopeJSON(t *testing.T, sc correspondence.Scope) []byte {
	t.Helper()
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		b, _ := json.Marshal(*p)
		return string(b)
	}
	paths, err := json.Marshal(sc.Paths)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"base_revision":` + str(sc.BaseRevision) + `,"branch":` + str(sc.Branch) + `,"paths":` + string(paths) + `}`)
}

// competing returns c with the given competitors, sorted.
func competing(c store.ActiveClaim, ids ...string) store.ActiveClaim {
	c.CompetingEventIDs = sorted(ids)
	return c
}

// inProjectionOrder returns the rows sorted by (expires_at, event_id).
func inProjectionOrder(cs ...store.ActiveClaim) []store.ActiveClaim {
	out := slices.Clone(cs)
	slices.SortFunc(out, func(a, b store.ActiveClaim) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
	return out
}

func claimIDsOf(cs []store.ActiveClaim) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.EventID)
	}
	return out
}

// checkClaims asserts got equals want row for row, in order. Times compare
// with Equal (and must be UTC); empty and nil slices are the same.
func checkClaims(t *testing.T, what string, got, want []store.ActiveClaim) {
	t.Helper()
	if !slices.Equal(claimIDsOf(got), claimIDsOf(want)) {
		t.Fatalf("%s: claims %v\nwant %v", what, claimIDsOf(got), claimIDsOf(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Scope, w.Scope) {
			t.Errorf("%s: %s scope %s, want %s", what, g.EventID, g.Scope, w.Scope)
		}
		if !g.ExpiresAt.Equal(w.ExpiresAt) || g.ExpiresAt.Location() != time.UTC {
			t.Errorf("%s: %s expires_at %v, want %v UTC", what, g.EventID, g.ExpiresAt, w.ExpiresAt)
		}
		g.ExpiresAt, g.Scope = w.ExpiresAt, w.Scope
		for _, p := range []*[]string{&g.Paths, &g.CompetingEventIDs, &w.Paths, &w.CompetingEventIDs} {
			if len(*p) == 0 {
				*p = nil
			}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: row %d\n got %+v\nwant %+v", what, i, g.ClaimTip, w.ClaimTip)
			if !slices.Equal(g.CompetingEventIDs, w.CompetingEventIDs) {
				t.Errorf("%s: %s competing %v, want %v", what, g.EventID, g.CompetingEventIDs, w.CompetingEventIDs)
			}
		}
	}
}

// reconcile runs the project's lineage work to the end, as claims and
// voice readers do before they read.
func reconcile(t *testing.T, s store.Store, pid string) {
	t.Helper()
	for range 100 {
		incomplete, err := s.ReconcileLineage(ctx, pid, store.FrontierBudget)
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if !incomplete {
			return
		}
	}
	t.Fatal("reconcile: still incomplete after 100 rounds")
}

func claimsOf(t *testing.T, s store.Store, q store.ClaimsQuery) store.ClaimsSnapshot {
	t.Helper()
	snap, err := s.ClaimsSnapshot(ctx, q)
	if err != nil {
		t.Fatalf("claims snapshot %+v: %v", q, err)
	}
	checkDBTime(t, "claims snapshot now", snap.Now)
	return snap
}

func voiceOf(t *testing.T, s store.Store, q store.VoiceQuery) store.VoiceSnapshot {
	t.Helper()
	v, err := s.VoiceSnapshot(ctx, q)
	if err != nil {
		t.Fatalf("voice snapshot %+v: %v", q, err)
	}
	if len(v.Unavailable) != 0 {
		t.Fatalf("voice snapshot %+v: unavailable %v", q, v.Unavailable)
	}
	checkDBTime(t, "voice snapshot now", v.Now)
	return v
}

// checkHead asserts the snapshot's head is the project's (Head) and the
// receipt of want, its newest record.
func checkHead(t *testing.T, what string, s store.Store, pid string, snap store.ClaimsSnapshot, want store.Record) {
	t.Helper()
	seq, at, err := s.Head(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Head != want.ReceivedSeq || !snap.HeadAt.Equal(want.ReceivedAt) || snap.Head != seq || !snap.HeadAt.Equal(at) {
		t.Errorf("%s: head %d at %v, want %d at %v (Head says %d at %v)", what, snap.Head, snap.HeadAt, want.ReceivedSeq, want.ReceivedAt, seq, at)
	}
}

// testClaimsSnapshot: one repository holding active, renewed, released,
// expired and pending claims of two identities and two threads, beside
// another repository and another project with claims of their own.
func testClaimsSnapshot(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	b := NewSigner(t, pid).Register(t, s)

	empty := claimsOf(t, s, store.ClaimsQuery{ProjectID: pid, RepositoryID: "repo-1"})
	if empty.Head != 0 || !empty.HeadAt.IsZero() || !empty.LastExpiredAt.IsZero() || len(empty.Claims) != 0 || empty.Truncated || empty.LineageIncomplete {
		t.Fatalf("empty project: %+v", empty)
	}

	base := time.Now().UTC().Truncate(time.Millisecond)
	// Active: a1 and a3 in thread-1, b2 in thread-2 with a branch and base
	// revision and two paths in signed (unsorted) order; a3 and b2 expire
	// at the same instant, so event_id breaks the tie.
	a1 := addClaim(t, s, a, claimSpec{Expires: base.Add(2 * time.Hour)})
	rev, branch := "4f2a9c", "main"
	b2 := addClaim(t, s, b, claimSpec{Thread: "thread-2", Paths: []string{"src/z", "docs"}, Expires: base.Add(time.Hour),
		Edit: func(ev *correspondence.Event) { ev.Scope.BaseRevision, ev.Scope.Branch = &rev, &branch }})
	a3 := addClaim(t, s, a, claimSpec{Expires: base.Add(time.Hour)})
	// Renewed: only the renewal is a tip.
	o4 := addClaim(t, s, a, claimSpec{Expires: base.Add(3 * time.Hour)})
	r4 := addClaim(t, s, a, claimSpec{ClaimID: o4.ClaimID, Gen: 2, Pred: o4.EventID, Expires: base.Add(90 * time.Minute)})
	// Released: the release is a tip but never active.
	o5 := addClaim(t, s, a, claimSpec{Expires: base.Add(5 * time.Hour)})
	addClaim(t, s, a, claimSpec{ClaimID: o5.ClaimID, Gen: 2, Pred: o5.EventID})
	// Expired on arrival, in both threads: the newer expiry is LastExpiredAt.
	addClaim(t, s, a, claimSpec{Expires: base.Add(-2 * time.Hour)})
	addClaim(t, s, b, claimSpec{Thread: "thread-2", Expires: base.Add(-time.Hour)})
	// An expired open renewed from another device and session of its
	// owner: no longer a tip, so its expiry is not LastExpiredAt; the row
	// names the renewal's device and session and the root's identity.
	o8 := addClaim(t, s, a, claimSpec{Expires: base.Add(-30 * time.Minute)})
	moved := *a
	moved.DeviceID, moved.SessionID = NewUUID(), NewUUID()
	r8 := addClaim(t, s, &moved, claimSpec{ClaimID: o8.ClaimID, Gen: 2, Pred: o8.EventID, Expires: base.Add(4 * time.Hour)})
	// A renewal whose predecessor is not stored waits, never active.
	addClaim(t, s, a, claimSpec{Gen: 2, Pred: "sha256:" + strings.Repeat("0", 64), Expires: base.Add(time.Hour),
		Status: correspondence.LineagePending})
	// Another repository of the project: active and expired claims, and
	// a later non-claim record (the head), none of them in repo-1.
	other := addClaim(t, s, a, claimSpec{Repo: "repo-2", Expires: base.Add(time.Hour)})
	addClaim(t, s, a, claimSpec{Repo: "repo-2", Expires: base.Add(-10 * time.Minute)})
	ev, c := a.Event(t, Spec{RepositoryID: "repo-2"})
	head := appendOK(t, s, ev, c).Record
	// Another project: same repository id, an active and a newer expired claim.
	p2, x := newProject(t, s)
	x1 := addClaim(t, s, x, claimSpec{Expires: base.Add(time.Hour)})
	addClaim(t, s, x, claimSpec{Expires: base.Add(-5 * time.Minute)})

	reconcile(t, s, pid)
	_, changedAt, err := s.LineageWatermark(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		q      store.ClaimsQuery
		want   []store.ActiveClaim
		expiry time.Time // LastExpiredAt
	}{
		{"repository", store.ClaimsQuery{RepositoryID: "repo-1"}, inProjectionOrder(a1, b2, a3, r4, r8), base.Add(-time.Hour)},
		{"thread-1", store.ClaimsQuery{RepositoryID: "repo-1", ThreadID: "thread-1"}, inProjectionOrder(a1, a3, r4, r8), base.Add(-time.Hour)},
		{"thread-2", store.ClaimsQuery{RepositoryID: "repo-1", ThreadID: "thread-2"}, []store.ActiveClaim{b2}, base.Add(-time.Hour)},
		{"unknown thread", store.ClaimsQuery{RepositoryID: "repo-1", ThreadID: "thread-9"}, nil, base.Add(-time.Hour)},
		{"path", store.ClaimsQuery{RepositoryID: "repo-1", Path: "src/z/main.go"}, inProjectionOrder(a1, b2, a3, r4, r8), base.Add(-time.Hour)},
		{"path of one", store.ClaimsQuery{RepositoryID: "repo-1", Path: "docs"}, []store.ActiveClaim{b2}, base.Add(-time.Hour)},
		{"thread and path", store.ClaimsQuery{RepositoryID: "repo-1", ThreadID: "thread-1", Path: "docs"}, nil, base.Add(-time.Hour)},
		{"other repository", store.ClaimsQuery{RepositoryID: "repo-2"}, []store.ActiveClaim{other}, base.Add(-10 * time.Minute)},
		{"unknown repository", store.ClaimsQuery{RepositoryID: "repo-9"}, nil, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.ProjectID = pid
			snap := claimsOf(t, s, tc.q)
			checkHead(t, tc.name, s, pid, snap, head)
			if snap.LineageIncomplete || !snap.LineageChangedAt.Equal(changedAt) {
				t.Errorf("lineage incomplete %v changed at %v, want false %v", snap.LineageIncomplete, snap.LineageChangedAt, changedAt)
			}
			if !snap.LastExpiredAt.Equal(tc.expiry) {
				t.Errorf("last expired at %v, want %v", snap.LastExpiredAt, tc.expiry)
			}
			if snap.Truncated {
				t.Error("truncated")
			}
			checkClaims(t, tc.name, snap.Claims, tc.want)
		})
	}
	if snap := claimsOf(t, s, store.ClaimsQuery{ProjectID: p2, RepositoryID: "repo-1"}); !slices.Equal(claimIDsOf(snap.Claims), []string{x1.EventID}) ||
		!snap.LastExpiredAt.Equal(base.Add(-5*time.Minute)) {
		t.Errorf("project 2: claims %v last expired %v", claimIDsOf(snap.Claims), snap.LastExpiredAt)
	}
	_, err = s.ClaimsSnapshot(ctx, store.ClaimsQuery{ProjectID: NewUUID(), RepositoryID: "repo-1"})
	wantErr(t, "claims of an unknown project", err, store.ErrNotFound)
}

// testClaimsPathFilter: the path filter keeps claims with any path
// overlapping the query by the rule of spec §4.
func testClaimsPathFilter(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	base := time.Now().UTC().Truncate(time.Millisecond)
	sdk := addClaim(t, s, a, claimSpec{Paths: []string{"packages/sdk"}, Expires: base.Add(1 * time.Hour)})
	old := addClaim(t, s, a, claimSpec{Thread: "thread-2", Paths: []string{"packages/sdk-old"}, Expires: base.Add(2 * time.Hour)})
	two := addClaim(t, s, a, claimSpec{Paths: []string{"docs/guide.md", "src/main.go"}, Expires: base.Add(3 * time.Hour)})
	all := addClaim(t, s, a, claimSpec{Thread: "thread-2", Paths: []string{"."}, Expires: base.Add(4 * time.Hour)})
	// Never selected: expired, or in another repository.
	addClaim(t, s, a, claimSpec{Paths: []string{"packages/sdk"}, Expires: base.Add(-time.Hour)})
	addClaim(t, s, a, claimSpec{Repo: "repo-2", Paths: []string{"packages/sdk"}, Expires: base.Add(time.Hour)})
	reconcile(t, s, pid)
	for _, tc := range []struct {
		name, thread, path string
		want               []store.ActiveClaim
	}{
		{"every path", "", "", []store.ActiveClaim{sdk, old, two, all}},
		{"file below a claimed directory", "", "packages/sdk/src/index.ts", []store.ActiveClaim{sdk, all}},
		{"equal", "", "packages/sdk", []store.ActiveClaim{sdk, all}},
		{"directory above claimed paths", "", "packages", []store.ActiveClaim{sdk, old, all}},
		{"sibling sharing a string prefix", "", "packages/sdk-old", []store.ActiveClaim{old, all}},
		{"string prefix is not a directory", "", "packages/sd", []store.ActiveClaim{all}},
		{"second path of a claim", "", "src/main.go", []store.ActiveClaim{two, all}},
		{"file below a claimed file is not", "", "src/main.go.orig", []store.ActiveClaim{all}},
		{"unrelated", "", "unrelated/file", []store.ActiveClaim{all}},
		{"whole repository", "", ".", []store.ActiveClaim{sdk, old, two, all}},
		{"thread and path", "thread-1", "packages", []store.ActiveClaim{sdk}},
		{"other thread and path", "thread-2", "packages/sdk", []store.ActiveClaim{all}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := claimsOf(t, s, store.ClaimsQuery{ProjectID: pid, RepositoryID: "repo-1", ThreadID: tc.thread, Path: tc.path})
			checkClaims(t, tc.path, snap.Claims, tc.want)
			if snap.Truncated || !snap.LastExpiredAt.Equal(base.Add(-time.Hour)) {
				t.Errorf("truncated %v last expired %v", snap.Truncated, snap.LastExpiredAt)
			}
		})
	}
}

// testClaimsCompeting: a claim forked four ways (two live renewals, an
// expired one, a released branch) plus a colliding root of another
// identity lists the other tips on each active tip, sorted; a 17th
// competitor of a row sets Truncated.
func testClaimsCompeting(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	b := NewSigner(t, pid).Register(t, s)
	base := time.Now().UTC().Truncate(time.Millisecond)
	claimID := NewUUID()
	open := addClaim(t, s, a, claimSpec{ClaimID: claimID, Expires: base.Add(time.Hour)})
	renew := func(sp claimSpec) store.ActiveClaim {
		t.Helper()
		sp.ClaimID, sp.Gen, sp.Pred = claimID, 2, open.EventID
		return addClaim(t, s, a, sp)
	}
	b1 := renew(claimSpec{Expires: base.Add(2 * time.Hour)})
	b2 := renew(claimSpec{Thread: "thread-2", Expires: base.Add(3 * time.Hour)})
	b3 := renew(claimSpec{Expires: base.Add(-time.Hour)})
	b4 := renew(claimSpec{Expires: base.Add(4 * time.Hour)})
	rel := addClaim(t, s, a, claimSpec{ClaimID: claimID, Gen: 3, Pred: b4.EventID})
	root := addClaim(t, s, b, claimSpec{ClaimID: claimID, Expires: base.Add(5 * time.Hour)})
	lone := addClaim(t, s, a, claimSpec{Expires: base.Add(6 * time.Hour)})
	// The same claim id in another repository is another claim.
	addClaim(t, s, a, claimSpec{Repo: "repo-2", ClaimID: claimID, Expires: base.Add(time.Hour)})
	reconcile(t, s, pid)

	tips := []string{b1.EventID, b2.EventID, b3.EventID, rel.EventID, root.EventID}
	others := func(self string) []string {
		return slices.DeleteFunc(slices.Clone(tips), func(id string) bool { return id == self })
	}
	if got := must[[]store.ClaimTip](t, "tips")(s.ClaimTips(ctx, pid, "repo-1")); len(got) != len(tips)+1 {
		t.Fatalf("%d tips, want %d", len(got), len(tips)+1)
	}
	want := []store.ActiveClaim{
		competing(b1, others(b1.EventID)...), competing(b2, others(b2.EventID)...),
		competing(root, others(root.EventID)...), lone,
	}
	snap := claimsOf(t, s, store.ClaimsQuery{ProjectID: pid, RepositoryID: "repo-1"})
	checkClaims(t, "forked claim", snap.Claims, want)
	if snap.Truncated {
		t.Error("truncated with 4 competitors")
	}
	// The thread filter selects rows, not competitors.
	snap = claimsOf(t, s, store.ClaimsQuery{ProjectID: pid, RepositoryID: "repo-1", ThreadID: "thread-2"})
	checkClaims(t, "forked claim, thread-2", snap.Claims, want[1:2])

	// 17 tips of one claim: 16 competitors each, all shown. An 18th tip:
	// each row shows the first 16 of its 17, and the answer is truncated.
	zID := NewUUID()
	z0 := addClaim(t, s, a, claimSpec{Repo: "repo-z", ClaimID: zID, Expires: base.Add(time.Hour)})
	var zs []store.ActiveClaim
	for i := range store.MaxCompetitors + 2 {
		zs = append(zs, addClaim(t, s, a, claimSpec{Repo: "repo-z", ClaimID: zID, Gen: 2, Pred: z0.EventID,
			Expires: base.Add(time.Hour + time.Duration(i)*time.Second)}))
		if n := len(zs); n == store.MaxCompetitors+1 || n == store.MaxCompetitors+2 {
			reconcile(t, s, pid)
			var want []store.ActiveClaim
			for _, z := range zs {
				var ids []string
				for _, o := range zs {
					if o.EventID != z.EventID {
						ids = append(ids, o.EventID)
					}
				}
				ids = sorted(ids)
				want = append(want, competing(z, ids[:min(len(ids), store.MaxCompetitors)]...))
			}
			snap := claimsOf(t, s, store.ClaimsQuery{ProjectID: pid, RepositoryID: "repo-z"})
			checkClaims(t, fmt.Sprintf("%d tips", n), snap.Claims, want)
			if wantTrunc := n-1 > store.MaxCompetitors; snap.Truncated != wantTrunc {
				t.Errorf("%d tips: truncated %v, want %v", n, snap.Truncated, wantTrunc)
			}
		}
	}
}

// testClaimsExpiry: a claim that expires a moment after its append is
// active while the database clock is before its expires_at and absent,
// its expires_at as LastExpiredAt, from then on. The loop polls the
// snapshot's own clock, bounded.
func testClaimsExpiry(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	expires := time.Now().UTC().Truncate(time.Millisecond).Add(2 * time.Second)
	c := addClaim(t, s, a, claimSpec{Expires: expires})
	reconcile(t, s, pid)
	q := store.ClaimsQuery{ProjectID: pid, RepositoryID: "repo-1"}
	sawActive := false
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the database clock did not pass %v", expires)
		}
		snap := claimsOf(t, s, q)
		if snap.Now.Before(expires) {
			sawActive = true
			checkClaims(t, "before expiry", snap.Claims, []store.ActiveClaim{c})
			if !snap.LastExpiredAt.IsZero() {
				t.Fatalf("before expiry: last expired at %v", snap.LastExpiredAt)
			}
			continue
		}
		checkClaims(t, "after expiry", snap.Claims, nil)
		if !snap.LastExpiredAt.Equal(expires) {
			t.Fatalf("after expiry (now %v): last expired at %v, want %v", snap.Now, snap.LastExpiredAt, expires)
		}
		break
	}
	if !sawActive {
		t.Fatal("the claim was never seen active: the append took longer than its 2s lifetime")
	}
}

// testClaimsCap: at most MaxActiveClaims rows in projection order; one
// candidate more sets Truncated. Filters apply before the cap.
func testClaimsCap(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	base := time.Now().UTC().Truncate(time.Millisecond)
	var cs []store.ActiveClaim
	for i := range store.MaxActiveClaims {
		// Descending expiry: the projection order is the reverse of receipt.
		cs = append(cs, addClaim(t, s, a, claimSpec{Expires: base.Add(time.Hour + time.Duration(store.MaxActiveClaims-i)*time.Second)}))
	}
	reconcile(t, s, pid)
	full := inProjectionOrder(cs...)
	q := store.ClaimsQuery{ProjectID: pid, RepositoryID: "repo-1"}
	snap := claimsOf(t, s, q)
	checkClaims(t, "128 claims", snap.Claims, full)
	if snap.Truncated {
		t.Error("128 claims: truncated")
	}
	first := addClaim(t, s, a, claimSpec{Thread: "thread-2", Expires: base.Add(time.Hour)})
	reconcile(t, s, pid)
	snap = claimsOf(t, s, q)
	checkClaims(t, "129 claims", snap.Claims, append([]store.ActiveClaim{first}, full[:store.MaxActiveClaims-1]...))
	if !snap.Truncated {
		t.Error("129 claims: not truncated")
	}
	q.ThreadID = "thread-1"
	snap = claimsOf(t, s, q)
	checkClaims(t, "128 claims of thread-1", snap.Claims, full)
	if snap.Truncated {
		t.Error("128 claims of thread-1: truncated")
	}
}

// recordsOf reads every record of a selection in ascending received_seq.
func recordsOf(t *testing.T, s store.Store, pid, repo, thread string) []store.Record {
	t.Helper()
	var out []store.Record
	after := int64(0)
	for {
		page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: repo, ThreadID: thread, After: after, Limit: 200}))
		out = append(out, page.Records...)
		if !page.HasMore {
			return out
		}
		after = page.Records[len(page.Records)-1].ReceivedSeq
	}
}

// checkRecent asserts v.Recent is the newest VoiceRecent records of the
// selection, newest first, as Events reads them, and RecentTruncated.
func checkRecent(t *testing.T, what string, v store.VoiceSnapshot, all []store.Record, wantTrunc bool) {
	t.Helper()
	want := slices.Clone(all)
	slices.Reverse(want)
	want = want[:min(len(want), store.VoiceRecent)]
	if !slices.Equal(seqsOf(v.Recent), seqsOf(want)) {
		t.Fatalf("%s: recent %v\nwant %v", what, seqsOf(v.Recent), seqsOf(want))
	}
	for i := range want {
		g, w := v.Recent[i], want[i]
		if len(g.MissingParents) == 0 && len(w.MissingParents) == 0 {
			g.MissingParents, w.MissingParents = nil, nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: recent %d = %+v\nwant %+v", what, i, g, w)
		}
	}
	if v.RecentTruncated != wantTrunc {
		t.Errorf("%s: recent truncated %v, want %v", what, v.RecentTruncated, wantTrunc)
	}
}

// testVoiceRecent: the newest 50 records of the selection, newest first;
// RecentTruncated once a 51st exists, per selection.
func testVoiceRecent(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	p2, x := newProject(t, s)
	add := func(sg *Signer, repo, thread string) store.Record {
		t.Helper()
		ev, c := sg.Event(t, Spec{RepositoryID: repo, ThreadID: thread})
		return appendOK(t, s, ev, c).Record
	}
	var last store.Record
	for i := range store.VoiceRecent {
		thread := "thread-a"
		if i%5 == 0 {
			thread = "thread-b"
		}
		last = add(a, "repo-v", thread)
		if i%10 == 0 {
			add(a, "repo-w", thread)
			add(x, "repo-v", thread)
		}
	}
	q := func(thread string) store.VoiceQuery {
		return store.VoiceQuery{ProjectID: pid, RepositoryID: "repo-v", ThreadID: thread}
	}
	v := voiceOf(t, s, q(""))
	checkRecent(t, "50 records", v, recordsOf(t, s, pid, "repo-v", ""), false)
	checkHead(t, "50 records", s, pid, v.ClaimsSnapshot, last)

	last = add(a, "repo-v", "thread-a")
	v = voiceOf(t, s, q(""))
	all := recordsOf(t, s, pid, "repo-v", "")
	if len(all) != store.VoiceRecent+1 {
		t.Fatalf("%d records, want 51", len(all))
	}
	checkRecent(t, "51 records", v, all, true)
	checkHead(t, "51 records", s, pid, v.ClaimsSnapshot, last)
	checkRecent(t, "thread-a of 41", voiceOf(t, s, q("thread-a")), recordsOf(t, s, pid, "repo-v", "thread-a"), false)
	checkRecent(t, "thread-b of 10", voiceOf(t, s, q("thread-b")), recordsOf(t, s, pid, "repo-v", "thread-b"), false)

	for range 10 {
		add(a, "repo-v", "thread-a")
	}
	checkRecent(t, "thread-a of 51", voiceOf(t, s, q("thread-a")), recordsOf(t, s, pid, "repo-v", "thread-a"), true)
	checkRecent(t, "thread-b of 10", voiceOf(t, s, q("thread-b")), recordsOf(t, s, pid, "repo-v", "thread-b"), false)
	checkRecent(t, "other repository", voiceOf(t, s, store.VoiceQuery{ProjectID: pid, RepositoryID: "repo-w"}),
		recordsOf(t, s, pid, "repo-w", ""), false)
	checkRecent(t, "other project", voiceOf(t, s, store.VoiceQuery{ProjectID: p2, RepositoryID: "repo-v"}),
		recordsOf(t, s, p2, "repo-v", ""), false)
	if v := voiceOf(t, s, store.VoiceQuery{ProjectID: pid, RepositoryID: "repo-9"}); len(v.Recent) != 0 || v.RecentTruncated || len(v.SessionForks) != 0 {
		t.Errorf("unknown repository: %d recent, truncated %v, forks %v", len(v.Recent), v.RecentTruncated, v.SessionForks)
	}
	_, err := s.VoiceSnapshot(ctx, store.VoiceQuery{ProjectID: NewUUID(), RepositoryID: "repo-v"})
	wantErr(t, "voice of an unknown project", err, store.ErrNotFound)
}

// testVoiceSessionForks: forks of the tuples seen in the recent window, in
// order of first appearance there, each with all its event ids (also those
// older than the window), sorted; a fork wholly older than the window is
// not looked up. A 17th event of a tuple sets the fork's Truncated.
func testVoiceSessionForks(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	b := NewSigner(t, pid).Register(t, s)
	add := func(sg *Signer, thread string, seq int64, summary string) string {
		t.Helper()
		ev, c := sg.Event(t, Spec{RepositoryID: "repo-f", ThreadID: thread, SessionSeq: seq, Summary: summary})
		appendOK(t, s, ev, c)
		return ev.ID
	}
	x1 := add(a, "thread-a", 7, "x1")
	add(a, "thread-a", 9, "z1") // fork z: both older than any window
	add(a, "thread-a", 9, "z2")
	for i := range store.VoiceRecent {
		add(a, "thread-a", int64(1000+i), "filler")
	}
	y1 := add(b, "thread-a", 8, "y1")
	x2 := add(a, "thread-b", 7, "x2")
	y2 := add(b, "thread-a", 8, "y2")
	otherDevice := *a
	otherDevice.DeviceID = NewUUID()
	add(a, "thread-a", 11, "w1")
	add(&otherDevice, "thread-a", 11, "w2") // same session and seq, another device: no fork
	reconcile(t, s, pid)

	forkX := store.SessionFork{IdentityID: a.IdentityID, DeviceID: a.DeviceID, SessionID: a.SessionID, SessionSeq: 7, EventIDs: sorted([]string{x1, x2})}
	forkY := store.SessionFork{IdentityID: b.IdentityID, DeviceID: b.DeviceID, SessionID: b.SessionID, SessionSeq: 8, EventIDs: sorted([]string{y1, y2})}
	for _, tc := range []struct {
		name, thread string
		want         []store.SessionFork
	}{
		// Newest first: w2 w1 y2 x2 y1 …: y2 comes before x2.
		{"repository", "", []store.SessionFork{forkY, forkX}},
		// thread-a's window has y but not x1, the only thread-a event of x.
		{"thread-a", "thread-a", []store.SessionFork{forkY}},
		// thread-b's window is x2 alone; x1 of thread-a is still in its fork.
		{"thread-b", "thread-b", []store.SessionFork{forkX}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := voiceOf(t, s, store.VoiceQuery{ProjectID: pid, RepositoryID: "repo-f", ThreadID: tc.thread})
			if !reflect.DeepEqual(v.SessionForks, tc.want) {
				t.Errorf("forks\n got %+v\nwant %+v", v.SessionForks, tc.want)
			}
		})
	}

	var ids []string
	for i := range store.MaxForkEvents + 1 {
		ev, c := a.Event(t, Spec{RepositoryID: "repo-g", SessionSeq: 5, Summary: fmt.Sprintf("g%d", i)})
		appendOK(t, s, ev, c)
		ids = append(ids, ev.ID)
		if n := len(ids); n == store.MaxForkEvents || n == store.MaxForkEvents+1 {
			v := voiceOf(t, s, store.VoiceQuery{ProjectID: pid, RepositoryID: "repo-g"})
			want := []store.SessionFork{{IdentityID: a.IdentityID, DeviceID: a.DeviceID, SessionID: a.SessionID, SessionSeq: 5,
				EventIDs: sorted(ids)[:store.MaxForkEvents], Truncated: n > store.MaxForkEvents}}
			if !reflect.DeepEqual(v.SessionForks, want) {
				t.Errorf("%d events of one tuple: forks\n got %+v\nwant %+v", n, v.SessionForks, want)
			}
		}
	}
}

// testVoiceClaims: the claims part of a voice snapshot is what
// ClaimsSnapshot returns for the same repository and thread.
func testVoiceClaims(t *testing.T, s store.Store) {
	pid, a := newProject(t, s)
	base := time.Now().UTC().Truncate(time.Millisecond)
	c1 := addClaim(t, s, a, claimSpec{Expires: base.Add(2 * time.Hour)})
	c2 := addClaim(t, s, a, claimSpec{Thread: "thread-2", Paths: []string{"docs"}, Expires: base.Add(time.Hour)})
	f1 := addClaim(t, s, a, claimSpec{ClaimID: c1.ClaimID, Gen: 2, Pred: c1.EventID, Expires: base.Add(3 * time.Hour)})
	f2 := addClaim(t, s, a, claimSpec{ClaimID: c1.ClaimID, Gen: 2, Pred: c1.EventID, Thread: "thread-2", Expires: base.Add(4 * time.Hour)})
	addClaim(t, s, a, claimSpec{Expires: base.Add(-time.Hour)})
	c3 := addClaim(t, s, a, claimSpec{Repo: "repo-2", Expires: base.Add(time.Hour)})
	reconcile(t, s, pid)
	for _, tc := range []struct {
		name         string
		repo, thread string
		want         []store.ActiveClaim
	}{
		{"repository", "repo-1", "", []store.ActiveClaim{c2, competing(f1, f2.EventID), competing(f2, f1.EventID)}},
		{"thread-1", "repo-1", "thread-1", []store.ActiveClaim{competing(f1, f2.EventID)}},
		{"thread-2", "repo-1", "thread-2", []store.ActiveClaim{c2, competing(f2, f1.EventID)}},
		{"other repository", "repo-2", "", []store.ActiveClaim{c3}},
		{"unknown repository", "repo-9", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := voiceOf(t, s, store.VoiceQuery{ProjectID: pid, RepositoryID: tc.repo, ThreadID: tc.thread})
			checkClaims(t, "voice", v.Claims, tc.want)
			cs := claimsOf(t, s, store.ClaimsQuery{ProjectID: pid, RepositoryID: tc.repo, ThreadID: tc.thread})
			if cs.Now.Before(v.Now) {
				t.Errorf("claims read at %v, before the voice read at %v", cs.Now, v.Now)
			}
			got := v.ClaimsSnapshot
			got.Now, cs.Now = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, cs) {
				t.Errorf("voice claims part\n got %+v\nwant %+v", got, cs)
			}
			if !got.LastExpiredAt.Equal(map[string]time.Time{"repo-1": base.Add(-time.Hour)}[tc.repo]) {
				t.Errorf("last expired at %v", got.LastExpiredAt)
			}
		})
	}
}
