package relay_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/handoff"
)

// contractDoc returns handoff/testdata/valid.json with the given id, key,
// createdAt and maxAttempts, as a generic map for edits.
func contractDoc(t *testing.T, id, key string, createdAt time.Time, maxAttempts int) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../handoff/testdata/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["handoffId"], m["idempotencyKey"] = id, "idem-key-"+key // the schema wants ≥ 8 characters
	m["createdAt"] = createdAt.UTC().Format(time.RFC3339)
	m["budget"] = map[string]any{"wallClockSeconds": 3600, "maxAttempts": maxAttempts}
	return m
}

func contractJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonicalContract is what the relay stores and serves for doc: the
// normalized contract's RFC 8785 bytes.
func canonicalContract(t *testing.T, doc []byte) []byte {
	t.Helper()
	c, issues, err := handoff.Validate(doc)
	if err != nil || len(issues) > 0 {
		t.Fatalf("test contract invalid: %v %v", issues, err)
	}
	b, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// transition posts a move under ifMatch ("" sends none).
func (e *env) transition(tok, id, ifMatch, body string) resp {
	e.t.Helper()
	return e.do("POST", "/v1/handoffs/"+id+"/transitions", tok, []byte(body), "If-Match", ifMatch)
}

func wantError(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.Status != status || r.code(t) != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func stateOf(t *testing.T, r resp) (string, float64, int) {
	t.Helper()
	m := r.json(t)
	c := m["contract"].(map[string]any)
	return c["state"].(string), c["attempt"].(float64), int(m["version"].(float64))
}

func TestHandoffLifecycle(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	id := newUUID()
	doc := contractJSON(t, contractDoc(t, id, "renew-1", time.Now(), 3))
	stored := canonicalContract(t, doc)

	// Create: 201, Location, exact body, ETag over those bytes.
	r := e.do("PUT", "/v1/handoffs/"+id, tok, doc)
	mustStatus(t, r, 201)
	want := `{"contract":` + string(stored) + `,"version":1,"overdue":false,"events":[]}`
	if string(r.Body) != want {
		t.Fatalf("create body\n got %s\nwant %s", r.Body, want)
	}
	if r.Header.Get("Location") != "http://relay.test/v1/handoffs/"+id || r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("headers %v", r.Header)
	}
	etag1 := r.Header.Get("ETag")

	// Replay of identical content (reformatted, attempt omitted): 200, the same.
	m := contractDoc(t, id, "renew-1", time.Time{}, 3)
	m["createdAt"] = r.json(t)["contract"].(map[string]any)["createdAt"]
	delete(m, "attempt")
	replay, _ := json.MarshalIndent(m, "", "  ")
	r = e.do("PUT", "/v1/handoffs/"+id, tok, replay)
	mustStatus(t, r, 200)
	if string(r.Body) != want || r.Header.Get("ETag") != etag1 {
		t.Fatalf("replay %s %s", r.Body, r.Header.Get("ETag"))
	}

	// GET: same bytes and ETag; 304 on If-None-Match.
	r = e.do("GET", "/v1/handoffs/"+id, tok, nil)
	mustStatus(t, r, 200)
	if string(r.Body) != want || r.Header.Get("ETag") != etag1 {
		t.Fatalf("get %s", r.Body)
	}
	mustStatus(t, e.do("GET", "/v1/handoffs/"+id, tok, nil, "If-None-Match", etag1), 304)

	// Preconditions.
	wantError(t, e.transition(tok, id, "", `{"to":"accepted"}`), 428, "precondition_required")
	wantError(t, e.transition(tok, id, `"nope"`, `{"to":"accepted"}`), 412, "precondition_failed")
	wantError(t, e.transition(tok, id, "W/"+etag1, `{"to":"accepted"}`), 412, "precondition_failed")

	// proposed → accepted → running → verifying.
	etag := etag1
	for i, step := range []struct {
		to      string
		attempt float64
	}{{"accepted", 0}, {"running", 1}, {"verifying", 1}} {
		r = e.transition(tok, id, etag, `{"to":"`+step.to+`"}`)
		mustStatus(t, r, 200)
		if st, att, v := stateOf(t, r); st != step.to || att != step.attempt || v != i+2 {
			t.Fatalf("after %s: %s attempt %v version %d", step.to, st, att, v)
		}
		if r.Header.Get("ETag") != etagOfBody(r.Body) {
			t.Fatal("transition ETag is not over its body")
		}
		etag = r.Header.Get("ETag")
	}
	wantError(t, e.transition(tok, id, etag1, `{"to":"succeeded"}`), 412, "precondition_failed")

	// succeeded needs a result, with evidence (AC-1 requires it), valid by the schema.
	wantError(t, e.transition(tok, id, etag, `{"to":"succeeded"}`), 409, "result_required")
	wantError(t, e.transition(tok, id, etag, `{"to":"succeeded","result":{"summary":"renewed"}}`), 409, "evidence_required")
	r = e.transition(tok, id, etag, `{"to":"succeeded","result":{"summary":"renewed","evidenceUris":"https://x"}}`)
	wantError(t, r, 422, "contract_invalid")
	if issues := r.json(t)["issues"].([]any); len(issues) != 1 || issues[0].(map[string]any)["pointer"] != "/result/evidenceUris" {
		t.Fatalf("issues %s", r.Body)
	}
	result := `{"summary":"renewed at 1180.00 USD","evidenceUris":["https://example.org/receipts/1"]}`
	r = e.transition(tok, id, etag, `{"to":"succeeded","result":`+result+`}`)
	mustStatus(t, r, 200)
	if st, _, v := stateOf(t, r); st != "succeeded" || v != 5 {
		t.Fatalf("succeeded: %s", r.Body)
	}
	if got := r.json(t)["contract"].(map[string]any)["result"].(map[string]any)["evidenceUris"]; fmt.Sprint(got) != "[https://example.org/receipts/1]" {
		t.Fatalf("result %v", got)
	}
	etag = r.Header.Get("ETag")

	// Terminal: no move leaves succeeded; the message names the state.
	r = e.transition(tok, id, etag, `{"to":"running"}`)
	wantError(t, r, 409, "transition_not_allowed")
	if !strings.Contains(r.json(t)["message"].(string), "succeeded") {
		t.Fatalf("message does not name the state: %s", r.Body)
	}
	wantError(t, e.transition(tok, id, etag, `{"to":"done"}`), 400, "state_invalid") // not a state at all: an input error

	// A PUT of the original content still replays (version 1 compared), now answering version 5.
	r = e.do("PUT", "/v1/handoffs/"+id, tok, doc)
	mustStatus(t, r, 200)
	if _, _, v := stateOf(t, r); v != 5 {
		t.Fatalf("replay after moves answers version %d", v)
	}

	// The history: five versions, the first untouched, paged.
	var states []string
	after := ""
	for page := 0; ; page++ {
		path := "/v1/handoffs/" + id + "/versions?limit=2"
		if after != "" {
			path += "&after=" + after
		}
		r = e.do("GET", path, tok, nil)
		mustStatus(t, r, 200)
		var out struct {
			HandoffID string `json:"handoff_id"`
			Versions  []struct {
				Version   int             `json:"version"`
				CreatedAt string          `json:"created_at"`
				Contract  json.RawMessage `json:"contract"`
			} `json:"versions"`
			Page struct {
				NextAfter *string `json:"next_after"`
				HasMore   bool    `json:"has_more"`
			} `json:"page"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil || out.HandoffID != id {
			t.Fatalf("versions %s", r.Body)
		}
		for _, v := range out.Versions {
			if v.Version != len(states)+1 {
				t.Fatalf("version %d at %d", v.Version, len(states))
			}
			if v.Version == 1 && !bytes.Equal(v.Contract, stored) {
				t.Fatalf("version 1 %s", v.Contract)
			}
			if _, err := time.Parse(time.RFC3339, v.CreatedAt); err != nil {
				t.Fatalf("created_at %q", v.CreatedAt)
			}
			var c handoff.Contract
			json.Unmarshal(v.Contract, &c)
			states = append(states, string(c.State))
		}
		if !out.Page.HasMore {
			break
		}
		after = *out.Page.NextAfter
	}
	if want := []string{"proposed", "accepted", "running", "verifying", "succeeded"}; !slices.Equal(states, want) {
		t.Fatalf("versions %v, want %v", states, want)
	}
}

// etagOfBody is the relay's strong ETag: the first 24 bytes of SHA-256
// over the body, unpadded base64url, quoted.
func etagOfBody(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:24]) + `"`
}

func TestHandoffRetries(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	id := newUUID()
	mustStatus(t, e.do("PUT", "/v1/handoffs/"+id, tok, contractJSON(t, contractDoc(t, id, "k", time.Now(), 2))), 201)
	etag := e.do("GET", "/v1/handoffs/"+id, tok, nil).Header.Get("ETag")
	move := func(to string, wantAttempt float64) {
		t.Helper()
		r := e.transition(tok, id, etag, `{"to":"`+to+`"}`)
		mustStatus(t, r, 200)
		if st, att, _ := stateOf(t, r); st != to || att != wantAttempt {
			t.Fatalf("%s: state %s attempt %v, want attempt %v", to, st, att, wantAttempt)
		}
		etag = r.Header.Get("ETag")
	}
	move("accepted", 0)
	move("running", 1)
	move("blocked", 1)
	move("running", 1) // unblocking is not a retry
	move("failed", 1)
	move("running", 2) // retry
	move("failed", 2)
	// attempt = maxAttempts: failed is terminal; no retry, no cancel.
	wantError(t, e.transition(tok, id, etag, `{"to":"running"}`), 409, "transition_not_allowed")
	wantError(t, e.transition(tok, id, etag, `{"to":"cancelled"}`), 409, "transition_not_allowed")

	// cancelled from a non-terminal state.
	id2 := newUUID()
	r := e.do("PUT", "/v1/handoffs/"+id2, tok, contractJSON(t, contractDoc(t, id2, "k2", time.Now(), 2)))
	mustStatus(t, r, 201)
	r = e.transition(tok, id2, r.Header.Get("ETag"), `{"to":"cancelled"}`)
	mustStatus(t, r, 200)
	wantError(t, e.transition(tok, id2, r.Header.Get("ETag"), `{"to":"accepted"}`), 409, "transition_not_allowed")
}

func TestHandoffPutRefusals(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	id := newUUID()
	valid := contractDoc(t, id, "key-a", time.Now(), 3)
	mustStatus(t, e.do("PUT", "/v1/handoffs/"+id, tok, contractJSON(t, valid)), 201)
	edit := func(f func(m map[string]any)) []byte {
		m := contractDoc(t, id, "key-a", time.Now(), 3)
		m["createdAt"] = valid["createdAt"]
		f(m)
		return contractJSON(t, m)
	}
	other := newUUID()
	tests := []struct {
		name, path string
		body       []byte
		hdr        []string
		status     int
		code       string
		pointers   []string
	}{
		{name: "uppercase id", path: strings.ToUpper(id), body: contractJSON(t, valid), status: 400, code: "handoff_id_invalid"},
		{name: "not a uuid", path: "renew", body: contractJSON(t, valid), status: 400, code: "handoff_id_invalid"},
		{name: "id mismatch", path: other, body: edit(func(m map[string]any) { m["idempotencyKey"] = "idem-key-key-b" }), status: 400, code: "handoff_id_mismatch"},
		{name: "duplicate member", path: id, body: []byte(`{"state":"proposed","state":"proposed"}`), status: 400, code: "duplicate_object_name"},
		{name: "fraction", path: id, body: edit(func(m map[string]any) { m["attempt"] = 0.5 }), status: 400, code: "fractional_number"},
		{name: "schema", path: other, body: edit(func(m map[string]any) {
			m["handoffId"], m["budget"] = other, map[string]any{"wallClockSeconds": 0, "maxAttempts": 21}
			delete(m, "objective")
		}), status: 422, code: "contract_invalid", pointers: []string{"", "/budget/maxAttempts", "/budget/wallClockSeconds"}},
		{name: "created running", path: other, body: edit(func(m map[string]any) { m["handoffId"], m["state"], m["attempt"] = other, "running", 1 }),
			status: 422, code: "contract_invalid", pointers: []string{"/attempt", "/state"}},
		{name: "created with a result", path: other, body: edit(func(m map[string]any) { m["handoffId"], m["result"] = other, map[string]any{"summary": "x"} }),
			status: 422, code: "contract_invalid", pointers: []string{"/result"}},
		{name: "key reused, same id", path: id, body: edit(func(m map[string]any) { m["objective"] = "something else" }), status: 409, code: "idempotency_key_reused"},
		{name: "key reused, other id", path: other, body: edit(func(m map[string]any) { m["handoffId"] = other }), status: 409, code: "idempotency_key_reused"},
		{name: "id exists", path: id, body: edit(func(m map[string]any) { m["idempotencyKey"] = "idem-key-key-b" }), status: 409, code: "handoff_exists"},
		{name: "content type", path: id, body: contractJSON(t, valid), hdr: []string{"Content-Type", "text/plain"}, status: 415, code: "content_type_unsupported"},
		{name: "too large", path: id, body: bytes.Repeat([]byte(" "), 262145), status: 413, code: "body_too_large"},
		{name: "not acceptable", path: id, body: contractJSON(t, valid), hdr: []string{"Accept", "application/atom+xml"}, status: 406, code: "representation_not_acceptable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("PUT", "/v1/handoffs/"+tc.path, tok, tc.body, tc.hdr...)
			wantError(t, r, tc.status, tc.code)
			if tc.pointers != nil {
				var got []string
				for _, i := range r.json(t)["issues"].([]any) {
					got = append(got, i.(map[string]any)["pointer"].(string))
				}
				slices.Sort(got)
				if !slices.Equal(slices.Compact(got), tc.pointers) {
					t.Fatalf("pointers %v, want %v: %s", got, tc.pointers, r.Body)
				}
			}
		})
	}
	// None of the refusals stored anything.
	r := e.do("GET", "/v1/handoffs", tok, nil)
	mustStatus(t, r, 200)
	if n := len(r.json(t)["handoffs"].([]any)); n != 1 {
		t.Fatalf("%d contracts after refusals, want 1", n)
	}
	mustStatus(t, e.do("GET", "/v1/handoffs/"+other, tok, nil), 404)
}

func TestHandoffTransitionRefusals(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	id := newUUID()
	r := e.do("PUT", "/v1/handoffs/"+id, tok, contractJSON(t, contractDoc(t, id, "k", time.Now(), 3)))
	mustStatus(t, r, 201)
	etag := r.Header.Get("ETag")
	for _, tc := range []struct {
		name, id, body string
		status         int
		code           string
	}{
		{"to not a string", id, `{"to":1}`, 400, "transition_invalid"},
		{"no to", id, `{"result":{}}`, 400, "transition_invalid"},
		{"unknown member", id, `{"to":"accepted","why":"x"}`, 400, "transition_invalid"},
		{"result not an object", id, `{"to":"accepted","result":[]}`, 400, "transition_invalid"},
		{"duplicate member", id, `{"to":"accepted","to":"running"}`, 400, "duplicate_object_name"},
		{"not allowed", id, `{"to":"running"}`, 409, "transition_not_allowed"},
		{"unknown result member", id, `{"to":"accepted","result":{"note":"x"}}`, 422, "contract_invalid"},
		{"unknown contract", newUUID(), `{"to":"accepted"}`, 404, "not_found"},
		{"bad id", "x", `{"to":"accepted"}`, 400, "handoff_id_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.transition(tok, tc.id, etag, tc.body), tc.status, tc.code)
		})
	}
	// Nothing moved.
	r = e.do("GET", "/v1/handoffs/"+id, tok, nil)
	if r.Header.Get("ETag") != etag {
		t.Fatalf("refused transitions changed the contract: %s", r.Body)
	}
	// A result given on an ordinary move is kept; {} is an empty result,
	// and If-Match: * matches any current version.
	r = e.transition(tok, id, "*", `{"to":"accepted","result":{}}`)
	mustStatus(t, r, 200)
	if !strings.Contains(string(r.Body), `"result":{},"scope":`) {
		t.Fatalf("empty result not kept: %s", r.Body)
	}
}

// TestHandoffConcurrentTransitions: of writers holding the same ETag,
// exactly one moves the contract; the others get 412.
func TestHandoffConcurrentTransitions(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	id := newUUID()
	r := e.do("PUT", "/v1/handoffs/"+id, tok, contractJSON(t, contractDoc(t, id, "k", time.Now(), 3)))
	mustStatus(t, r, 201)
	etag := r.Header.Get("ETag")
	const writers = 8
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := []string{"accepted", "cancelled"}[i%2]
			statuses[i] = e.transition(tok, id, etag, `{"to":"`+to+`"}`).Status
		}()
	}
	wg.Wait()
	slices.Sort(statuses)
	if want := append([]int{200}, slices.Repeat([]int{412}, writers-1)...); !slices.Equal(statuses, want) {
		t.Fatalf("statuses %v, want %v", statuses, want)
	}
	if _, _, v := stateOf(t, e.do("GET", "/v1/handoffs/"+id, tok, nil)); v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
}

// TestHandoffEvents: GET lists the handoff events naming the contract;
// such an event changes the ETag; unknown ids never block an event.
func TestHandoffEvents(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	id := newUUID()
	handoffEvent := func(handoffID string) *correspondence.Event {
		return a.event("repo", "t", correspondence.KindHandoff, obj("summary", "renewal handed to billing", "next_safe_action", "confirm with vendor", "handoff_id", handoffID), nil)
	}
	early := handoffEvent(id) // before the contract exists
	mustStatus(t, e.post(a, early), 201)
	mustStatus(t, e.post(a, handoffEvent(newUUID())), 201)

	r := e.do("PUT", "/v1/handoffs/"+id, tok, contractJSON(t, contractDoc(t, id, "k", time.Now(), 3)))
	mustStatus(t, r, 201)
	if got := r.json(t)["events"]; fmt.Sprint(got) != "["+early.ID+"]" {
		t.Fatalf("events %v, want [%s]", got, early.ID)
	}
	etag := r.Header.Get("ETag")
	late := handoffEvent(id)
	mustStatus(t, e.post(a, late), 201)
	r = e.do("GET", "/v1/handoffs/"+id, tok, nil)
	if got := r.json(t)["events"]; fmt.Sprint(got) != "["+early.ID+" "+late.ID+"]" {
		t.Fatalf("events %v", got)
	}
	if r.Header.Get("ETag") == etag {
		t.Fatal("a new handoff event did not change the ETag")
	}
	wantError(t, e.transition(tok, id, etag, `{"to":"accepted"}`), 412, "precondition_failed")
	mustStatus(t, e.transition(tok, id, r.Header.Get("ETag"), `{"to":"accepted"}`), 200)

	// overdue: createdAt two hours ago with a one-hour budget.
	old := newUUID()
	r = e.do("PUT", "/v1/handoffs/"+old, tok, contractJSON(t, contractDoc(t, old, "old", time.Now().Add(-2*time.Hour), 3)))
	mustStatus(t, r, 201)
	if r.json(t)["overdue"] != true {
		t.Fatalf("not overdue: %s", r.Body)
	}
}

func TestHandoffList(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	var ids []string
	for i := range 5 {
		id := newUUID()
		ids = append(ids, id)
		m := contractDoc(t, id, fmt.Sprintf("k%d", i), time.Now(), 3)
		m["assignee"] = map[string]any{"id": []string{"agent-a", "agent-b"}[i%2], "role": "executor"}
		r := e.do("PUT", "/v1/handoffs/"+id, tok, contractJSON(t, m))
		mustStatus(t, r, 201)
		if i == 1 || i == 4 {
			mustStatus(t, e.transition(tok, id, r.Header.Get("ETag"), `{"to":"accepted"}`), 200)
		}
		time.Sleep(3 * time.Millisecond) // distinct creation times: newest first is creation order
	}
	list := func(query string) ([]string, resp) {
		t.Helper()
		var got []string
		path := "/v1/handoffs?" + query
		for {
			r := e.do("GET", path, tok, nil)
			mustStatus(t, r, 200)
			var out struct {
				Handoffs []struct {
					Contract handoff.Contract `json:"contract"`
					Version  int              `json:"version"`
				} `json:"handoffs"`
				Page struct {
					NextAfter *string `json:"next_after"`
					HasMore   bool    `json:"has_more"`
				} `json:"page"`
			}
			if err := json.Unmarshal(r.Body, &out); err != nil {
				t.Fatal(err)
			}
			for _, h := range out.Handoffs {
				got = append(got, fmt.Sprintf("%s:%s:%d", h.Contract.HandoffID, h.Contract.State, h.Version))
			}
			if !out.Page.HasMore {
				return got, r
			}
			if !strings.Contains(r.Header.Get("Link"), `after=`+*out.Page.NextAfter) {
				t.Fatalf("next link %q", r.Header.Get("Link"))
			}
			path = "/v1/handoffs?" + query + "&after=" + *out.Page.NextAfter
		}
	}
	row := func(i int) string {
		if i == 1 || i == 4 {
			return ids[i] + ":accepted:2"
		}
		return ids[i] + ":proposed:1"
	}
	for _, tc := range []struct {
		query string
		want  []int
	}{
		{"limit=200", []int{4, 3, 2, 1, 0}},
		{"limit=2", []int{4, 3, 2, 1, 0}},
		{"state=accepted&limit=1", []int{4, 1}},
		{"state=proposed", []int{3, 2, 0}},
		{"assignee=agent-b&limit=1", []int{3, 1}},
		{"assignee=agent-a&state=accepted", []int{4}},
		{"state=running", nil},
	} {
		got, _ := list(tc.query)
		var want []string
		for _, i := range tc.want {
			want = append(want, row(i))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tc.query, got, want)
		}
	}
	for _, tc := range []struct{ query, code string }{
		{"status=accepted", "query_invalid"},
		{"state=done", "state_invalid"},
		{"state=accepted&state=running", "query_invalid"},
		{"assignee=", "assignee_invalid"},
		{"after=x", "after_invalid"},
		{"after=" + newUUID(), "after_invalid"},
		{"limit=0", "limit_invalid"},
		{"limit=201", "limit_invalid"},
	} {
		wantError(t, e.do("GET", "/v1/handoffs?"+tc.query, tok, nil), 400, tc.code)
	}
	wantError(t, e.do("GET", "/v1/handoffs/"+ids[0]+"?x=1", tok, nil), 400, "query_invalid")
	wantError(t, e.do("GET", "/v1/handoffs/"+ids[0]+"/versions?after=01", tok, nil), 400, "after_invalid")
	wantError(t, e.do("GET", "/v1/handoffs/"+newUUID()+"/versions", tok, nil), 404, "not_found")
}

// TestHandoffIsolationAndScopes: contract ids are per project; another
// project's token sees 404; read scope reads, append scope writes.
func TestHandoffIsolationAndScopes(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.newProject("")
	_, otherTok := e.newProject("")
	readTok, appendTok := e.newToken(pid, "read"), e.newToken(pid, "append")
	id := newUUID()
	doc := contractJSON(t, contractDoc(t, id, "k", time.Now(), 3))
	r := e.do("PUT", "/v1/handoffs/"+id, appendTok, doc)
	mustStatus(t, r, 201)
	etag := r.Header.Get("ETag")

	for _, tc := range []struct {
		name, method, path, tok string
		body                    []byte
		status                  int
		code                    string
	}{
		{"other project get", "GET", "/v1/handoffs/" + id, otherTok, nil, 404, "not_found"},
		{"other project versions", "GET", "/v1/handoffs/" + id + "/versions", otherTok, nil, 404, "not_found"},
		{"other project transition", "POST", "/v1/handoffs/" + id + "/transitions", otherTok, []byte(`{"to":"accepted"}`), 404, "not_found"},
		{"other project cursor", "GET", "/v1/handoffs?after=" + id, otherTok, nil, 400, "after_invalid"},
		{"read token puts", "PUT", "/v1/handoffs/" + id, readTok, doc, 403, "scope_insufficient"},
		{"read token moves", "POST", "/v1/handoffs/" + id + "/transitions", readTok, []byte(`{"to":"accepted"}`), 403, "scope_insufficient"},
		{"append token gets", "GET", "/v1/handoffs/" + id, appendTok, nil, 403, "scope_insufficient"},
		{"append token lists", "GET", "/v1/handoffs", appendTok, nil, 403, "scope_insufficient"},
		{"append token versions", "GET", "/v1/handoffs/" + id + "/versions", appendTok, nil, 403, "scope_insufficient"},
		{"operator", "GET", "/v1/handoffs/" + id, operatorToken, nil, 403, "project_token_required"},
		{"no token", "GET", "/v1/handoffs/" + id, "", nil, 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.do(tc.method, tc.path, tc.tok, tc.body, "If-Match", etag), tc.status, tc.code)
		})
	}
	r = e.do("GET", "/v1/handoffs", otherTok, nil)
	mustStatus(t, r, 200)
	if string(r.Body) != `{"handoffs":[],"page":{"after":null,"next_after":null,"has_more":false}}` {
		t.Fatalf("other project's list %s", r.Body)
	}
	mustStatus(t, e.do("GET", "/v1/handoffs/"+id, readTok, nil), 200)
	// The same id and key in the other project is another contract.
	r = e.do("PUT", "/v1/handoffs/"+id, otherTok, doc)
	mustStatus(t, r, 201)
	mustStatus(t, e.transition(otherTok, id, r.Header.Get("ETag"), `{"to":"cancelled"}`), 200)
	if st, _, _ := stateOf(t, e.do("GET", "/v1/handoffs/"+id, readTok, nil)); st != "proposed" {
		t.Fatalf("the other project's move changed this one: %s", st)
	}
}

// TestHandoffPutIfNoneMatch: If-None-Match: * makes a PUT create-only
// (RFC 9110 §13.1.2): 201 when the contract is new, 412 precondition_failed
// for what would be a replay, and the stored contract is unchanged; the
// current ETag behaves like *, another ETag does not.
func TestHandoffPutIfNoneMatch(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	id := newUUID()
	doc := contractJSON(t, contractDoc(t, id, "k", time.Now(), 2))
	created := e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-None-Match", "*")
	mustStatus(t, created, 201)
	wantError(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-None-Match", "*"), 412, "precondition_failed")
	etag := created.Header.Get("ETag")
	wantError(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-None-Match", `"other", `+etag), 412, "precondition_failed")
	mustStatus(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-None-Match", `"other"`), 200)
	mustStatus(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc), 200)
	got := e.do("GET", "/v1/handoffs/"+id, tok, nil)
	mustStatus(t, got, 200)
	if got.Header.Get("ETag") != etag {
		t.Fatalf("ETag after the refused PUTs %s, want %s", got.Header.Get("ETag"), etag)
	}
}

// TestHandoffPutIfMatch: If-Match on a PUT (RFC 9110 §13.1.1) replays only
// a contract whose current ETag it names (or *), and never creates one.
func TestHandoffPutIfMatch(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	id := newUUID()
	doc := contractJSON(t, contractDoc(t, id, "k", time.Now(), 2))
	for _, im := range []string{"*", `"any"`} {
		wantError(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-Match", im), 412, "precondition_failed")
	}
	wantError(t, e.do("GET", "/v1/handoffs/"+id, tok, nil), 404, "not_found")
	created := e.do("PUT", "/v1/handoffs/"+id, tok, doc)
	mustStatus(t, created, 201)
	etag := created.Header.Get("ETag")
	mustStatus(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-Match", etag), 200)
	mustStatus(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-Match", "*"), 200)
	wantError(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-Match", `"stale"`), 412, "precondition_failed")
	wantError(t, e.do("PUT", "/v1/handoffs/"+id, tok, doc, "If-Match", "W/"+etag), 412, "precondition_failed")
}
