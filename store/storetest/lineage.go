package storetest

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
	"github.com/acrelay/acrelay/store"
)

// lineageVector is one entry of the seed's lineage_vectors (spec §8).
type lineageVector struct {
	Name  string `json:"name"`
	Nodes []struct {
		Symbol      string   `json:"symbol"`
		Kind        string   `json:"kind"`
		Generation  int64    `json:"generation"`
		Predecessor *string  `json:"predecessor"`
		Paths       []string `json:"paths"`
		Expires     *string  `json:"expires"` // "future", "past" or null
	} `json:"nodes"`
	Arrival                       []string   `json:"arrival"`
	ActiveAfterEachArrival        [][]string `json:"active_after_each_arrival"`
	LineageStatusAfterEachArrival []string   `json:"lineage_status_after_each_arrival"`
	ActiveTips                    []string   `json:"active_tips"`
	AllTips                       []string   `json:"all_tips"`
	ConflictedTips                []string   `json:"conflicted_tips"`
}

func loadLineageVectors(t *testing.T) []lineageVector {
	t.Helper()
	raw, err := os.ReadFile(shareddir.Path(t, "spec", "agent-correspondence-0.1-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		LineageVectors []lineageVector `json:"lineage_vectors"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.LineageVectors) != 5 {
		t.Fatalf("%d lineage vectors, want 5", len(doc.LineageVectors))
	}
	return doc.LineageVectors
}

// statusesOf reads the lineage_status of every record of a repository.
func statusesOf(t *testing.T, s store.Store, pid, repo string) map[string]correspondence.LineageStatus {
	t.Helper()
	out := map[string]correspondence.LineageStatus{}
	after := int64(0)
	for {
		page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: repo, After: after, Limit: 200}))
		for _, r := range page.Records {
			out[r.EventID] = r.LineageStatus
		}
		if !page.HasMore {
			return out
		}
		after = page.Records[len(page.Records)-1].ReceivedSeq
	}
}

func tipIDs(t *testing.T, s store.Store, pid, repo string) (all, active []string) {
	t.Helper()
	now := time.Now()
	for _, tip := range must[[]store.ClaimTip](t, "tips")(s.ClaimTips(ctx, pid, repo)) {
		all = append(all, tip.EventID)
		if tip.Kind != correspondence.KindClaimRelease && tip.ExpiresAt.After(now) {
			active = append(active, tip.EventID)
		}
	}
	return all, active
}

// testLineageVectors replays the seed's five scenarios as real signed
// events in their arrival orders. After each arrival the stored statuses
// and tip table must equal correspondence.ProjectLineage over the events
// arrived so far, and the vector's own expectations must hold.
func testLineageVectors(t *testing.T, s store.Store) {
	for _, v := range loadLineageVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			pid, sg := newProject(t, s)
			repo, claimID := "repo-"+v.Name, NewUUID()
			now := time.Now().UTC().Truncate(time.Millisecond)
			type built struct {
				ev        *correspondence.Event
				canonical []byte
			}
			bySymbol := map[string]built{}
			for _, n := range v.Nodes {
				var expires time.Time
				switch {
				case n.Expires == nil:
				case *n.Expires == "future":
					expires = now.Add(time.Hour)
				case *n.Expires == "past":
					expires = now.Add(-time.Hour)
				}
				pred := ""
				if n.Predecessor != nil {
					pred = bySymbol[*n.Predecessor].ev.ID
				}
				ev, c := sg.Claim(t, repo, claimID, n.Generation, pred, n.Paths, expires)
				if string(ev.Kind) != n.Kind {
					t.Fatalf("%s: built %s, vector says %s", n.Symbol, ev.Kind, n.Kind)
				}
				bySymbol[n.Symbol] = built{ev, c}
			}
			symbolOf := map[string]string{}
			for sym, b := range bySymbol {
				symbolOf[b.ev.ID] = sym
			}
			symbols := func(ids []string) []string {
				out := []string{}
				for _, id := range ids {
					out = append(out, symbolOf[id])
				}
				slices.Sort(out)
				return out
			}
			var nodes []correspondence.LineageNode
			for i, sym := range v.Arrival {
				b := bySymbol[sym]
				res := appendOK(t, s, b.ev, b.canonical)
				node, ok := correspondence.NodeOf(b.ev)
				if !ok {
					t.Fatalf("%s: NodeOf not ok", sym)
				}
				nodes = append(nodes, node)
				oracle := correspondence.ProjectLineage(nodes, time.Now())

				if res.Record.LineageStatus != oracle.Status[b.ev.ID] {
					t.Errorf("arrival %d (%s): append says %s, oracle %s", i, sym, res.Record.LineageStatus, oracle.Status[b.ev.ID])
				}
				pending := res.Record.LineageStatus == correspondence.LineagePending
				hasWarning := slices.ContainsFunc(res.Warnings, func(w store.Warning) bool {
					return w.Code == "claim_lineage_pending" && slices.Equal(w.EventIDs, []string{node.PredecessorEventID})
				})
				if pending != hasWarning {
					t.Errorf("arrival %d (%s): pending %v, claim_lineage_pending warning %v (%+v)", i, sym, pending, hasWarning, res.Warnings)
				}
				got := statusesOf(t, s, pid, repo)
				for id, want := range oracle.Status {
					if got[id] != want {
						t.Errorf("arrival %d: %s is %s, oracle %s", i, symbolOf[id], got[id], want)
					}
				}
				all, active := tipIDs(t, s, pid, repo)
				if !slices.Equal(symbols(all), symbols(oracle.Tips)) {
					t.Errorf("arrival %d: tips %v, oracle %v", i, symbols(all), symbols(oracle.Tips))
				}
				if !slices.Equal(symbols(active), symbols(oracle.Active)) {
					t.Errorf("arrival %d: active %v, oracle %v", i, symbols(active), symbols(oracle.Active))
				}
				if v.ActiveAfterEachArrival != nil {
					want := append([]string{}, v.ActiveAfterEachArrival[i]...)
					slices.Sort(want)
					if !slices.Equal(symbols(active), want) {
						t.Errorf("arrival %d: active %v, vector %v", i, symbols(active), want)
					}
				}
				if v.LineageStatusAfterEachArrival != nil {
					// The vectors track the first arrival (the renewal that waits).
					first := bySymbol[v.Arrival[0]].ev.ID
					if want := correspondence.LineageStatus(v.LineageStatusAfterEachArrival[i]); got[first] != want {
						t.Errorf("arrival %d: %s is %s, vector %s", i, v.Arrival[0], got[first], want)
					}
				}
			}
			all, active := tipIDs(t, s, pid, repo)
			if v.ActiveTips != nil && !slices.Equal(symbols(active), sorted(v.ActiveTips)) {
				t.Errorf("final active %v, vector %v", symbols(active), sorted(v.ActiveTips))
			}
			if v.AllTips != nil && !slices.Equal(symbols(all), sorted(v.AllTips)) {
				t.Errorf("final tips %v, vector %v", symbols(all), sorted(v.AllTips))
			}
			if incomplete, _, err := s.LineageWatermark(ctx, pid); err != nil || incomplete {
				t.Errorf("watermark: incomplete %v, err %v", incomplete, err)
			}
		})
	}
}

func sorted(ss []string) []string {
	out := append([]string{}, ss...)
	slices.Sort(out)
	return out
}

// testPendingChain: 40 renewals arrive before their claim.open, newest
// first, so each waits on the next. The open readies them one by one: its
// append resolves 32, leaving the incomplete flag set, and repeated
// ReconcileLineage calls finish the rest and clear it.
func testPendingChain(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	repo, claimID := "repo-chain", NewUUID()
	expires := time.Now().Add(time.Hour)
	type built struct {
		ev *correspondence.Event
		c  []byte
	}
	open, oc := sg.Claim(t, repo, claimID, 1, "", []string{"src"}, expires)
	chain := []built{{open, oc}}
	for g := int64(2); g <= 41; g++ {
		ev, c := sg.Claim(t, repo, claimID, g, chain[len(chain)-1].ev.ID, []string{"src"}, expires)
		chain = append(chain, built{ev, c})
	}
	for i := len(chain) - 1; i >= 1; i-- {
		res := appendOK(t, s, chain[i].ev, chain[i].c)
		if res.Record.LineageStatus != correspondence.LineagePending {
			t.Fatalf("generation %d: %s before its open", i+1, res.Record.LineageStatus)
		}
	}
	if incomplete, at, err := s.LineageWatermark(ctx, pid); err != nil || incomplete || !at.IsZero() {
		t.Fatalf("before open: incomplete %v at %v err %v", incomplete, at, err)
	}
	before := time.Now()
	res := appendOK(t, s, open, oc)
	if res.Record.LineageStatus != correspondence.LineageValid {
		t.Fatalf("open: %s", res.Record.LineageStatus)
	}
	countValid := func() int {
		n := 0
		for _, st := range statusesOf(t, s, pid, repo) {
			if st == correspondence.LineageValid {
				n++
			}
		}
		return n
	}
	if n := countValid(); n != 1+32 {
		t.Fatalf("after the open's append: %d valid, want 33 (open + 32 frontier rows)", n)
	}
	incomplete, changedAt, err := s.LineageWatermark(ctx, pid)
	if err != nil || !incomplete {
		t.Fatalf("after open: incomplete %v err %v", incomplete, err)
	}
	checkDBTime(t, "lineage_changed_at", changedAt)
	if changedAt.Before(before.Add(-time.Second)) {
		t.Fatalf("lineage_changed_at %v before the open's append %v", changedAt, before)
	}
	all, _ := tipIDs(t, s, pid, repo)
	if !slices.Equal(all, []string{chain[32].ev.ID}) {
		t.Fatalf("tips %v, want generation 33", all)
	}
	// 8 rows remain: 5 then 3.
	for i, want := range []bool{true, false} {
		incomplete, err := s.ReconcileLineage(ctx, pid, 5)
		if err != nil || incomplete != want {
			t.Fatalf("reconcile %d: incomplete %v err %v, want %v", i, incomplete, err, want)
		}
		if flag, _, _ := s.LineageWatermark(ctx, pid); flag != want {
			t.Fatalf("reconcile %d: persisted flag %v, want %v", i, flag, want)
		}
	}
	if n := countValid(); n != 41 {
		t.Fatalf("%d valid, want 41", n)
	}
	all, active := tipIDs(t, s, pid, repo)
	if !slices.Equal(all, []string{chain[40].ev.ID}) || !slices.Equal(active, all) {
		t.Fatalf("tips %v active %v, want generation 41", all, active)
	}
	// Nothing left: reconciling again changes nothing, not even the watermark.
	_, at1, _ := s.LineageWatermark(ctx, pid)
	time.Sleep(5 * time.Millisecond)
	if incomplete, err := s.ReconcileLineage(ctx, pid, 32); err != nil || incomplete {
		t.Fatalf("idle reconcile: %v %v", incomplete, err)
	}
	if _, at2, _ := s.LineageWatermark(ctx, pid); !at2.Equal(at1) {
		t.Fatalf("idle reconcile moved the watermark %v → %v", at1, at2)
	}
	_, err = s.ReconcileLineage(ctx, NewUUID(), 32)
	wantErr(t, "reconcile unknown project", err, store.ErrNotFound)
}

// testNonClaimPredecessor: a renewal naming a stored event that is not a
// claim is invalid, whether it arrives before or after that event.
func testNonClaimPredecessor(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	intent, ic := sg.Event(t, Spec{RepositoryID: "repo-x"})
	early, ec := sg.Claim(t, "repo-x", NewUUID(), 2, intent.ID, []string{"a"}, time.Now().Add(time.Hour))
	if res := appendOK(t, s, early, ec); res.Record.LineageStatus != correspondence.LineagePending {
		t.Fatalf("early: %s", res.Record.LineageStatus)
	}
	appendOK(t, s, intent, ic)
	late, lc := sg.Claim(t, "repo-x", NewUUID(), 2, intent.ID, []string{"a"}, time.Now().Add(time.Hour))
	if res := appendOK(t, s, late, lc); res.Record.LineageStatus != correspondence.LineageInvalid {
		t.Fatalf("late: %s", res.Record.LineageStatus)
	}
	got := statusesOf(t, s, pid, "repo-x")
	if got[early.ID] != correspondence.LineageInvalid || got[intent.ID] != correspondence.LineageNotApplicable {
		t.Fatalf("statuses %v", got)
	}
	if all, _ := tipIDs(t, s, pid, "repo-x"); len(all) != 0 {
		t.Fatalf("tips %v", all)
	}
}
