package correspondence

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/internal/shareddir"
)

// lineageNow is the fixed clock of every lineage test.
var lineageNow = time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC)

func loadLineageVectorFile(t *testing.T, path string) []LineageVector {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	vs, err := LoadLineageVectors(data)
	if err != nil {
		t.Fatalf("load vectors: %v", err)
	}
	return vs
}

func TestLineageVectors(t *testing.T) {
	public := loadLineageVectorFile(t, shareddir.Path(t, "spec", "agent-correspondence-0.1-vectors.json"))
	seed := loadLineageVectorFile(t, "../conformance/testdata/seeds/000_d18f2735a1feda05.txt")
	if !reflect.DeepEqual(public, seed) {
		t.Fatal("the public file and seed 000 carry different lineage_vectors")
	}
	names := make([]string, len(public))
	for i, v := range public {
		names[i] = v.Name
	}
	wantNames := []string{
		"out-of-order-fork-keeps-lower-generation-tip",
		"release-closes-only-one-branch",
		"reordered-identical-path-set-is-valid",
		"changed-path-renewal-is-invalid",
		"expired-offline-open-never-reactivates",
	}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("vector names = %v, want %v", names, wantNames)
	}
	for _, v := range public {
		t.Run(v.Name, func(t *testing.T) {
			replays := []struct {
				name string
				obs  []LineageObservation
			}{
				{"ProjectLineage", v.Replay(lineageNow)},
				{"Lineage unlimited", v.ReplayIncremental(lineageNow, 0)},
				{"Lineage budget 32", v.ReplayIncremental(lineageNow, 32)},
			}
			for _, r := range replays {
				if bad := v.Check(r.obs); bad != nil {
					t.Errorf("%s: %v", r.name, bad)
				}
			}
		})
	}
}

// TestLineageVectorExpectationsSpelledOut restates the vectors' expectations
// literally, so that a runner that checked nothing could not pass.
func TestLineageVectorExpectationsSpelledOut(t *testing.T) {
	vs := loadLineageVectorFile(t, shareddir.Path(t, "spec", "agent-correspondence-0.1-vectors.json"))
	byName := make(map[string]LineageVector)
	for _, v := range vs {
		byName[v.Name] = v
	}

	fork := byName["out-of-order-fork-keeps-lower-generation-tip"].Replay(lineageNow)
	for i, want := range [][]string{{}, {}, {}, {"left3", "right2"}} {
		if !slices.Equal(fork[i].Active, want) {
			t.Errorf("fork: active after %d = %v, want %v", i+1, fork[i].Active, want)
		}
	}
	if got := fork[3].Conflicted; !slices.Equal(got, []string{"left3", "right2"}) {
		t.Errorf("fork: conflicted = %v", got)
	}
	if got := fork[2].Status; !reflect.DeepEqual(got, map[string]LineageStatus{
		"left3": LineagePending, "right2": LineagePending, "left2": LineagePending,
	}) {
		t.Errorf("fork: statuses before the open = %v", got)
	}

	rel := byName["release-closes-only-one-branch"].Replay(lineageNow)[3]
	if !slices.Equal(rel.Active, []string{"left2"}) || !slices.Equal(rel.Tips, []string{"left2", "release3"}) ||
		!slices.Equal(rel.Conflicted, []string{"left2", "release3"}) {
		t.Errorf("release: active %v tips %v conflicted %v", rel.Active, rel.Tips, rel.Conflicted)
	}

	for name, want := range map[string][2]LineageStatus{
		"reordered-identical-path-set-is-valid": {LineagePending, LineageValid},
		"changed-path-renewal-is-invalid":       {LineagePending, LineageInvalid},
	} {
		obs := byName[name].Replay(lineageNow)
		if got := [2]LineageStatus{obs[0].Status["renew2"], obs[1].Status["renew2"]}; got != want {
			t.Errorf("%s: renew2 statuses = %v, want %v", name, got, want)
		}
	}

	exp := byName["expired-offline-open-never-reactivates"].Replay(lineageNow)[0]
	if exp.Status["open"] != LineageValid || len(exp.Active) != 0 || !slices.Equal(exp.Tips, []string{"open"}) {
		t.Errorf("expired open: %+v", exp)
	}
}

func TestLineageVectorCheckReportsMismatches(t *testing.T) {
	vs := loadLineageVectorFile(t, shareddir.Path(t, "spec", "agent-correspondence-0.1-vectors.json"))
	fork := vs[0]
	// With a budget of one row the open's arrival resolves right2 but leaves
	// left2 and left3 pending, so the last arrival's active set is short.
	bad := fork.Check(fork.ReplayIncremental(lineageNow, 1))
	want := []string{
		"out-of-order-fork-keeps-lower-generation-tip: active after arrival 4 (open) = [right2], want [left3 right2]",
		"out-of-order-fork-keeps-lower-generation-tip: conflicted tips = [], want [left3 right2]",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("budget 1: Check = %q, want %q", bad, want)
	}

	changed := vs[3]
	obs := changed.Replay(lineageNow)
	obs[1].Status["renew2"] = LineageValid
	obs[1].Active = []string{"open", "renew2"}
	bad = changed.Check(obs)
	want = []string{
		`changed-path-renewal-is-invalid: status of renew2 after arrival 2 (open) = "valid", want "invalid"`,
		"changed-path-renewal-is-invalid: active tips = [open renew2], want [open]",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("Check = %q, want %q", bad, want)
	}
	if bad := changed.Check(obs[:1]); len(bad) != 1 {
		t.Errorf("short observations: %q", bad)
	}
}

func TestLoadLineageVectorsRefuses(t *testing.T) {
	tests := []struct {
		name string
		json string
	}{
		{"no member", `{}`},
		{"unknown expectation", `{"lineage_vectors":[{"name":"x","nodes":[{"symbol":"a","kind":"claim.open","generation":1,"predecessor":null,"paths":["."],"expires":"future"}],"arrival":["a"],"winner":"a"}]}`},
		{"unknown predecessor", `{"lineage_vectors":[{"name":"x","nodes":[{"symbol":"a","kind":"claim.renew","generation":2,"predecessor":"z","paths":["."],"expires":"future"}],"arrival":["a"]}]}`},
		{"bad expiry", `{"lineage_vectors":[{"name":"x","nodes":[{"symbol":"a","kind":"claim.open","generation":1,"predecessor":null,"paths":["."],"expires":"soon"}],"arrival":["a"]}]}`},
		{"repeated arrival", `{"lineage_vectors":[{"name":"x","nodes":[{"symbol":"a","kind":"claim.open","generation":1,"predecessor":null,"paths":["."],"expires":"future"}],"arrival":["a","a"]}]}`},
		{"short per-arrival list", `{"lineage_vectors":[{"name":"x","nodes":[{"symbol":"a","kind":"claim.open","generation":1,"predecessor":null,"paths":["."],"expires":"future"}],"arrival":["a"],"active_after_each_arrival":[]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if vs, err := LoadLineageVectors([]byte(tc.json)); err == nil {
				t.Errorf("LoadLineageVectors = %+v, want an error", vs)
			}
		})
	}
}

// claimEvent builds an unsigned claim event with the given body members.
func claimEvent(id string, kind Kind, identity, device string, paths []string, body ...canonicaljson.Member) *Event {
	return &Event{
		ID:           id,
		ProjectID:    "00000000-0000-4000-8000-000000000001",
		RepositoryID: "repo",
		ThreadID:     "thread-1",
		Sender: Sender{
			IdentityID:   identity,
			SigningKeyID: "00000000-0000-4000-8000-0000000000e1",
			DeviceID:     device,
			SessionID:    "00000000-0000-4000-8000-0000000000f1",
		},
		Kind:  kind,
		Scope: Scope{Paths: paths},
		Body:  canonicaljson.ObjectValue(body...),
	}
}

func str(name, v string) canonicaljson.Member {
	return canonicaljson.Member{Name: name, Value: canonicaljson.StringValue(v)}
}

func num(name string, v int64) canonicaljson.Member {
	return canonicaljson.Member{Name: name, Value: canonicaljson.IntValue(v)}
}

const (
	alice   = "00000000-0000-4000-8000-00000000a11c"
	bob     = "00000000-0000-4000-8000-000000000b0b"
	laptop  = "00000000-0000-4000-8000-0000000000d1"
	desktop = "00000000-0000-4000-8000-0000000000d2"
	claimC  = "00000000-0000-4000-8000-0000000000c1"
)

func TestNodeOf(t *testing.T) {
	open := claimEvent("sha256:01", KindClaimOpen, alice, laptop, []string{"docs", "api"},
		str("claim_id", claimC), num("generation", 1), str("expires_at", "2026-07-19T11:30:00.250Z"))
	n, ok := NodeOf(open)
	want := LineageNode{
		EventID: "sha256:01", RepositoryID: "repo", ClaimID: claimC, IdentityID: alice,
		Kind: KindClaimOpen, Generation: 1, Paths: []string{"docs", "api"},
		ExpiresAt: time.Date(2026, 7, 19, 11, 30, 0, 250e6, time.UTC), ThreadID: "thread-1",
	}
	if !ok || !reflect.DeepEqual(n, want) {
		t.Errorf("NodeOf(open) = %+v, %v; want %+v", n, ok, want)
	}
	open.Scope.Paths[0] = "changed"
	if n.Paths[0] != "docs" {
		t.Error("NodeOf shares the event's paths slice")
	}

	release := claimEvent("sha256:02", KindClaimRelease, alice, desktop, []string{"docs"},
		str("claim_id", claimC), num("generation", 2), str("predecessor_event_id", "sha256:01"), str("detail", "done"))
	n, ok = NodeOf(release)
	if !ok || n.PredecessorEventID != "sha256:01" || n.Generation != 2 || !n.ExpiresAt.IsZero() || n.Kind != KindClaimRelease {
		t.Errorf("NodeOf(release) = %+v, %v", n, ok)
	}

	for _, bad := range []string{"2026-07-19T11:30:00Z", "2026-07-19T11:30:00.250+00:00", "2026-02-30T11:30:00.000Z", "soon"} {
		e := claimEvent("sha256:03", KindClaimRenew, alice, laptop, []string{"docs"},
			str("claim_id", claimC), num("generation", 2), str("predecessor_event_id", "sha256:01"), str("expires_at", bad))
		if n, ok := NodeOf(e); !ok || !n.ExpiresAt.IsZero() {
			t.Errorf("expires_at %q: ExpiresAt = %v, want zero", bad, n.ExpiresAt)
		}
	}

	progress := claimEvent("sha256:04", KindProgress, bob, laptop, []string{"docs"}, str("summary", "half way"))
	n, ok = NodeOf(progress)
	if ok || !reflect.DeepEqual(n, LineageNode{EventID: "sha256:04", RepositoryID: "repo", IdentityID: bob, Kind: KindProgress, ThreadID: "thread-1"}) {
		t.Errorf("NodeOf(progress) = %+v, %v", n, ok)
	}
}

// base lineage fixtures: an open by alice on {docs, api} and a valid renew.
func baseOpen() LineageNode {
	return LineageNode{EventID: "open", RepositoryID: "repo", ClaimID: claimC, IdentityID: alice,
		Kind: KindClaimOpen, Generation: 1, Paths: []string{"docs", "api"}, ExpiresAt: lineageNow.Add(time.Hour)}
}

func baseRenew() LineageNode {
	return LineageNode{EventID: "renew2", RepositoryID: "repo", ClaimID: claimC, IdentityID: alice,
		Kind: KindClaimRenew, Generation: 2, PredecessorEventID: "open", Paths: []string{"api", "docs"},
		ExpiresAt: lineageNow.Add(2 * time.Hour)}
}

func TestSuccessor(t *testing.T) {
	progress := LineageNode{EventID: "open", RepositoryID: "repo", IdentityID: alice, Kind: KindProgress}
	release := baseOpen()
	release.Kind, release.Generation = KindClaimRelease, 2
	tests := []struct {
		name       string
		pred       LineageNode
		predStatus LineageStatus
		root       string
		child      func(*LineageNode)
		want       LineageStatus
	}{
		{"renew, same path set reordered", baseOpen(), LineageValid, alice, func(*LineageNode) {}, LineageValid},
		{"release", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.Kind, c.ExpiresAt = KindClaimRelease, time.Time{} }, LineageValid},
		{"repeated path in the same set", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.Paths = []string{"api", "docs", "api"} }, LineageValid},
		{"expired predecessor still has successors", func() LineageNode { p := baseOpen(); p.ExpiresAt = lineageNow.Add(-time.Hour); return p }(), LineageValid, alice, func(*LineageNode) {}, LineageValid},
		{"predecessor pending", baseOpen(), LineagePending, alice, func(*LineageNode) {}, LineagePending},
		{"predecessor invalid", baseOpen(), LineageInvalid, alice, func(*LineageNode) {}, LineageInvalid},
		{"predecessor not a claim", progress, LineageNotApplicable, "", func(*LineageNode) {}, LineageInvalid},
		{"predecessor is a release", release, LineageValid, alice, func(c *LineageNode) { c.Generation = 3 }, LineageInvalid},
		{"generation gap 1 to 3", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.Generation = 3 }, LineageInvalid},
		{"same generation", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.Generation = 1 }, LineageInvalid},
		{"other repository", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.RepositoryID = "other" }, LineageInvalid},
		{"other claim", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.ClaimID = "other" }, LineageInvalid},
		{"other identity", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.IdentityID = bob }, LineageInvalid},
		{"signed by pred's identity, not the root's", baseOpen(), LineageValid, bob, func(*LineageNode) {}, LineageInvalid},
		{"fewer paths", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.Paths = []string{"docs"} }, LineageInvalid},
		{"other paths", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.Paths = []string{"docs", "api/v2"} }, LineageInvalid},
		{"child is an open", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.Kind = KindClaimOpen }, LineageInvalid},
		{"child names another predecessor", baseOpen(), LineageValid, alice, func(c *LineageNode) { c.PredecessorEventID = "elsewhere" }, LineageInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := baseRenew()
			tc.child(&c)
			if got := Successor(tc.pred, tc.predStatus, tc.root, c); got != tc.want {
				t.Errorf("Successor = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRootStatus(t *testing.T) {
	o := baseOpen()
	if got := RootStatus(o); got != LineageValid {
		t.Errorf("generation 1: %q", got)
	}
	o.Generation = 2
	if got := RootStatus(o); got != LineageInvalid {
		t.Errorf("generation 2: %q", got)
	}
}

// TestLineageDeviceMayChangeIdentityMayNot goes through NodeOf: a renew
// from alice's other device is valid, one signed by bob is not.
func TestLineageDeviceMayChangeIdentityMayNot(t *testing.T) {
	open := claimEvent("sha256:0a", KindClaimOpen, alice, laptop, []string{"docs"},
		str("claim_id", claimC), num("generation", 1), str("expires_at", "2026-07-19T11:00:00.000Z"))
	renew := func(id, identity, device string) *Event {
		return claimEvent(id, KindClaimRenew, identity, device, []string{"docs"},
			str("claim_id", claimC), num("generation", 2), str("predecessor_event_id", "sha256:0a"),
			str("expires_at", "2026-07-19T12:00:00.000Z"))
	}
	var nodes []LineageNode
	for _, e := range []*Event{open, renew("sha256:0b", alice, desktop), renew("sha256:0c", bob, laptop)} {
		n, _ := NodeOf(e)
		nodes = append(nodes, n)
	}
	r := ProjectLineage(nodes, lineageNow)
	want := map[string]LineageStatus{"sha256:0a": LineageValid, "sha256:0b": LineageValid, "sha256:0c": LineageInvalid}
	if !reflect.DeepEqual(r.Status, want) || !slices.Equal(r.Active, []string{"sha256:0b"}) {
		t.Errorf("status %v active %v", r.Status, r.Active)
	}
}

func node(id string, kind Kind, gen int64, pred string, expires time.Duration) LineageNode {
	n := LineageNode{EventID: id, RepositoryID: "repo", ClaimID: claimC, IdentityID: alice, Kind: kind,
		Generation: gen, PredecessorEventID: pred, Paths: []string{"docs"}}
	if kind != KindClaimRelease {
		n.ExpiresAt = lineageNow.Add(expires)
	}
	return n
}

func TestProjectLineageEdges(t *testing.T) {
	h := time.Hour
	tests := []struct {
		name       string
		nodes      []LineageNode
		status     map[string]LineageStatus
		tips       []string
		active     []string
		conflicted []string
	}{
		{
			name:   "generation gap 1 to 3 is invalid, and so is its child",
			nodes:  []LineageNode{node("o", KindClaimOpen, 1, "", h), node("r3", KindClaimRenew, 3, "o", h), node("r4", KindClaimRenew, 4, "r3", h)},
			status: map[string]LineageStatus{"o": LineageValid, "r3": LineageInvalid, "r4": LineageInvalid},
			tips:   []string{"o"}, active: []string{"o"},
		},
		{
			name: "different repository is invalid",
			nodes: []LineageNode{node("o", KindClaimOpen, 1, "", h),
				func() LineageNode { n := node("r2", KindClaimRenew, 2, "o", h); n.RepositoryID = "other"; return n }()},
			status: map[string]LineageStatus{"o": LineageValid, "r2": LineageInvalid},
			tips:   []string{"o"}, active: []string{"o"},
		},
		{
			name: "release child of a release is invalid; the first release stays the tip",
			nodes: []LineageNode{node("o", KindClaimOpen, 1, "", h), node("x2", KindClaimRelease, 2, "o", 0),
				node("x3", KindClaimRelease, 3, "x2", 0), node("r3", KindClaimRenew, 3, "x2", h)},
			status: map[string]LineageStatus{"o": LineageValid, "x2": LineageValid, "x3": LineageInvalid, "r3": LineageInvalid},
			tips:   []string{"x2"},
		},
		{
			name:   "already-expired open is valid history, a tip, never active",
			nodes:  []LineageNode{node("o", KindClaimOpen, 1, "", -h)},
			status: map[string]LineageStatus{"o": LineageValid},
			tips:   []string{"o"},
		},
		{
			name:   "expiry equal to now is not active",
			nodes:  []LineageNode{node("o", KindClaimOpen, 1, "", 0)},
			status: map[string]LineageStatus{"o": LineageValid},
			tips:   []string{"o"},
		},
		{
			name:   "expired renew never hands the tip back to its open",
			nodes:  []LineageNode{node("o", KindClaimOpen, 1, "", h), node("r2", KindClaimRenew, 2, "o", -h)},
			status: map[string]LineageStatus{"o": LineageValid, "r2": LineageValid},
			tips:   []string{"r2"},
		},
		{
			name: "pending and invalid children leave the tip where it is",
			nodes: []LineageNode{node("o", KindClaimOpen, 1, "", h), node("r2", KindClaimRenew, 2, "o", h),
				node("bad3", KindClaimRenew, 4, "r2", h), node("late3", KindClaimRenew, 3, "missing", h)},
			status: map[string]LineageStatus{"o": LineageValid, "r2": LineageValid, "bad3": LineageInvalid, "late3": LineagePending},
			tips:   []string{"r2"}, active: []string{"r2"},
		},
		{
			name:   "open with generation 2 is invalid",
			nodes:  []LineageNode{node("o", KindClaimOpen, 2, "", h)},
			status: map[string]LineageStatus{"o": LineageInvalid},
		},
		{
			name: "predecessor that is not a claim makes the child invalid",
			nodes: []LineageNode{{EventID: "p", RepositoryID: "repo", IdentityID: alice, Kind: KindProgress},
				node("r2", KindClaimRenew, 2, "p", h)},
			status: map[string]LineageStatus{"p": LineageNotApplicable, "r2": LineageInvalid},
		},
		{
			name:       "two opens with one claim_id are colliding roots, both kept",
			nodes:      []LineageNode{node("a", KindClaimOpen, 1, "", h), func() LineageNode { n := node("b", KindClaimOpen, 1, "", h); n.IdentityID = bob; return n }()},
			status:     map[string]LineageStatus{"a": LineageValid, "b": LineageValid},
			tips:       []string{"a", "b"},
			active:     []string{"a", "b"},
			conflicted: []string{"a", "b"},
		},
		{
			name: "the same claim_id in another repository does not compete",
			nodes: []LineageNode{node("a", KindClaimOpen, 1, "", h),
				func() LineageNode { n := node("b", KindClaimOpen, 1, "", h); n.RepositoryID = "other"; return n }()},
			status: map[string]LineageStatus{"a": LineageValid, "b": LineageValid},
			tips:   []string{"a", "b"}, active: []string{"a", "b"},
		},
		{
			name:   "self-predecessor stays pending",
			nodes:  []LineageNode{node("s", KindClaimRenew, 2, "s", h)},
			status: map[string]LineageStatus{"s": LineagePending},
		},
		{
			name:   "predecessor loop stays pending",
			nodes:  []LineageNode{node("x", KindClaimRenew, 2, "y", h), node("y", KindClaimRenew, 3, "x", h), node("z", KindClaimRenew, 4, "y", h)},
			status: map[string]LineageStatus{"x": LineagePending, "y": LineagePending, "z": LineagePending},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ProjectLineage(tc.nodes, lineageNow)
			if !reflect.DeepEqual(r.Status, tc.status) {
				t.Errorf("status = %v, want %v", r.Status, tc.status)
			}
			if !slices.Equal(r.Tips, tc.tips) || !slices.Equal(r.Active, tc.active) || !slices.Equal(r.Conflicted, tc.conflicted) {
				t.Errorf("tips %v active %v conflicted %v; want %v %v %v", r.Tips, r.Active, r.Conflicted, tc.tips, tc.active, tc.conflicted)
			}
			l := NewLineage()
			for _, n := range tc.nodes {
				l.Add(n, 0)
			}
			if got := l.Result(lineageNow); !reflect.DeepEqual(got, r) {
				t.Errorf("Lineage = %+v, ProjectLineage = %+v", got, r)
			}
		})
	}
}

// TestLineageLongChainArrivesBackwards: 40 renews arrive newest first, then
// their open; the pending cascade resolves 32 rows with the open's arrival
// and the last 8 on the next read.
func TestLineageLongChainArrivesBackwards(t *testing.T) {
	const length = 40
	nodes := []LineageNode{node("g01", KindClaimOpen, 1, "", time.Hour)}
	for g := 2; g <= length+1; g++ {
		nodes = append(nodes, node(fmt.Sprintf("g%02d", g), KindClaimRenew, int64(g), fmt.Sprintf("g%02d", g-1), time.Hour))
	}
	last := nodes[length].EventID

	l := NewLineage()
	for i := length; i >= 1; i-- {
		changes := l.Add(nodes[i], 32)
		if len(changes) != 1 || changes[0] != (LineageChange{EventID: nodes[i].EventID, To: LineagePending}) {
			t.Fatalf("arrival of %s: changes %v", nodes[i].EventID, changes)
		}
	}
	if l.Incomplete() {
		t.Fatal("frontier not empty before the open arrives")
	}
	changes := l.Add(nodes[0], 32)
	if len(changes) != 33 || changes[0] != (LineageChange{EventID: "g01", To: LineageValid}) ||
		changes[32] != (LineageChange{EventID: "g33", From: LineagePending, To: LineageValid}) {
		t.Fatalf("open arrival: %d changes, first %v last %v", len(changes), changes[0], changes[len(changes)-1])
	}
	if !l.Incomplete() || l.Frontier() != 1 {
		t.Fatalf("after 32 rows: incomplete %v frontier %d", l.Incomplete(), l.Frontier())
	}
	r := l.Result(lineageNow)
	if !slices.Equal(r.Active, []string{"g33"}) || r.Status["g34"] != LineagePending || r.Status[last] != LineagePending {
		t.Fatalf("truncated state: active %v, g34 %q", r.Active, r.Status["g34"])
	}
	if changes := l.Drain(32); len(changes) != 8 || l.Incomplete() {
		t.Fatalf("drain: %d changes, incomplete %v", len(changes), l.Incomplete())
	}
	r = l.Result(lineageNow)
	if !slices.Equal(r.Active, []string{last}) || !slices.Equal(r.Tips, []string{last}) {
		t.Fatalf("active %v tips %v, want [%s]", r.Active, r.Tips, last)
	}
	for id, st := range r.Status {
		if st != LineageValid {
			t.Errorf("%s is %q", id, st)
		}
	}
	if want := ProjectLineage(nodes, lineageNow); !reflect.DeepEqual(r, want) {
		t.Errorf("Lineage %+v != ProjectLineage %+v", r, want)
	}

	unlimited := NewLineage()
	for i := length; i >= 0; i-- {
		unlimited.Add(nodes[i], 0)
	}
	if got := unlimited.Result(lineageNow); !reflect.DeepEqual(got, r) || unlimited.Incomplete() {
		t.Errorf("unlimited budget: %+v", got)
	}
}

func TestLineageExactRetry(t *testing.T) {
	l := NewLineage()
	l.Add(node("r2", KindClaimRenew, 2, "o", time.Hour), 1)
	l.Add(node("r3", KindClaimRenew, 3, "r2", time.Hour), 1)
	l.Add(node("o", KindClaimOpen, 1, "", time.Hour), 1) // resolves r2, leaves r3 ready
	if !l.Incomplete() {
		t.Fatal("want r3 on the frontier")
	}
	changes := l.Add(node("o", KindClaimOpen, 1, "", time.Hour), 1)
	if !slices.Equal(changes, []LineageChange{{EventID: "r3", From: LineagePending, To: LineageValid}}) {
		t.Errorf("retry changes = %v", changes)
	}
	if got := l.Arrived(); !slices.Equal(got, []string{"r2", "r3", "o"}) {
		t.Errorf("arrived = %v", got)
	}
	if st, ok := l.Status("r3"); !ok || st != LineageValid {
		t.Errorf("r3 = %q %v", st, ok)
	}
	if _, ok := l.Status("nope"); ok {
		t.Error("unknown id reported stored")
	}
}

// genForest draws a random set of claim nodes over two repositories, three
// claim ids and two identities: colliding roots, forks, releases, children
// with a mismatched generation/repository/claim/identity/path set, children
// of non-claim events and of missing events, and expiries on both sides of
// lineageNow (including exactly now). When collide is set, the first two
// nodes are opens of one (repository, claim).
func genForest(t *rapid.T, collide bool) []LineageNode {
	repos := []string{"r1", "r2"}
	claims := []string{"c1", "c2", "c3"}
	idents := []string{alice, bob}
	pathPool := []string{".", "docs", "api", "api/v2"}
	genPaths := func(label string) []string {
		return rapid.SliceOfNDistinct(rapid.SampledFrom(pathPool), 1, 3, rapid.ID[string]).Draw(t, label)
	}
	expiry := func() time.Time {
		return lineageNow.Add(time.Duration(rapid.IntRange(-2, 2).Draw(t, "expiry")) * 30 * time.Minute)
	}
	minCount := 1
	if collide {
		minCount = 2
	}
	count := rapid.IntRange(minCount, 24).Draw(t, "count")
	var nodes []LineageNode
	rootOf := map[string]string{} // generator's notion of each node's root identity
	for i := range count {
		n := LineageNode{EventID: fmt.Sprintf("e%02d", i), ThreadID: "t"}
		shape := rapid.IntRange(0, 9).Draw(t, "shape")
		switch {
		case collide && i < 2:
			n.Kind, n.Generation, n.RepositoryID, n.ClaimID = KindClaimOpen, 1, "r1", "c1"
			n.IdentityID = rapid.SampledFrom(idents).Draw(t, "identity")
			n.Paths, n.ExpiresAt = genPaths("paths"), expiry()
		case i == 0 || shape < 3:
			n.Kind, n.Generation = KindClaimOpen, 1
			if rapid.IntRange(0, 9).Draw(t, "bad open") == 0 {
				n.Generation = 2
			}
			n.RepositoryID = rapid.SampledFrom(repos).Draw(t, "repository")
			n.ClaimID = rapid.SampledFrom(claims).Draw(t, "claim")
			n.IdentityID = rapid.SampledFrom(idents).Draw(t, "identity")
			n.Paths, n.ExpiresAt = genPaths("paths"), expiry()
		case shape == 3:
			n.Kind, n.RepositoryID = KindProgress, rapid.SampledFrom(repos).Draw(t, "repository")
			n.IdentityID = rapid.SampledFrom(idents).Draw(t, "identity")
		default:
			n.Kind = KindClaimRenew
			if rapid.IntRange(0, 2).Draw(t, "release") == 0 {
				n.Kind = KindClaimRelease
			}
			if rapid.IntRange(0, 9).Draw(t, "dangling") == 0 {
				n.PredecessorEventID = fmt.Sprintf("missing%02d", i)
				n.RepositoryID, n.ClaimID = rapid.SampledFrom(repos).Draw(t, "repository"), rapid.SampledFrom(claims).Draw(t, "claim")
				n.IdentityID, n.Generation = rapid.SampledFrom(idents).Draw(t, "identity"), int64(rapid.IntRange(2, 4).Draw(t, "generation"))
				n.Paths = genPaths("paths")
			} else {
				pred := nodes[rapid.IntRange(0, len(nodes)-1).Draw(t, "predecessor")]
				n.PredecessorEventID = pred.EventID
				n.RepositoryID, n.ClaimID, n.IdentityID = pred.RepositoryID, pred.ClaimID, rootOf[pred.EventID]
				n.Generation = pred.Generation + 1
				n.Paths = rapid.Permutation(pred.Paths).Draw(t, "same paths")
				switch rapid.IntRange(0, 11).Draw(t, "mismatch") {
				case 0:
					n.Generation += int64(rapid.SampledFrom([]int{-1, 1}).Draw(t, "generation skew"))
				case 1:
					n.RepositoryID = rapid.SampledFrom(repos).Draw(t, "repository")
				case 2:
					n.ClaimID = rapid.SampledFrom(claims).Draw(t, "claim")
				case 3:
					n.IdentityID = rapid.SampledFrom(idents).Draw(t, "identity")
				case 4:
					n.Paths = genPaths("paths")
				}
			}
			if n.Kind == KindClaimRenew {
				n.ExpiresAt = expiry()
			}
		}
		if n.Kind == KindClaimOpen {
			rootOf[n.EventID] = n.IdentityID
		} else if n.PredecessorEventID != "" {
			rootOf[n.EventID] = rootOf[n.PredecessorEventID]
		}
		nodes = append(nodes, n)
	}
	// Drop a few stored events so that interior predecessors go missing.
	var kept []LineageNode
	for _, n := range nodes {
		if len(nodes) < 3 || (collide && n.EventID <= "e01") || rapid.IntRange(0, 11).Draw(t, "drop") != 0 {
			kept = append(kept, n)
		}
	}
	return kept
}

// oracleStatus is the recursive definition of spec §8, written as plainly
// as possible to cross-check ProjectLineage and Lineage.
func oracleStatus(nodes []LineageNode) map[string]LineageStatus {
	byID := map[string]LineageNode{}
	for _, n := range nodes {
		byID[n.EventID] = n
	}
	var status func(id string, depth int) (LineageStatus, string)
	status = func(id string, depth int) (LineageStatus, string) {
		n := byID[id]
		switch {
		case !n.Kind.IsClaim():
			return LineageNotApplicable, ""
		case n.Kind == KindClaimOpen:
			return RootStatus(n), n.IdentityID
		case depth > len(nodes):
			return LineagePending, "" // a loop
		}
		pred, ok := byID[n.PredecessorEventID]
		if !ok {
			return LineagePending, ""
		}
		ps, root := status(pred.EventID, depth+1)
		return Successor(pred, ps, root, n), root
	}
	out := map[string]LineageStatus{}
	for id := range byID {
		out[id], _ = status(id, 0)
	}
	return out
}

// checkNoReactivation asserts property (b) on one state: an event that has
// ever had a valid child (in this or an earlier state) is not a tip; active
// tips are unexpired open/renew tips; decided statuses never change.
func checkNoReactivation(t *rapid.T, r LineageResult, byID map[string]LineageNode, superseded map[string]bool, decided map[string]LineageStatus) {
	for id, st := range r.Status {
		if st == LineageValid && byID[id].Kind != KindClaimOpen {
			superseded[byID[id].PredecessorEventID] = true
		}
		if was, ok := decided[id]; ok && was != st {
			t.Fatalf("%s went from %q to %q", id, was, st)
		}
		if st != LineagePending {
			decided[id] = st
		}
	}
	for _, id := range r.Tips {
		if superseded[id] {
			t.Fatalf("%s has had a valid child but is a tip again", id)
		}
	}
	for _, id := range r.Active {
		n := byID[id]
		if !slices.Contains(r.Tips, id) || n.Kind == KindClaimRelease || !n.ExpiresAt.After(lineageNow) {
			t.Fatalf("%s is active but not an unexpired open/renew tip", id)
		}
	}
}

// TestLineageArrivalOrderProperty covers properties (a) and (b): every
// arrival order of one set gives the same final projection, both for the
// pure function and for incremental processing with any budget followed by
// reads that drain the frontier; and no state ever lets a superseded event
// be a tip again.
func TestLineageArrivalOrderProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := genForest(t, rapid.Bool().Draw(t, "collide"))
		byID := map[string]LineageNode{}
		for _, n := range nodes {
			byID[n.EventID] = n
		}
		want := ProjectLineage(nodes, lineageNow)
		if oracle := oracleStatus(nodes); !reflect.DeepEqual(want.Status, oracle) {
			t.Fatalf("ProjectLineage status %v, oracle %v", want.Status, oracle)
		}
		order := rapid.Permutation(nodes).Draw(t, "arrival")
		if got := ProjectLineage(order, lineageNow); !reflect.DeepEqual(got, want) {
			t.Fatalf("ProjectLineage depends on order: %+v vs %+v", got, want)
		}

		// Unlimited budget: every state is the projection of its prefix.
		l := NewLineage()
		superseded, decided := map[string]bool{}, map[string]LineageStatus{}
		for i, n := range order {
			l.Add(n, 0)
			r := l.Result(lineageNow)
			if prefix := ProjectLineage(order[:i+1], lineageNow); !reflect.DeepEqual(r, prefix) {
				t.Fatalf("after %d arrivals: Lineage %+v, ProjectLineage %+v", i+1, r, prefix)
			}
			checkNoReactivation(t, r, byID, superseded, decided)
		}
		if l.Incomplete() {
			t.Fatal("unlimited budget left frontier rows")
		}

		// Bounded budget with interleaved reads: every state is its prefix's
		// projection with some rows still pending, and reads converge.
		budget := rapid.IntRange(1, 4).Draw(t, "budget")
		b := NewLineage()
		superseded, decided = map[string]bool{}, map[string]LineageStatus{}
		for i, n := range order {
			b.Add(n, budget)
			for range rapid.IntRange(0, 2).Draw(t, "reads") {
				b.Drain(budget)
			}
			r := b.Result(lineageNow)
			prefix := ProjectLineage(order[:i+1], lineageNow)
			for id, st := range r.Status {
				if st != prefix.Status[id] && st != LineagePending {
					t.Fatalf("after %d arrivals %s is %q, prefix projection says %q", i+1, id, st, prefix.Status[id])
				}
			}
			checkNoReactivation(t, r, byID, superseded, decided)
		}
		for reads := 0; b.Incomplete(); reads++ {
			if reads > len(nodes) {
				t.Fatalf("frontier not drained after %d reads", reads)
			}
			b.Drain(budget)
			checkNoReactivation(t, b.Result(lineageNow), byID, superseded, decided)
		}
		if got := b.Result(lineageNow); !reflect.DeepEqual(got, want) {
			t.Fatalf("budget %d converged to %+v, want %+v", budget, got, want)
		}
	})
}

// TestLineageCollidingRootsProperty covers property (c): two opens of one
// (repository, claim) are both valid, each a tip until it has a valid
// child, and conflicted while both are tips.
func TestLineageCollidingRootsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := genForest(t, true)
		r := ProjectLineage(rapid.Permutation(nodes).Draw(t, "arrival"), lineageNow)
		hasValidChild := map[string]bool{}
		for _, n := range nodes {
			if n.Kind != KindClaimOpen && r.Status[n.EventID] == LineageValid {
				hasValidChild[n.PredecessorEventID] = true
			}
		}
		for _, root := range []string{"e00", "e01"} {
			if r.Status[root] != LineageValid {
				t.Fatalf("colliding root %s is %q", root, r.Status[root])
			}
			if isTip := slices.Contains(r.Tips, root); isTip == hasValidChild[root] {
				t.Fatalf("root %s: tip %v, has valid child %v", root, isTip, hasValidChild[root])
			}
		}
		if !hasValidChild["e00"] && !hasValidChild["e01"] {
			if !slices.Contains(r.Conflicted, "e00") || !slices.Contains(r.Conflicted, "e01") {
				t.Fatalf("both roots are tips but conflicted = %v", r.Conflicted)
			}
		}
		for k, tips := range r.TipsByClaim {
			for _, id := range tips {
				if slices.Contains(r.Conflicted, id) != (len(tips) > 1) {
					t.Fatalf("claim %v tips %v, conflicted %v", k, tips, r.Conflicted)
				}
			}
		}
	})
}
