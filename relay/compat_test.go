package relay_test

import (
	"bytes"
	"database/sql"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/relay"
)

// nest returns n levels of open around a null and n levels of close.
func nest(n int, open, close string) string {
	return strings.Repeat(open, n) + "null" + strings.Repeat(close, n)
}

// TestJSONDepthOnEveryBody: every JSON body the relay parses nests at most
// 64 deep (spec §2); one level more is 400 json_depth_exceeded, before any
// other check. At 64 the body gets whatever refusal its content earns.
func TestJSONDepthOnEveryBody(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	hid := newUUID()
	routes := []struct {
		name, method, path, tok string
		hdr                     []string
		// status and code of the 64-deep object body
		status int
		code   string
	}{
		{"event", "POST", "/v1/correspondence/events", tok, nil, 400, "event_invalid"},
		{"envelope", "POST", "/v1/envelopes/canonicalize", tok, nil, 422, "envelope_refused"},
		{"contract", "PUT", "/v1/handoffs/" + hid, tok, nil, 422, "contract_invalid"},
		{"transition", "POST", "/v1/handoffs/" + hid + "/transitions", tok, []string{"If-Match", `"x"`}, 400, "transition_invalid"},
		{"admin project", "POST", "/v1/admin/projects", operatorToken, nil, 400, "body_invalid"},
		{"admin identity", "POST", "/v1/admin/projects/" + pid + "/identities", tok, nil, 400, "body_invalid"},
	}
	bodies := []struct {
		name   string
		body   string
		deeper bool
	}{
		{"arrays 64", nest(64, "[", "]"), false},
		{"arrays 65", nest(65, "[", "]"), true},
		{"objects 64", `{"x":` + nest(63, `{"a":`, "}") + `}`, false},
		{"objects 65", `{"x":` + nest(64, `{"a":`, "}") + `}`, true},
		{"mixed 65", `{"x":` + nest(32, `[{"a":`, "}]") + `}`, true},
		{"65 and a duplicate member", `{"x":1,"x":` + nest(64, "[", "]") + `}`, true},
	}
	for _, rt := range routes {
		for _, b := range bodies {
			t.Run(rt.name+"/"+b.name, func(t *testing.T) {
				r := e.do(rt.method, rt.path, rt.tok, []byte(b.body), rt.hdr...)
				status, code := rt.status, rt.code
				switch {
				case b.deeper:
					status, code = 400, "json_depth_exceeded"
				case strings.HasPrefix(b.body, "["):
					status, code = 400, "invalid_json" // the documents are objects
				}
				if r.Status != status || r.code(t) != code {
					t.Errorf("got %d %s, want %d %s", r.Status, r.Body, status, code)
				}
			})
		}
	}
}

// TestEventsReadUnavailable: a replay the store cannot serve is 503
// correspondence_read_unavailable with a retry hint, never database text.
// The fault is real: the events table is dropped under the running relay.
func TestEventsReadUnavailable(t *testing.T) {
	e, _, path := newEnvWith(t, relay.Config{})
	if path == "" {
		t.Skip("fault injection edits the SQLite file; not run on PostgreSQL")
	}
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.intent("repo", "hello")), 201)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TABLE events`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/correspondence/events?repository_id=repo", "/v1/correspondence/events.atom?repository_id=repo"} {
		r := e.do("GET", p, tok, nil)
		mustStatus(t, r, 503)
		if r.code(t) != "correspondence_read_unavailable" || r.Header.Get("Retry-After") == "" ||
			bytes.Contains(bytes.ToLower(r.Body), []byte("sql")) || bytes.Contains(r.Body, []byte("events")) {
			t.Errorf("%s: %s %v", p, r.Body, r.Header)
		}
	}
}

// TestProfilePage: the describedby target of correspondence responses is
// served, without a token, as Markdown under a strong ETag.
func TestProfilePage(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	link := e.do("GET", "/v1/correspondence/voice?repository_id=repo", tok, nil).Header.Get("Link")
	if !strings.HasSuffix(link, `, <http://relay.test/v1/profile>; rel="describedby"`) {
		t.Fatalf("Link lacks describedby: %s", link)
	}
	r := e.do("GET", "/v1/profile", "", nil)
	mustStatus(t, r, 200)
	if ct := r.Header.Get("Content-Type"); ct != "text/markdown; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	for _, want := range []string{"# acrelay", "json_depth_exceeded", "representation_not_acceptable", "query_invalid",
		"correspondence_read_unavailable", "private, no-cache, no-transform", "private, no-store", "charset=utf-8", "repository_id"} {
		if !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("the profile page does not mention %s", want)
		}
	}
	etag := r.Header.Get("ETag")
	nm := e.do("GET", "/v1/profile", "", nil, "If-None-Match", etag)
	if nm.Status != 304 || len(nm.Body) != 0 || nm.Header.Get("Content-Type") != "text/markdown; charset=utf-8" {
		t.Errorf("revalidation: %d %v", nm.Status, nm.Header)
	}
	head := e.do("HEAD", "/v1/profile", "", nil)
	if head.Status != 200 || len(head.Body) != 0 || head.Header.Get("ETag") != etag {
		t.Errorf("HEAD: %d %v", head.Status, head.Header)
	}
	wantError(t, e.do("GET", "/v1/profile?x=1", "", nil), 400, "query_invalid")
}
