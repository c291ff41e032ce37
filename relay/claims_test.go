package relay_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

// newEnvWith is newEnv with a relay configuration (and optional changes to
// the test's http.Server); it also returns the Server and the database file.
func newEnvWith(t testing.TB, cfg relay.Config, tune ...func(*http.Server)) (*env, *relay.Server, string) {
	t.Helper()
	var st store.Store
	path := ""
	if os.Getenv("ACRELAY_RELAY_TEST_STORE") == "postgres" {
		st = openTestStore(t)
	} else {
		path = filepath.Join(t.TempDir(), "acrelay.db")
		db, err := sqlite.Open(context.Background(), path, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		st = db
	}
	cfg.OperatorToken, cfg.PublicURL = operatorToken, "http://relay.test"
	s := relay.New(st, cfg)
	srv := httptest.NewUnstartedServer(s.Handler())
	for _, f := range tune {
		f(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	tt, _ := t.(*testing.T)
	return &env{t: tt, st: st, srv: srv, url: srv.URL}, s, path
}

// claim builds and signs a claim event: claim.open for generation 1, else
// claim.renew (expires set) or claim.release (expires zero).
func (a *agent) claim(repo, thread, claimID string, gen int64, pred string, expires time.Time, paths ...string) *correspondence.Event {
	kv := []any{"claim_id", claimID, "generation", int(gen)}
	kind := correspondence.KindClaimOpen
	var parents []string
	if gen > 1 {
		kind = correspondence.KindClaimRenew
		if expires.IsZero() {
			kind = correspondence.KindClaimRelease
		}
		kv = append(kv, "predecessor_event_id", pred)
		parents = []string{pred}
	}
	if !expires.IsZero() {
		kv = append(kv, "expires_at", correspondence.FormatTimestamp(expires))
	}
	return a.event(repo, thread, kind, obj(kv...), parents, paths...)
}

// postAll posts events concurrently (8 at a time, so appends share group
// commits) and fails the test on any status but 201.
func (e *env) postAll(a *agent, evs []*correspondence.Event) {
	e.t.Helper()
	work := make(chan *correspondence.Event)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for range 8 {
		wg.Go(func() {
			for ev := range work {
				b, _ := ev.CanonicalJSON()
				req, _ := http.NewRequest("POST", e.url+"/v1/correspondence/events", bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+a.Token)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 201 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %s", res.StatusCode, body))
					mu.Unlock()
				}
			}
		})
	}
	for _, ev := range evs {
		work <- ev
	}
	close(work)
	wg.Wait()
	if len(failures) > 0 {
		e.t.Fatalf("%d posts failed, first: %s", len(failures), failures[0])
	}
}

type claimRow struct {
	ClaimID           string          `json:"claim_id"`
	Generation        int64           `json:"generation"`
	EventID           string          `json:"event_id"`
	OwnerIdentityID   string          `json:"owner_identity_id"`
	DeviceID          string          `json:"device_id"`
	SessionID         string          `json:"session_id"`
	ThreadID          string          `json:"thread_id"`
	Scope             json.RawMessage `json:"scope"`
	ExpiresAt         string          `json:"expires_at"`
	Conflicted        bool            `json:"conflicted"`
	CompetingEventIDs []string        `json:"competing_event_ids"`
}

type claimsBody struct {
	Protocol         string     `json:"protocol"`
	Scope            string     `json:"scope"`
	EvaluatedAt      string     `json:"evaluated_at"`
	Cursor           *string    `json:"cursor"`
	ProjectionStatus string     `json:"projection_status"`
	Truncated        bool       `json:"truncated"`
	Claims           []claimRow `json:"claims"`
}

// claims reads GET /claims with the query pairs and decodes a 200.
func (e *env) claims(tok string, kv ...string) (claimsBody, resp) {
	e.t.Helper()
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	r := e.do("GET", "/v1/correspondence/claims?"+v.Encode(), tok, nil)
	mustStatus(e.t, r, 200)
	var b claimsBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		e.t.Fatalf("claims body: %v: %s", err, r.Body)
	}
	return b, r
}

func (b claimsBody) ids() []string {
	out := []string{}
	for _, c := range b.Claims {
		out = append(out, c.EventID)
	}
	slices.Sort(out)
	return out
}

// receiptOf reads the receipt of a POST answer.
func receiptOf(t *testing.T, r resp) (seq, at string) {
	t.Helper()
	rc := r.json(t)["receipt"].(map[string]any)
	return rc["received_seq"].(string), rc["received_at"].(string)
}

func TestClaimsExactBody(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)

	empty, _ := e.claims(tok, "repository_id", "repo")
	want := `{"protocol":"agent-correspondence/v0.1","scope":"project_private","evaluated_at":"1970-01-01T00:00:00.000Z","cursor":null,"projection_status":"complete","truncated":false,"claims":[]}`
	if r := e.do("GET", "/v1/correspondence/claims?repository_id=repo", tok, nil); string(r.Body) != want {
		t.Fatalf("empty stream:\n got %s\nwant %s", r.Body, want)
	}
	_ = empty

	claimID := newUUID()
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	open := a.claim("repo", "t1", claimID, 1, "", expires, "src", "docs/api")
	r := e.post(a, open)
	mustStatus(t, r, 201)
	seq, at := receiptOf(t, r)
	want = `{"protocol":"agent-correspondence/v0.1","scope":"project_private","evaluated_at":"` + at + `","cursor":"` + seq +
		`","projection_status":"complete","truncated":false,"claims":[{"claim_id":"` + claimID + `","generation":1,"event_id":"` + open.ID +
		`","owner_identity_id":"` + a.IdentityID + `","device_id":"` + a.DeviceID + `","session_id":"` + a.SessionID +
		`","thread_id":"t1","scope":{"base_revision":null,"branch":null,"paths":["src","docs/api"]},"expires_at":"` +
		correspondence.FormatTimestamp(expires) + `","conflicted":false,"competing_event_ids":[]}]}`
	got := e.do("GET", "/v1/correspondence/claims?repository_id=repo", tok, nil)
	mustStatus(t, got, 200)
	if string(got.Body) != want {
		t.Fatalf("one claim:\n got %s\nwant %s", got.Body, want)
	}
	// Another repository's read shows the project's cursor and no claims.
	other, _ := e.claims(tok, "repository_id", "other")
	if other.Cursor == nil || *other.Cursor != seq || len(other.Claims) != 0 || other.EvaluatedAt != at {
		t.Fatalf("other repository: %+v", other)
	}
	// A release ends the claim; evaluated_at follows the newest receipt.
	rel := a.claim("repo", "t1", claimID, 2, open.ID, time.Time{}, "docs/api", "src")
	r = e.post(a, rel)
	mustStatus(t, r, 201)
	seq, at = receiptOf(t, r)
	after, _ := e.claims(tok, "repository_id", "repo")
	if len(after.Claims) != 0 || *after.Cursor != seq || after.EvaluatedAt != at || after.ProjectionStatus != "complete" {
		t.Fatalf("after release: %+v", after)
	}
}

type refusal struct {
	name, query, tok string
	hdr              []string
	status           int
	code             string
}

func TestProjectionRefusals(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	noRead := e.newToken(pid, "append")
	for _, path := range []string{"/v1/correspondence/claims", "/v1/correspondence/voice"} {
		cases := []refusal{
			{"no token", "?repository_id=r", "", nil, 401, "unauthorized"},
			{"operator token", "?repository_id=r", operatorToken, nil, 403, "project_token_required"},
			{"no read scope", "?repository_id=r", noRead, nil, 403, "scope_insufficient"},
			{"no repository", "", tok, nil, 400, "repository_id_required"},
			{"bad repository", "?repository_id=a%20b", tok, nil, 400, "repository_id_invalid"},
			{"bad thread", "?repository_id=r&thread_id=", tok, nil, 400, "thread_id_invalid"},
			{"unknown parameter", "?repository_id=r&limit=5", tok, nil, 400, "query_invalid"},
			{"repeated parameter", "?repository_id=r&repository_id=s", tok, nil, 400, "query_invalid"},
			{"atom not offered", "?repository_id=r", tok, []string{"Accept", "application/atom+xml"}, 406, "representation_not_acceptable"},
			{"latin1 charset", "?repository_id=r", tok, []string{"Accept", "application/json; charset=latin1"}, 406, "representation_not_acceptable"},
		}
		if path == "/v1/correspondence/claims" {
			cases = append(cases,
				refusal{"bad path", "?repository_id=r&path=a/../b", tok, nil, 400, "path_invalid"},
				refusal{"trailing slash path", "?repository_id=r&path=src/", tok, nil, 400, "path_invalid"})
		} else {
			cases = append(cases, refusal{"path is not a voice parameter", "?repository_id=r&path=src", tok, nil, 400, "query_invalid"})
		}
		for _, tc := range cases {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				r := e.do("GET", path+tc.query, tc.tok, nil, tc.hdr...)
				mustStatus(t, r, tc.status)
				if got := r.code(t); got != tc.code {
					t.Errorf("error %q, want %q", got, tc.code)
				}
			})
		}
	}
}

// TestProjectionRepresentations checks negotiation, ETag/304, HEAD, Vary,
// Cache-Control, Link and Link-Template on claims and voice, as on /events.
func TestProjectionRepresentations(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.claim("repo", "t1", newUUID(), 1, "", time.Now().Add(time.Hour), "src")), 201)
	for _, route := range []string{"claims", "voice"} {
		path := "/v1/correspondence/" + route + "?repository_id=repo&thread_id=t1"
		t.Run(route, func(t *testing.T) {
			def := e.do("GET", path, tok, nil)
			mustStatus(t, def, 200)
			if ct := def.Header.Get("Content-Type"); ct != "application/vnd.agenttool.correspondence+json; charset=utf-8" {
				t.Errorf("default Content-Type %q", ct)
			}
			plain := e.do("GET", path, tok, nil, "Accept", "application/json; charset=utf-8")
			mustStatus(t, plain, 200)
			if ct := plain.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("application/json Content-Type %q", ct)
			}
			if !bytes.Equal(def.Body, plain.Body) {
				t.Errorf("the two JSON types differ in bytes")
			}
			etag := def.Header.Get("ETag")
			if len(etag) < 3 || etag[0] != '"' || plain.Header.Get("ETag") != etag {
				t.Errorf("ETag %q / %q", etag, plain.Header.Get("ETag"))
			}
			for _, inm := range []string{etag, "W/" + etag, `"x", ` + etag, "*"} {
				nm := e.do("GET", path, tok, nil, "If-None-Match", inm)
				if nm.Status != 304 || len(nm.Body) != 0 || nm.Header.Get("ETag") != etag || nm.Header.Get("Content-Type") != def.Header.Get("Content-Type") {
					t.Errorf("If-None-Match %s: %d %q", inm, nm.Status, nm.Body)
				}
			}
			if nm := e.do("GET", path, tok, nil, "If-None-Match", `"other"`); nm.Status != 200 {
				t.Errorf("non-matching If-None-Match: %d", nm.Status)
			}
			head := e.do("HEAD", path, tok, nil)
			if head.Status != 200 || len(head.Body) != 0 || head.Header.Get("ETag") != etag ||
				head.Header.Get("Content-Length") != fmt.Sprint(len(def.Body)) || head.Header.Get("Link") != def.Header.Get("Link") {
				t.Errorf("HEAD: %d %q %v", head.Status, head.Body, head.Header)
			}
			for _, h := range []struct{ name, want string }{
				{"Vary", "Accept, Authorization"},
				{"Cache-Control", "private, no-cache, no-transform"},
				{"Link-Template", `"http://relay.test/v1/wake/voice?identity_id={identity_id}&keys=correspondence";rel="https://agenttool.dev/rels/correspondence-live";type="text/event-stream", ` +
					`"http://relay.test/v1/log/` + pid + `/proof/inclusion{?received_seq,tree_size}";rel="https://agenttool.dev/rels/log-inclusion-proof";type="application/json"`},
			} {
				if got := def.Header.Get(h.name); got != h.want {
					t.Errorf("%s = %q, want %q", h.name, got, h.want)
				}
			}
			link := def.Header.Get("Link")
			for _, want := range []string{
				`<http://relay.test/v1/correspondence/` + route + `?repository_id=repo&thread_id=t1>; rel="self"; type="application/vnd.agenttool.correspondence+json"`,
				`<http://relay.test/v1/correspondence/events.atom?project_id=` + pid + `&repository_id=repo&thread_id=t1>; rel="alternate"; type="application/atom+xml"`,
				`<http://relay.test/v1/correspondence/voice?project_id=` + pid + `&repository_id=repo&thread_id=t1>; rel="https://agenttool.dev/rels/correspondence-voice"`,
				`<http://relay.test/v1/correspondence/claims?project_id=` + pid + `&repository_id=repo&thread_id=t1>; rel="https://agenttool.dev/rels/active-claims"`,
			} {
				if !bytes.Contains([]byte(link), []byte(want)) {
					t.Errorf("Link lacks %s\nin %s", want, link)
				}
			}
			if bytes.Contains([]byte(link), []byte("wake/voice")) {
				t.Errorf("the live template must not be a Link target: %s", link)
			}
			// Nothing changed: identical bytes, so the same ETag.
			if again := e.do("GET", path, tok, nil); !bytes.Equal(again.Body, def.Body) || again.Header.Get("ETag") != etag {
				t.Errorf("second read differs")
			}
		})
	}
}

func TestClaimsFiltersAndOverlap(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	exp := time.Now().Add(time.Hour)
	sdk := a.claim("repo", "t1", newUUID(), 1, "", exp, "packages/sdk")
	sdkSrc := a.claim("repo", "t2", newUUID(), 1, "", exp, "packages/sdk/src")
	sdkOld := a.claim("repo", "t1", newUUID(), 1, "", exp, "packages/sdk-old")
	whole := a.claim("repo", "t2", newUUID(), 1, "", exp, ".")
	docs := a.claim("repo", "t1", newUUID(), 1, "", exp, "docs", "packages/sdk/src/x")
	past := a.claim("repo", "t1", newUUID(), 1, "", time.Now().Add(-time.Hour), "packages/sdk")
	elsewhere := a.claim("other-repo", "t1", newUUID(), 1, "", exp, "packages/sdk")
	for _, ev := range []*correspondence.Event{sdk, sdkSrc, sdkOld, whole, docs, past, elsewhere} {
		mustStatus(t, e.post(a, ev), 201)
	}
	sortedIDs := func(evs ...*correspondence.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		slices.Sort(out)
		if out == nil {
			out = []string{}
		}
		return out
	}
	cases := []struct {
		name string
		kv   []string
		want []string
	}{
		{"repository", []string{"repository_id", "repo"}, sortedIDs(sdk, sdkSrc, sdkOld, whole, docs)},
		{"thread", []string{"repository_id", "repo", "thread_id", "t2"}, sortedIDs(sdkSrc, whole)},
		{"path prefix overlaps deeper and dot", []string{"repository_id", "repo", "path", "packages/sdk"}, sortedIDs(sdk, sdkSrc, whole, docs)},
		{"deeper path overlaps its prefixes", []string{"repository_id", "repo", "path", "packages/sdk/src/y"}, sortedIDs(sdk, sdkSrc, whole)},
		{"sdk-old only itself and dot", []string{"repository_id", "repo", "path", "packages/sdk-old"}, sortedIDs(sdkOld, whole)},
		{"dot path matches all", []string{"repository_id", "repo", "path", "."}, sortedIDs(sdk, sdkSrc, sdkOld, whole, docs)},
		{"path and thread", []string{"repository_id", "repo", "thread_id", "t1", "path", "packages"}, sortedIDs(sdk, sdkOld, docs)},
		{"no match but dot", []string{"repository_id", "repo", "thread_id", "t1", "path", "tools"}, sortedIDs()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := e.claims(tok, tc.kv...)
			if !slices.Equal(b.ids(), tc.want) {
				t.Errorf("claims %v, want %v", b.ids(), tc.want)
			}
			if b.Truncated || b.ProjectionStatus != "complete" {
				t.Errorf("status %s truncated %v", b.ProjectionStatus, b.Truncated)
			}
		})
	}
}

func TestClaimsConflictsAndCompetitorSentinel(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	exp := time.Now().Add(time.Hour)
	claimID := newUUID()
	open := a.claim("repo", "t", claimID, 1, "", exp, "src")
	mustStatus(t, e.post(a, open), 201)
	left := a.claim("repo", "t", claimID, 2, open.ID, exp, "src")
	right := a.claim("repo", "t", claimID, 2, open.ID, exp, "src")
	mustStatus(t, e.post(a, left), 201)
	mustStatus(t, e.post(a, right), 201)
	b, _ := e.claims(tok, "repository_id", "repo")
	if len(b.Claims) != 2 || b.Truncated {
		t.Fatalf("two competing tips: %+v", b)
	}
	for _, c := range b.Claims {
		other := left.ID
		if c.EventID == left.ID {
			other = right.ID
		}
		if !c.Conflicted || !slices.Equal(c.CompetingEventIDs, []string{other}) || c.Generation != 2 {
			t.Errorf("row %s: conflicted %v competing %v", c.EventID, c.Conflicted, c.CompetingEventIDs)
		}
	}
	// A released sibling still competes (a tip, though not active).
	rel := a.claim("repo", "t", claimID, 3, right.ID, time.Time{}, "src")
	mustStatus(t, e.post(a, rel), 201)
	b, _ = e.claims(tok, "repository_id", "repo")
	if len(b.Claims) != 1 || b.Claims[0].EventID != left.ID || !slices.Equal(b.Claims[0].CompetingEventIDs, []string{rel.ID}) {
		t.Fatalf("after releasing one branch: %+v", b.Claims)
	}
	// 18 more sibling renewals: every row has 17+ competitors, so 16 are
	// listed and the sentinel sets truncated.
	var sibs []*correspondence.Event
	for range 18 {
		sibs = append(sibs, a.claim("repo", "t", claimID, 2, open.ID, exp, "src"))
	}
	e.postAll(a, sibs)
	b, _ = e.claims(tok, "repository_id", "repo")
	if len(b.Claims) != 19 || !b.Truncated || b.ProjectionStatus != "truncated" {
		t.Fatalf("19 active siblings: %d rows, truncated %v, %s", len(b.Claims), b.Truncated, b.ProjectionStatus)
	}
	for _, c := range b.Claims {
		if len(c.CompetingEventIDs) != 16 || !c.Conflicted || !slices.IsSorted(c.CompetingEventIDs) || slices.Contains(c.CompetingEventIDs, c.EventID) {
			t.Errorf("row %s: %d competitors", c.EventID, len(c.CompetingEventIDs))
		}
	}
}

// TestClaimsCapAndSentinel: 200 live claims give the 128-row cap with
// truncated; filters apply before the 512-row sentinel, so a path filter
// over 530 live claims still finds its few rows, complete.
func TestClaimsCapAndSentinel(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	exp := time.Now().Add(time.Hour)
	var evs []*correspondence.Event
	for i := range 200 {
		evs = append(evs, a.claim("repo", "t", newUUID(), 1, "", exp.Add(time.Duration(i)*time.Second), fmt.Sprintf("area/%d", i)))
	}
	e.postAll(a, evs)
	b, _ := e.claims(tok, "repository_id", "repo")
	if len(b.Claims) != 128 || !b.Truncated || b.ProjectionStatus != "truncated" {
		t.Fatalf("200 live: %d rows, truncated %v, %s", len(b.Claims), b.Truncated, b.ProjectionStatus)
	}
	// The rows kept are the 128 soonest to expire, in that order.
	for i, c := range b.Claims {
		if want := correspondence.FormatTimestamp(exp.Add(time.Duration(i) * time.Second)); c.ExpiresAt != want {
			t.Fatalf("row %d expires %s, want %s", i, c.ExpiresAt, want)
		}
	}
	one, _ := e.claims(tok, "repository_id", "repo", "path", "area/7/sub")
	if len(one.Claims) != 1 || one.Claims[0].EventID != evs[7].ID || one.Truncated {
		t.Fatalf("path filter under the cap: %+v", one)
	}

	evs = evs[:0]
	for range 330 {
		evs = append(evs, a.claim("repo", "t", newUUID(), 1, "", exp, "bulk"))
	}
	var wanted []string
	for range 3 {
		ev := a.claim("repo", "t", newUUID(), 1, "", exp.Add(2*time.Hour), "rare/x")
		evs = append(evs, ev)
		wanted = append(wanted, ev.ID)
	}
	e.postAll(a, evs)
	slices.Sort(wanted)
	rare, _ := e.claims(tok, "repository_id", "repo", "path", "rare")
	if !slices.Equal(rare.ids(), wanted) || rare.Truncated || rare.ProjectionStatus != "complete" {
		t.Fatalf("533 live, 3 on rare/: %v truncated %v", rare.ids(), rare.Truncated)
	}
	all, _ := e.claims(tok, "repository_id", "repo")
	if len(all.Claims) != 128 || !all.Truncated {
		t.Fatalf("533 live: %d rows, truncated %v", len(all.Claims), all.Truncated)
	}
}

// TestClaimsExpiryMovesEvaluatedAt: a claim expiring a few seconds ahead
// leaves the projection on time, with no new event, and the ETag changes
// exactly then; evaluated_at becomes its expires_at.
func TestClaimsExpiryMovesEvaluatedAt(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	expires := time.Now().Add(2500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	open := a.claim("repo", "t", newUUID(), 1, "", expires, "src")
	r := e.post(a, open)
	mustStatus(t, r, 201)
	_, at := receiptOf(t, r)
	first, fr := e.claims(tok, "repository_id", "repo")
	if len(first.Claims) != 1 || first.EvaluatedAt != at {
		t.Fatalf("before expiry: %+v", first)
	}
	deadline := time.Now().Add(15 * time.Second)
	var last claimsBody
	var lr resp
	for {
		last, lr = e.claims(tok, "repository_id", "repo")
		if len(last.Claims) == 0 {
			break
		}
		if lr.Header.Get("ETag") != fr.Header.Get("ETag") || !bytes.Equal(lr.Body, fr.Body) {
			t.Fatalf("bytes changed while nothing changed:\n%s\n%s", fr.Body, lr.Body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim never expired")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last.EvaluatedAt != correspondence.FormatTimestamp(expires) {
		t.Errorf("evaluated_at %s, want the expiry %s", last.EvaluatedAt, correspondence.FormatTimestamp(expires))
	}
	if lr.Header.Get("ETag") == fr.Header.Get("ETag") {
		t.Error("ETag unchanged across the expiry")
	}
	if again := e.do("GET", "/v1/correspondence/claims?repository_id=repo", tok, nil); !bytes.Equal(again.Body, lr.Body) {
		t.Error("bytes unstable after the expiry")
	}
	if *last.Cursor != *first.Cursor {
		t.Error("cursor moved without an event")
	}
}

// TestClaimsLineageVectorsOverHTTP replays the five lineage vectors as real
// signed events in their arrival orders: after each arrival the claims
// read shows the active tips the vector states and the pure core computes,
// and the vector's every expectation holds.
func TestClaimsLineageVectorsOverHTTP(t *testing.T) {
	raw, err := os.ReadFile(shareddir.Path(t, "spec", "agent-correspondence-0.1-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	vectors, err := correspondence.LoadLineageVectors(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(vectors) != 5 {
		t.Fatalf("%d vectors, want 5", len(vectors))
	}
	e := newEnv(t)
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			pid, tok := e.newProject("")
			a := e.newAgent(pid, tok)
			repo, claimID := "repo", newUUID()
			now := time.Now()
			bySym := map[string]*correspondence.Event{}
			symOf := map[string]string{}
			for _, n := range v.Nodes {
				pred := ""
				if n.Predecessor != nil {
					pred = bySym[*n.Predecessor].ID
				}
				ev := a.claim(repo, "t", claimID, n.Generation, pred, n.ExpiresAt(now), n.Paths...)
				if ev.Kind != n.Kind {
					t.Fatalf("%s: built %s, vector says %s", n.Symbol, ev.Kind, n.Kind)
				}
				bySym[n.Symbol], symOf[ev.ID] = ev, n.Symbol
			}
			core := v.Replay(now)
			var obs []correspondence.LineageObservation
			var nodes []correspondence.LineageNode
			for i, sym := range v.Arrival {
				mustStatus(t, e.post(a, bySym[sym]), 201)
				n, _ := correspondence.NodeOf(bySym[sym])
				nodes = append(nodes, n)
				oracle := correspondence.ObserveLineage(correspondence.ProjectLineage(nodes, time.Now()), symOf)

				b, _ := e.claims(tok, "repository_id", repo)
				o := correspondence.LineageObservation{Status: map[string]correspondence.LineageStatus{}, Active: []string{}, Tips: []string{}, Conflicted: []string{}}
				for _, c := range b.Claims {
					o.Active = append(o.Active, symOf[c.EventID])
					if c.Conflicted != slices.Contains(oracle.Conflicted, symOf[c.EventID]) {
						t.Errorf("arrival %d: %s conflicted %v, core %v", i+1, symOf[c.EventID], c.Conflicted, oracle.Conflicted)
					}
				}
				slices.Sort(o.Active)
				ev := e.do("GET", "/v1/correspondence/events?repository_id="+repo, tok, nil)
				var page struct {
					Events []struct {
						Event struct {
							EventID string `json:"event_id"`
						} `json:"event"`
						LineageStatus correspondence.LineageStatus `json:"lineage_status"`
					} `json:"events"`
				}
				if err := json.Unmarshal(ev.Body, &page); err != nil {
					t.Fatal(err)
				}
				for _, rec := range page.Events {
					o.Status[symOf[rec.Event.EventID]] = rec.LineageStatus
				}
				tips, err := e.st.ClaimTips(context.Background(), pid, repo)
				if err != nil {
					t.Fatal(err)
				}
				for _, tip := range tips {
					o.Tips = append(o.Tips, symOf[tip.EventID])
				}
				slices.Sort(o.Tips)
				if len(o.Tips) > 1 {
					o.Conflicted = slices.Clone(o.Tips)
				}
				if !slices.Equal(o.Active, oracle.Active) || !slices.Equal(o.Active, core[i].Active) {
					t.Errorf("arrival %d (%s): active %v, core over real events %v, core over the vector %v", i+1, sym, o.Active, oracle.Active, core[i].Active)
				}
				for s, st := range oracle.Status {
					if o.Status[s] != st {
						t.Errorf("arrival %d: %s is %s over HTTP, %s in the core", i+1, s, o.Status[s], st)
					}
				}
				if b.ProjectionStatus != "complete" || b.Truncated {
					t.Errorf("arrival %d: %s", i+1, b.ProjectionStatus)
				}
				obs = append(obs, o)
			}
			for _, msg := range v.Check(obs) {
				t.Error(msg)
			}
		})
	}
}

// TestClaimsPendingChainConverges: renewals queued before their claim.open
// leave the ready frontier for later operations (32 rows each). With 40
// queued, the open's append leaves the persisted incomplete flag set and
// the first read finishes the work. With 100 queued, reads show
// "truncated" until repeated reads converge on the one tip.
func TestClaimsPendingChainConverges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		chain     int
		truncated int // reads answering truncated before the complete one
	}{
		{"40 queued", 40, 0},
		{"100 queued", 100, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pid, tok := e.newProject("")
			a := e.newAgent(pid, tok)
			claimID, exp := newUUID(), time.Now().Add(time.Hour)
			chain := []*correspondence.Event{a.claim("repo", "t", claimID, 1, "", exp, "src")}
			for g := 2; g <= tc.chain+1; g++ {
				chain = append(chain, a.claim("repo", "t", claimID, int64(g), chain[len(chain)-1].ID, exp, "src"))
			}
			for i := len(chain) - 1; i >= 1; i-- {
				r := e.post(a, chain[i])
				mustStatus(t, r, 201)
				if s := r.json(t)["lineage_status"]; s != "pending" {
					t.Fatalf("generation %d: %v", i+1, s)
				}
			}
			b, _ := e.claims(tok, "repository_id", "repo")
			if len(b.Claims) != 0 || b.ProjectionStatus != "complete" {
				t.Fatalf("all pending: %+v", b)
			}
			mustStatus(t, e.post(a, chain[0]), 201)
			if incomplete, _, err := e.st.LineageWatermark(context.Background(), pid); err != nil || !incomplete {
				t.Fatalf("after the open's append: incomplete %v, err %v", incomplete, err)
			}
			var etags []string
			for i := 0; ; i++ {
				b, r := e.claims(tok, "repository_id", "repo")
				etags = append(etags, r.Header.Get("ETag"))
				if i < tc.truncated {
					if b.ProjectionStatus != "truncated" || !b.Truncated {
						t.Fatalf("read %d: %s, want truncated", i+1, b.ProjectionStatus)
					}
					continue
				}
				if b.ProjectionStatus != "complete" || b.Truncated || len(b.Claims) != 1 || b.Claims[0].EventID != chain[tc.chain].ID ||
					b.Claims[0].Generation != int64(tc.chain+1) {
					t.Fatalf("read %d: %s, %d rows", i+1, b.ProjectionStatus, len(b.Claims))
				}
				break
			}
			// Converged: a further read is byte-identical.
			_, r := e.claims(tok, "repository_id", "repo")
			if r.Header.Get("ETag") != etags[len(etags)-1] {
				t.Error("ETag moved after convergence")
			}
			if len(slices.Compact(slices.Clone(etags))) != len(etags) {
				t.Errorf("each converging read changed lineage, so each ETag should differ: %v", etags)
			}
		})
	}
}

// TestClaimsTotalFailureIs503: when the projection cannot be read, the
// answer is 503 correspondence_projection_unavailable, never an empty 200.
// The fault is real: the tips table is dropped under the running relay.
func TestClaimsTotalFailureIs503(t *testing.T) {
	e, _, path := newEnvWith(t, relay.Config{})
	if path == "" {
		t.Skip("fault injection edits the SQLite file; not run on PostgreSQL")
	}
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.claim("repo", "t", newUUID(), 1, "", time.Now().Add(time.Hour), "src")), 201)
	mustStatus(t, e.post(a, a.intent("repo", "hello")), 201)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TABLE claim_tips`); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/v1/correspondence/claims?repository_id=repo", tok, nil)
	mustStatus(t, r, 503)
	if r.code(t) != "correspondence_projection_unavailable" || r.Header.Get("Retry-After") == "" {
		t.Errorf("claims: %s %v", r.Body, r.Header)
	}
	// Voice keeps its other parts and says the claims part is missing.
	r = e.do("GET", "/v1/correspondence/voice?repository_id=repo", tok, nil)
	mustStatus(t, r, 200)
	var v voiceBody
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatal(err)
	}
	if v.ProjectionStatus != "unavailable" || !v.Truncated || len(v.RecentEvents) != 2 || len(v.ActiveClaims) != 0 {
		t.Errorf("voice with a failed part: %s truncated %v, %d recent, %d claims", v.ProjectionStatus, v.Truncated, len(v.RecentEvents), len(v.ActiveClaims))
	}
}
