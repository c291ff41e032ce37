package relay_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
)

type voiceBody struct {
	Protocol         string            `json:"protocol"`
	Scope            string            `json:"scope"`
	EvaluatedAt      string            `json:"evaluated_at"`
	Cursor           *string           `json:"cursor"`
	ProjectionStatus string            `json:"projection_status"`
	Truncated        bool              `json:"truncated"`
	RecentEvents     []json.RawMessage `json:"recent_events"`
	ActiveClaims     []claimRow        `json:"active_claims"`
	Conflicts        struct {
		MissingParents []struct {
			EventID          string   `json:"event_id"`
			MissingParentIDs []string `json:"missing_parent_ids"`
		} `json:"missing_parents"`
		SessionForks []struct {
			IdentityID string   `json:"identity_id"`
			DeviceID   string   `json:"device_id"`
			SessionID  string   `json:"session_id"`
			SessionSeq int64    `json:"session_seq"`
			EventIDs   []string `json:"event_ids"`
		} `json:"session_forks"`
		OverlappingClaims []struct {
			LeftEventID  string   `json:"left_event_id"`
			RightEventID string   `json:"right_event_id"`
			Paths        []string `json:"paths"`
		} `json:"overlapping_claims"`
	} `json:"conflicts"`
}

func (e *env) voice(tok, query string) (voiceBody, resp) {
	e.t.Helper()
	r := e.do("GET", "/v1/correspondence/voice?"+query, tok, nil)
	mustStatus(e.t, r, 200)
	var v voiceBody
	if err := json.Unmarshal(r.Body, &v); err != nil {
		e.t.Fatalf("voice body: %v: %s", err, r.Body)
	}
	return v, r
}

func recentIDs(t *testing.T, v voiceBody) []string {
	t.Helper()
	var out []string
	for _, raw := range v.RecentEvents {
		var rec struct {
			Event struct {
				EventID string `json:"event_id"`
			} `json:"event"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.Event.EventID)
	}
	return out
}

// withSeq re-signs ev with another session_seq (a session fork when seq
// repeats one already used).
func (a *agent) withSeq(ev *correspondence.Event, seq int64) *correspondence.Event {
	ev.SessionSeq = seq
	if err := ev.Sign(a.Priv); err != nil {
		panic(err)
	}
	return ev
}

func TestVoiceExactBody(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	want := `{"protocol":"agent-correspondence/v0.1","scope":"project_private","evaluated_at":"1970-01-01T00:00:00.000Z","cursor":null,"projection_status":"complete","truncated":false,"recent_events":[],"active_claims":[],"conflicts":{"missing_parents":[],"session_forks":[],"overlapping_claims":[]}}`
	if r := e.do("GET", "/v1/correspondence/voice?repository_id=repo", tok, nil); string(r.Body) != want {
		t.Fatalf("empty:\n got %s\nwant %s", r.Body, want)
	}
	ghost := "sha256:" + strings.Repeat("ab", 32)
	ev := a.event("repo", "t", correspondence.KindIntent, obj("summary", "waiting on a ghost"), []string{ghost})
	r := e.post(a, ev)
	mustStatus(t, r, 201)
	seq, at := receiptOf(t, r)
	want = `{"protocol":"agent-correspondence/v0.1","scope":"project_private","evaluated_at":"` + at + `","cursor":"` + seq +
		`","projection_status":"complete","truncated":false,"recent_events":[{"event":` + string(eventJSON(t, ev)) +
		`,"receipt":{"received_seq":"` + seq + `","received_at":"` + at + `"},"missing_parents":["` + ghost +
		`"],"lineage_status":"not_applicable"}],"active_claims":[],"conflicts":{"missing_parents":[{"event_id":"` + ev.ID +
		`","missing_parent_ids":["` + ghost + `"]}],"session_forks":[],"overlapping_claims":[]}}`
	got := e.do("GET", "/v1/correspondence/voice?repository_id=repo", tok, nil)
	if string(got.Body) != want {
		t.Fatalf("one record:\n got %s\nwant %s", got.Body, want)
	}
}

func TestVoiceRecentWindowAndMissingParents(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	parent := a.intent("repo", "the parent")
	child := a.event("repo", "t", correspondence.KindProgress, obj("summary", "child first"), []string{parent.ID})
	mustStatus(t, e.post(a, child), 201)
	v, _ := e.voice(tok, "repository_id=repo")
	if len(v.Conflicts.MissingParents) != 1 || v.Conflicts.MissingParents[0].EventID != child.ID ||
		!slices.Equal(v.Conflicts.MissingParents[0].MissingParentIDs, []string{parent.ID}) {
		t.Fatalf("missing parents: %+v", v.Conflicts.MissingParents)
	}
	mustStatus(t, e.post(a, parent), 201)
	v, _ = e.voice(tok, "repository_id=repo")
	if len(v.Conflicts.MissingParents) != 0 || !slices.Equal(recentIDs(t, v), []string{parent.ID, child.ID}) || v.ProjectionStatus != "complete" {
		t.Fatalf("after the parent: %+v %v", v.Conflicts.MissingParents, recentIDs(t, v))
	}

	var evs []*correspondence.Event
	for i := range 49 {
		evs = append(evs, a.event("repo", "t2", correspondence.KindIntent, obj("summary", fmt.Sprint("n", i)), nil))
	}
	for _, ev := range evs[:48] {
		mustStatus(t, e.post(a, ev), 201)
	}
	v, _ = e.voice(tok, "repository_id=repo")
	if len(v.RecentEvents) != 50 || v.Truncated || v.ProjectionStatus != "complete" {
		t.Fatalf("exactly 50 records: %d, truncated %v", len(v.RecentEvents), v.Truncated)
	}
	mustStatus(t, e.post(a, evs[48]), 201)
	v, _ = e.voice(tok, "repository_id=repo")
	ids := recentIDs(t, v)
	if len(ids) != 50 || !v.Truncated || v.ProjectionStatus != "truncated" || ids[0] != evs[48].ID || ids[49] != parent.ID {
		t.Fatalf("51 records: %d, truncated %v %s, newest %s", len(ids), v.Truncated, v.ProjectionStatus, ids[0])
	}
	// The thread filter narrows the window: t2 holds 49.
	v, _ = e.voice(tok, "repository_id=repo&thread_id=t2")
	if len(v.RecentEvents) != 49 || v.Truncated {
		t.Fatalf("thread t2: %d, truncated %v", len(v.RecentEvents), v.Truncated)
	}
}

func TestVoiceSessionForks(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	one := a.withSeq(a.intent("repo", "one"), 7)
	two := a.withSeq(a.intent("repo", "two"), 7)
	mustStatus(t, e.post(a, one), 201)
	r := e.post(a, two)
	mustStatus(t, r, 201)
	v, _ := e.voice(tok, "repository_id=repo")
	want := []string{one.ID, two.ID}
	slices.Sort(want)
	if len(v.Conflicts.SessionForks) != 1 {
		t.Fatalf("forks: %+v", v.Conflicts.SessionForks)
	}
	f := v.Conflicts.SessionForks[0]
	if f.IdentityID != a.IdentityID || f.DeviceID != a.DeviceID || f.SessionID != a.SessionID || f.SessionSeq != 7 || !slices.Equal(f.EventIDs, want) {
		t.Fatalf("fork row %+v", f)
	}
	if v.Truncated || v.ProjectionStatus != "complete" {
		t.Errorf("status %s", v.ProjectionStatus)
	}
	// A fork across repositories is found by the tuple lookup: the other
	// repository's event is listed too.
	three := a.withSeq(a.intent("other", "three"), 7)
	mustStatus(t, e.post(a, three), 201)
	v, _ = e.voice(tok, "repository_id=other")
	if len(v.Conflicts.SessionForks) != 1 || len(v.Conflicts.SessionForks[0].EventIDs) != 3 {
		t.Fatalf("cross-repository fork: %+v", v.Conflicts.SessionForks)
	}
	// 18 events on one tuple: 16 listed, the sentinel sets truncated.
	var evs []*correspondence.Event
	for i := range 18 {
		evs = append(evs, a.withSeq(a.intent("forky", fmt.Sprint("f", i)), 9))
	}
	e.postAll(a, evs)
	v, _ = e.voice(tok, "repository_id=forky")
	if len(v.Conflicts.SessionForks) != 1 || len(v.Conflicts.SessionForks[0].EventIDs) != 16 || !v.Truncated || v.ProjectionStatus != "truncated" {
		t.Fatalf("18-way fork: %+v truncated %v", v.Conflicts.SessionForks, v.Truncated)
	}
	if !slices.IsSorted(v.Conflicts.SessionForks[0].EventIDs) {
		t.Error("fork ids unsorted")
	}
	// Forks are seeded from the recent window only: once both events of
	// the first fork are older than the newest 50 of the repository, the
	// fork is not looked up.
	evs = evs[:0]
	for i := range 50 {
		evs = append(evs, a.intent("repo", fmt.Sprint("later", i)))
	}
	e.postAll(a, evs)
	v, _ = e.voice(tok, "repository_id=repo")
	if len(v.Conflicts.SessionForks) != 0 || !v.Truncated {
		t.Fatalf("fork outside the window: %+v", v.Conflicts.SessionForks)
	}
}

func TestVoiceOverlappingClaims(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	b := e.newAgent(pid, tok)
	exp := time.Now().Add(time.Hour)
	sdk := a.claim("repo", "t", newUUID(), 1, "", exp, "packages/sdk", "docs")
	src := b.claim("repo", "t", newUUID(), 1, "", exp, "packages/sdk/src", "docs/api", "tools")
	old := b.claim("repo", "t", newUUID(), 1, "", exp, "packages/sdk-old")
	for _, ev := range []*correspondence.Event{sdk, src, old} {
		mustStatus(t, e.post(a, ev), 201)
	}
	v, _ := e.voice(tok, "repository_id=repo")
	left, right := sdk.ID, src.ID
	if left > right {
		left, right = right, left
	}
	if len(v.ActiveClaims) != 3 || len(v.Conflicts.OverlappingClaims) != 1 {
		t.Fatalf("claims %d, overlaps %+v", len(v.ActiveClaims), v.Conflicts.OverlappingClaims)
	}
	o := v.Conflicts.OverlappingClaims[0]
	if o.LeftEventID != left || o.RightEventID != right || !slices.Equal(o.Paths, []string{"docs", "packages/sdk"}) {
		t.Fatalf("overlap row %+v", o)
	}
	// "." overlaps everything: three more rows, each naming ".".
	whole := a.claim("repo", "t", newUUID(), 1, "", exp, ".")
	mustStatus(t, e.post(a, whole), 201)
	v, _ = e.voice(tok, "repository_id=repo")
	if len(v.Conflicts.OverlappingClaims) != 4 || v.ProjectionStatus != "complete" {
		t.Fatalf("with a whole-repository claim: %+v", v.Conflicts.OverlappingClaims)
	}
	for _, o := range v.Conflicts.OverlappingClaims {
		if o.LeftEventID >= o.RightEventID {
			t.Errorf("row not ordered: %+v", o)
		}
		if (o.LeftEventID == whole.ID || o.RightEventID == whole.ID) && !slices.Equal(o.Paths, []string{"."}) {
			t.Errorf("row with the whole-repository claim: %+v", o)
		}
	}
	if !slices.IsSortedFunc(v.Conflicts.OverlappingClaims, func(x, y struct {
		LeftEventID  string   `json:"left_event_id"`
		RightEventID string   `json:"right_event_id"`
		Paths        []string `json:"paths"`
	}) int {
		return strings.Compare(x.LeftEventID+x.RightEventID, y.LeftEventID+y.RightEventID)
	}) {
		t.Error("rows unsorted")
	}
}

// TestVoiceOverlapCap: 17 claims on one path make 136 overlapping pairs:
// 128 rows and truncated.
func TestVoiceOverlapCap(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	var evs []*correspondence.Event
	for range 17 {
		evs = append(evs, a.claim("repo", "t", newUUID(), 1, "", time.Now().Add(time.Hour), "src"))
	}
	e.postAll(a, evs)
	v, _ := e.voice(tok, "repository_id=repo")
	if len(v.ActiveClaims) != 17 || len(v.Conflicts.OverlappingClaims) != 128 || !v.Truncated || v.ProjectionStatus != "truncated" {
		t.Fatalf("%d claims, %d overlaps, truncated %v", len(v.ActiveClaims), len(v.Conflicts.OverlappingClaims), v.Truncated)
	}
}
