package relay_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/wire"
)

// TestBoundedWorkPerRequest: with 450 records in a repository, every read
// surface answers at most its bound, and asking for more is refused, not
// served (issue 27: bounded work per request, a test per surface; the
// wake stream's bound is TestWakeStreamsPerTokenCapped, the body bounds
// TestPostRefusals and the handoff tests).
func TestBoundedWorkPerRequest(t *testing.T) {
	e, _ := newLimitEnv(t, relayNoLimits)
	pid, tok := e.newProjectVisible("public")
	a := e.newAgent(pid, tok)
	for range 450 {
		mustStatus(t, e.post(a, a.intent("repo", "n")), 201)
	}
	r := e.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, r, 201)
	feed := strings.TrimPrefix(r.json(t)["url"].(string), "http://relay.test")
	entries := func(r resp) int { return bytes.Count(r.Body, []byte("<entry>")) }
	events := func(r resp) int {
		evs, _ := r.json(t)["events"].([]any)
		return len(evs)
	}
	q := "?repository_id=repo&project_id=" + pid
	for _, tc := range []struct {
		name, path, tok string
		count           func(resp) int
		want            int // records or entries served
	}{
		{"events page, default", "/v1/correspondence/events" + q, tok, events, 100},
		{"events page, limit 200", "/v1/correspondence/events" + q + "&limit=200", tok, events, 200},
		{"events page, public", "/v1/correspondence/events" + q + "&limit=200", "", events, 200},
		{"JSON topic", "/v1/correspondence/events.json" + q + "&limit=200", "", events, 200},
		// The current document holds the newest complete archive and
		// what follows it: 200 + 450 − 2·200 (the overlap rule).
		{"Atom topic", "/v1/correspondence/events.atom" + q, "", entries, 250},
		{"archive page", "/v1/correspondence/archives/1.atom" + q, "", entries, 200},
		{"feed capability", feed, "", entries, 250},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", tc.path, tc.tok, nil)
			mustStatus(t, r, 200)
			if got := tc.count(r); got != tc.want {
				t.Fatalf("%d served, want %d", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"events page over 200", "/v1/correspondence/events" + q + "&limit=201", 400, wire.CodeLimitInvalid},
		{"events page of a million", "/v1/correspondence/events" + q + "&limit=1000000", 400, wire.CodeLimitInvalid},
		{"Atom topic over 200", "/v1/correspondence/events.atom" + q + "&limit=201", 400, wire.CodeLimitInvalid},
		{"archive not complete", "/v1/correspondence/archives/2.atom" + q, 404, wire.CodeNotFound},
		{"archive past the end of int64", "/v1/correspondence/archives/" + strconv.FormatUint(1<<63, 10) + ".atom" + q, 404, wire.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, e.do("GET", tc.path, "", nil), tc.status, tc.code)
		})
	}
	t.Run("hub form over 16 KiB", func(t *testing.T) {
		body := "hub.mode=subscribe&x=" + strings.Repeat("a", 16<<10)
		r := e.do("POST", hub.HubPath, "", []byte(body), "Content-Type", "application/x-www-form-urlencoded")
		if r.Status != http.StatusRequestEntityTooLarge || !bytes.Contains(r.Body, []byte(`"error":"body_too_large"`)) {
			t.Fatalf("status %d, body %s", r.Status, r.Body)
		}
	})
}
