package relay_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	gatom "github.com/mmcdole/gofeed/atom"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// newProjectVisible creates a project with the given visibility through
// the admin API and returns a token with all scopes.
func (e *env) newProjectVisible(visibility string) (projectID, tok string) {
	e.t.Helper()
	r := e.do("POST", "/v1/admin/projects", operatorToken, []byte(`{"visibility":"`+visibility+`"}`))
	mustStatus(e.t, r, 201)
	m := r.json(e.t)
	if m["visibility"] != visibility {
		e.t.Fatalf("created with visibility %v, want %s", m["visibility"], visibility)
	}
	projectID = m["project_id"].(string)
	return projectID, e.newToken(projectID, "read", "append", "admin")
}

func wantCode(t *testing.T, r resp, status int, code string) {
	t.Helper()
	mustStatus(t, r, status)
	if got := r.code(t); got != code {
		t.Fatalf("code %q, want %q", got, code)
	}
}

func TestPublicProjectReads(t *testing.T) {
	e := newEnv(t)
	pub, pubTok := e.newProjectVisible("public")
	priv, privTok := e.newProjectVisible("private")
	_, otherTok := e.newProject("")
	a := e.newAgent(pub, pubTok)
	mustStatus(t, e.post(a, a.intent("repo", "hello")), 201)
	b := e.newAgent(priv, privTok)
	mustStatus(t, e.post(b, b.intent("repo", "secret")), 201)

	reads := []string{
		"/v1/correspondence/events?repository_id=repo&project_id=",
		"/v1/correspondence/events.atom?repository_id=repo&project_id=",
		"/v1/correspondence/events.json?repository_id=repo&project_id=",
		"/v1/correspondence/claims?repository_id=repo&project_id=",
		"/v1/correspondence/voice?repository_id=repo&project_id=",
	}
	for _, path := range reads {
		route, _, _ := strings.Cut(path, "?")
		t.Run(route, func(t *testing.T) {
			for _, tc := range []struct {
				name, path, tok string
				status          int
				code            string
			}{
				{"public without token", path + pub, "", 200, ""},
				{"public with its token", path + pub, pubTok, 200, ""},
				{"public with another project's token", path + pub, otherTok, 404, "not_found"},
				{"public without project_id or token", strings.TrimSuffix(path, "&project_id="), "", 401, "unauthorized"},
				{"private without token", path + priv, "", 401, "unauthorized"},
				{"private with another project's token", path + priv, otherTok, 404, "not_found"},
				{"private with a public project's token", path + priv, pubTok, 404, "not_found"},
				{"private with its token", path + priv, privTok, 200, ""},
				{"unknown project without token", path + newUUID(), "", 401, "unauthorized"},
				{"invalid project_id without token", path + "x", "", 401, "unauthorized"},
				{"public, bad token", path + pub, "acr_nope", 401, "unauthorized"},
				{"public, unknown parameter", path + pub + "&x=1", "", 400, "query_invalid"},
				{"public, repeated project_id", path + pub + "&project_id=" + pub, "", 401, "unauthorized"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := e.do("GET", tc.path, tc.tok, nil)
					if tc.code == "" {
						mustStatus(t, r, tc.status)
					} else {
						wantCode(t, r, tc.status, tc.code)
					}
					if tc.status != 200 && bytes.Contains(r.Body, []byte("secret")) {
						t.Fatal("a refusal carried private data")
					}
				})
			}
		})
	}
	t.Run("writes need a token", func(t *testing.T) {
		wantCode(t, e.do("POST", "/v1/correspondence/events?project_id="+pub, "", eventJSON(t, a.intent("repo", "x"))), 401, "unauthorized")
		wantCode(t, e.do("GET", "/v1/wake/voice?identity_id="+a.IdentityID+"&keys=correspondence&project_id="+pub, "", nil), 401, "unauthorized")
		wantCode(t, e.do("GET", "/v1/handoffs?project_id="+pub, "", nil), 401, "unauthorized")
	})
	t.Run("the public read is the bytes a token read gets", func(t *testing.T) {
		anon := e.do("GET", "/v1/correspondence/events.atom?repository_id=repo&project_id="+pub, "", nil)
		auth := e.do("GET", "/v1/correspondence/events.atom?repository_id=repo", pubTok, nil)
		if !bytes.Equal(anon.Body, auth.Body) || anon.Header.Get("ETag") != auth.Header.Get("ETag") {
			t.Fatalf("bodies differ:\n%s\n%s", anon.Body, auth.Body)
		}
	})
}

func TestProjectVisibilityAdmin(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	readTok := e.newToken(pid, "read")
	_, otherTok := e.newProject("")
	path := "/v1/correspondence/events?repository_id=repo&project_id=" + pid
	wantCode(t, e.do("GET", path, "", nil), 401, "unauthorized")

	for _, tc := range []struct {
		name, tok, project, body string
		status                   int
		code, want               string
	}{
		{"operator makes it public", operatorToken, pid, `{"visibility":"public"}`, 200, "", `{"project_id":"` + pid + `","visibility":"public"}`},
		{"read token", readTok, pid, `{"visibility":"private"}`, 403, "scope_insufficient", ""},
		{"another project's admin", otherTok, pid, `{"visibility":"private"}`, 404, "not_found", ""},
		{"unknown value", tok, pid, `{"visibility":"everyone"}`, 400, "visibility_invalid", ""},
		{"missing value", tok, pid, `{}`, 400, "visibility_invalid", ""},
		{"unknown member", tok, pid, `{"visibility":"public","x":1}`, 400, "body_invalid", ""},
		{"unknown project", operatorToken, newUUID(), `{"visibility":"public"}`, 404, "not_found", ""},
		{"no token", "", pid, `{"visibility":"private"}`, 401, "unauthorized", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("PATCH", "/v1/admin/projects/"+tc.project, tc.tok, []byte(tc.body))
			if tc.code != "" {
				wantCode(t, r, tc.status, tc.code)
				return
			}
			mustStatus(t, r, tc.status)
			if string(r.Body) != tc.want {
				t.Fatalf("body %s, want %s", r.Body, tc.want)
			}
		})
	}
	mustStatus(t, e.do("GET", path, "", nil), 200)
	r := e.do("PATCH", "/v1/admin/projects/"+pid, tok, []byte(`{"visibility":"private"}`))
	mustStatus(t, r, 200)
	wantCode(t, e.do("GET", path, "", nil), 401, "unauthorized")

	t.Run("create", func(t *testing.T) {
		wantCode(t, e.do("POST", "/v1/admin/projects", operatorToken, []byte(`{"visibility":"open"}`)), 400, "visibility_invalid")
		r := e.do("POST", "/v1/admin/projects", operatorToken, []byte(`{}`))
		mustStatus(t, r, 201)
		if r.json(t)["visibility"] != "private" {
			t.Fatalf("default visibility: %s", r.Body)
		}
	})
}

func TestTopicDiscoveryLinks(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProjectVisible("public")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.event("repo", "t1", "intent", obj("summary", "x"), nil)), 201)
	for _, tc := range []struct {
		name, path, format, thread string
	}{
		{"atom", "/v1/correspondence/events.atom?repository_id=repo", hub.FormatAtom, ""},
		{"json", "/v1/correspondence/events.json?repository_id=repo", hub.FormatJSON, ""},
		{"atom thread, parameters in another order", "/v1/correspondence/events.atom?thread_id=t1&repository_id=repo&project_id=" + pid, hub.FormatAtom, "t1"},
		{"json with a page cursor", "/v1/correspondence/events.json?repository_id=repo&after=0&limit=5", hub.FormatJSON, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", tc.path, tok, nil)
			mustStatus(t, r, 200)
			topic := hub.Topic{ProjectID: pid, RepositoryID: "repo", ThreadID: tc.thread, Format: tc.format}.URL("http://relay.test")
			link := r.Header.Get("Link")
			media := "application/atom+xml"
			if tc.format == hub.FormatJSON {
				media = "application/vnd.agenttool.correspondence+json"
			}
			wantStart := `<http://relay.test/websub/hub>; rel="hub", <` + topic + `>; rel="self"; type="` + media + `", `
			if !strings.HasPrefix(link, wantStart) {
				t.Fatalf("Link %s\nwant prefix %s", link, wantStart)
			}
			if n := strings.Count(link, `rel="self"`); n != 1 {
				t.Fatalf("%d self links", n)
			}
			if tc.format == hub.FormatAtom {
				esc := strings.ReplaceAll(topic, "&", "&amp;")
				for _, want := range []string{
					`  <link rel="hub" href="http://relay.test/websub/hub"/>` + "\n" +
						`  <link rel="self" type="application/atom+xml" href="` + esc + `"/>` + "\n",
				} {
					if !bytes.Contains(r.Body, []byte(want)) {
						t.Fatalf("feed lacks %s\n%s", want, r.Body)
					}
				}
				if n := bytes.Count(r.Body, []byte(`rel="self"`)); n != 1 {
					t.Fatalf("%d self links in the feed", n)
				}
			}
			parsed, err := hub.ParseTopic("http://relay.test", topic)
			if err != nil || parsed.URL("http://relay.test") != topic {
				t.Fatalf("the hub reads the self link as %+v, %v", parsed, err)
			}
		})
	}
}

// TestArchiveChain walks a repository's whole history from the current
// feed through prev-archive links with gofeed: every event exactly once,
// in receipt order, and nothing of another repository.
func TestArchiveChain(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProjectVisible("public")
	priv, privTok := e.newProjectVisible("private")
	a := e.newAgent(pid, tok)
	var want []string
	for i := range 457 {
		ev := a.intent("repo", "n")
		mustStatus(t, e.post(a, ev), 201)
		want = append(want, ev.ID)
		if i%50 == 0 {
			mustStatus(t, e.post(a, a.intent("other-repo", "o")), 201)
		}
	}
	strip := func(u string) string {
		if !strings.HasPrefix(u, "http://relay.test") {
			t.Fatalf("link %q is not under the public URL", u)
		}
		return strings.TrimPrefix(u, "http://relay.test")
	}
	current := "/v1/correspondence/events.atom?repository_id=repo&project_id=" + pid
	var pages [][]string
	var archives []resp
	path := current
	for path != "" {
		r := e.do("GET", path, "", nil)
		mustStatus(t, r, 200)
		f, err := (&gatom.Parser{}).Parse(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, it := range f.Entries {
			ids = append(ids, it.ID)
		}
		pages = append([][]string{ids}, pages...)
		if path != current {
			archives = append(archives, r)
			if len(ids) != 200 {
				t.Fatalf("archive %s has %d entries", path, len(ids))
			}
			if !bytes.Contains(r.Body, []byte("<fh:archive/>")) || !bytes.Contains(r.Body, []byte(`xmlns:fh="http://purl.org/syndication/history/1.0"`)) {
				t.Fatal("archive lacks fh:archive")
			}
			// 457 records: the current document holds archive 1's records
			// and the 57 after them (the overlap rule) and links archive 0,
			// which is immutable since archive 1 completed.
			wantCC := "public, max-age=31536000, immutable"
			if got := r.Header.Get("Cache-Control"); got != wantCC {
				t.Fatalf("%s: Cache-Control %q, want %q", path, got, wantCC)
			}
			etag := r.Header.Get("ETag")
			if !strings.HasPrefix(etag, `"`) {
				t.Fatalf("ETag %q is not strong", etag)
			}
			mustStatus(t, e.do("GET", path, "", nil, "If-None-Match", etag), 304)
			if cur := linkOf(f, "current"); strip(cur) != strings.TrimPrefix(hub.Topic{ProjectID: pid, RepositoryID: "repo", Format: hub.FormatAtom}.URL("http://relay.test"), "http://relay.test") {
				t.Fatalf("current link %q", cur)
			}
		}
		path = ""
		if prev := linkOf(f, "prev-archive"); prev != "" {
			path = strip(prev)
		}
	}
	var got []string
	for _, p := range pages {
		got = append(got, p...)
	}
	if len(pages) != 2 || len(pages[1]) != 257 || len(got) != len(want) {
		t.Fatalf("%d documents, %d events; want 2 (archive 0 and the current document, 257 entries) and %d", len(pages), len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %s, want %s", i, got[i], want[i])
		}
	}
	t.Run("archives", func(t *testing.T) {
		base := "/v1/correspondence/archives/"
		sel := "?project_id=" + pid + "&repository_id=repo"
		a0 := e.do("GET", base+"0.atom"+sel, "", nil)
		if !bytes.Equal(a0.Body, archives[len(archives)-1].Body) {
			t.Fatal("archive 0 differs from the one the chain reached")
		}
		again := e.do("GET", base+"0.atom?repository_id=repo", tok, nil)
		if !bytes.Equal(a0.Body, again.Body) || a0.Header.Get("ETag") != again.Header.Get("ETag") {
			t.Fatal("archive 0 differs with a token")
		}
		for _, tc := range []struct {
			name, path, tok string
			status          int
			code            string
		}{
			{"incomplete archive", base + "2.atom" + sel, "", 404, "not_found"},
			{"leading zero", base + "01.atom" + sel, "", 404, "not_found"},
			{"huge", base + "99999999999999999999.atom" + sel, "", 404, "not_found"},
			{"other repository has no complete archive", base + "0.atom?project_id=" + pid + "&repository_id=other-repo", "", 404, "not_found"},
			{"private without token", base + "0.atom?project_id=" + priv + "&repository_id=repo", "", 401, "unauthorized"},
			{"private with another project's token", base + "0.atom?project_id=" + priv + "&repository_id=repo", tok, 404, "not_found"},
			{"private with its token, empty", base + "0.atom?project_id=" + priv + "&repository_id=repo", privTok, 404, "not_found"},
			{"no repository", base + "0.atom?project_id=" + pid, "", 400, "repository_id_required"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantCode(t, e.do("GET", tc.path, tc.tok, nil), tc.status, tc.code)
			})
		}
		// A later append changes neither an archive's bytes nor its ETag.
		a1 := e.do("GET", base+"1.atom"+sel, "", nil)
		mustStatus(t, a1, 200)
		mustStatus(t, e.post(a, a.intent("repo", "later")), 201)
		if later := e.do("GET", base+"1.atom"+sel, "", nil); !bytes.Equal(later.Body, a1.Body) || later.Header.Get("ETag") != a1.Header.Get("ETag") {
			t.Fatal("archive 1 changed after an append")
		}
	})
}

// linkOf is the href of the Atom feed's <link rel=rel>, "" if none.
func linkOf(f *gatom.Feed, rel string) string {
	for _, l := range f.Links {
		if l.Rel == rel {
			return l.Href
		}
	}
	return ""
}

func TestFeedCapabilities(t *testing.T) {
	var logs bytes.Buffer
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, url: srv.URL}

	pid, tok := e.newProject("")
	readTok := e.newToken(pid, "read")
	appendTok := e.newToken(pid, "append")
	_, otherTok := e.newProject("")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.intent("repo", "x")), 201)
	mustStatus(t, e.post(a, a.intent("repo-2", "y")), 201)

	wantCode(t, e.do("POST", "/v1/feeds", appendTok, []byte(`{"repository_id":"repo"}`)), 403, "scope_insufficient")
	wantCode(t, e.do("POST", "/v1/feeds", "", []byte(`{"repository_id":"repo"}`)), 401, "unauthorized")
	wantCode(t, e.do("POST", "/v1/feeds", readTok, []byte(`{}`)), 400, "repository_id_required")
	wantCode(t, e.do("POST", "/v1/feeds", readTok, []byte(`{"repository_id":"repo","x":1}`)), 400, "body_invalid")
	r := e.do("POST", "/v1/feeds", readTok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, r, 201)
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	m := r.json(t)
	feedID, feedURL := m["feed_id"].(string), m["url"].(string)
	path := strings.TrimPrefix(feedURL, "http://relay.test")
	capability := strings.TrimSuffix(strings.TrimPrefix(path, "/v1/feeds/"), ".atom?repository_id=repo")
	if !strings.HasPrefix(feedURL, "http://relay.test/v1/feeds/acf_") || !strings.HasSuffix(feedURL, ".atom?repository_id=repo") ||
		strings.Contains(capability, "/") || !strings.Contains(capability, feedID) || capability == feedID {
		t.Fatalf("feed_id %q url %q", feedID, feedURL)
	}

	feed := e.do("GET", path, "", nil)
	mustStatus(t, feed, 200)
	// The topic's document, with every link under the capability and
	// nothing that needs a bearer (hub, wake template, voice, claims).
	topic := e.do("GET", "/v1/correspondence/events.atom?repository_id=repo", tok, nil)
	topicURL := "http://relay.test/v1/correspondence/events.atom?project_id=" + pid + "&amp;repository_id=repo"
	jsonURL := "http://relay.test/v1/correspondence/events?project_id=" + pid + "&amp;repository_id=repo"
	capJSON := "http://relay.test/v1/feeds/" + capability + ".json?repository_id=repo"
	wantFeed := bytes.Replace(topic.Body, []byte(`  <link rel="hub" href="http://relay.test/websub/hub"/>`+"\n"), nil, 1)
	wantFeed = bytes.Replace(wantFeed, []byte(`href="`+topicURL+`"`), []byte(`href="`+feedURL+`"`), 1)
	wantFeed = bytes.Replace(wantFeed, []byte(`type="application/vnd.agenttool.correspondence+json" href="`+jsonURL+`"`),
		[]byte(`type="application/vnd.agenttool.correspondence+json" href="`+capJSON+`"`), 1)
	// Its entries link the records' pages under the capability, not the
	// web view's.
	wantFeed = bytes.ReplaceAll(wantFeed, []byte(`href="http://relay.test/ui/projects/`+pid+`/records/1.html?repository_id=repo"`),
		[]byte(`href="http://relay.test/v1/feeds/`+capability+`/records/1"`))
	lt := bytes.Index(wantFeed, []byte("  <at:link-template "))
	wantFeed = append(wantFeed[:lt:lt], wantFeed[lt+bytes.IndexByte(wantFeed[lt:], '\n')+1:]...)
	if !bytes.Equal(feed.Body, wantFeed) {
		t.Fatalf("feed:\n%s\nwant:\n%s", feed.Body, wantFeed)
	}
	wantLink := "<" + feedURL + `>; rel="self"; type="application/atom+xml", <` + capJSON +
		`>; rel="alternate"; type="application/vnd.agenttool.correspondence+json", <http://relay.test/v1/feeds/` + capability +
		`/log/checkpoint>; rel="https://agenttool.dev/rels/log-checkpoint"; type="text/plain", <http://relay.test/v1/profile>; rel="describedby"`
	if got := feed.Header.Get("Link"); got != wantLink || feed.Header.Get("Link-Template") != "" {
		t.Fatalf("Link %q, Link-Template %q; want Link %q", got, feed.Header.Get("Link-Template"), wantLink)
	}
	if feed.Header.Get("Content-Type") != "application/atom+xml; charset=utf-8" || feed.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("headers %v", feed.Header)
	}
	for _, tc := range []struct {
		name, method, path, tok string
		status                  int
		code                    string
	}{
		{"the capability as a bearer", "GET", "/v1/correspondence/events.atom?repository_id=repo", capability, 401, "unauthorized"},
		{"the capability as a bearer on whoami", "GET", "/v1/whoami", capability, 401, "unauthorized"},
		{"the feed id as the capability", "GET", "/v1/feeds/" + feedID + ".atom?repository_id=repo", "", 404, "not_found"},
		{"another repository", "GET", "/v1/feeds/" + capability + ".atom?repository_id=repo-2", "", 404, "not_found"},
		{"no repository", "GET", "/v1/feeds/" + capability + ".atom", "", 400, "repository_id_required"},
		{"a thread", "GET", "/v1/feeds/" + capability + ".atom?repository_id=repo&thread_id=t", "", 400, "query_invalid"},
		{"a forged secret", "GET", "/v1/feeds/" + capability[:len(capability)-2] + "AA.atom?repository_id=repo", "", 404, "not_found"},
		{"revoke by another project", "DELETE", "/v1/feeds/" + feedID, otherTok, 404, "not_found"},
		{"revoke without token", "DELETE", "/v1/feeds/" + feedID, "", 401, "unauthorized"},
		{"revoke unknown", "DELETE", "/v1/feeds/aaaaaaaaaaaaaaaaaaaaaaaaaa", readTok, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, e.do(tc.method, tc.path, tc.tok, nil), tc.status, tc.code)
		})
	}
	mustStatus(t, e.do("GET", path, "", nil), 200)
	mustStatus(t, e.do("DELETE", "/v1/feeds/"+feedID, readTok, nil), 204)
	wantCode(t, e.do("GET", path, "", nil), 404, "not_found")

	// A store failure is logged with the route template, never the path.
	r = e.do("POST", "/v1/feeds", readTok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, r, 201)
	live := strings.TrimPrefix(r.json(t)["url"].(string), "http://relay.test")
	st.Close()
	mustStatus(t, e.do("GET", live, "", nil), 503)
	if !strings.Contains(logs.String(), "/v1/feeds/{feed_token}.atom") {
		t.Fatalf("no log line names the route:\n%s", logs.String())
	}
	for _, secret := range []string{capability, strings.TrimSuffix(strings.TrimPrefix(live, "/v1/feeds/"), ".atom?repository_id=repo")} {
		if strings.Contains(logs.String(), secret) || strings.Contains(logs.String(), secret[len(secret)-43:]) {
			t.Fatalf("a log line holds a feed capability:\n%s", logs.String())
		}
	}
}

// linkTargets parses a Link header's targets by rel (RFC 8288; the relay
// percent-encodes its URLs, so no target holds a comma or '>').
func linkTargets(t *testing.T, field string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(field, ", <") {
		href, params, ok := strings.Cut(strings.TrimPrefix(l, "<"), ">")
		_, rel, _ := strings.Cut(params, `rel="`)
		rel, _, _ = strings.Cut(rel, `"`)
		if !ok || rel == "" {
			t.Fatalf("malformed link %q in %s", l, field)
		}
		out[rel] = href
	}
	return out
}

// TestPublicProjectLinksFollow: every link a public project's read gives
// an anonymous reader (Link header and Atom <link>s, next pages too) works
// for that reader without a token, and two public projects with the same
// repository_id have different Atom feed ids.
func TestPublicProjectLinksFollow(t *testing.T) {
	e := newEnv(t)
	pub, pubTok := e.newProjectVisible("public")
	other, otherTok := e.newProjectVisible("public")
	for _, p := range []struct{ pid, tok string }{{pub, pubTok}, {other, otherTok}} {
		a := e.newAgent(p.pid, p.tok)
		mustStatus(t, e.post(a, a.intent("repo", "one")), 201)
		mustStatus(t, e.post(a, a.intent("repo", "two")), 201)
	}
	follow := func(t *testing.T, from, rel, href string) {
		t.Helper()
		path, ok := strings.CutPrefix(href, "http://relay.test")
		if !ok {
			t.Fatalf("%s: rel %q target %q is not on the relay", from, rel, href)
		}
		r := e.do("GET", path, "", nil)
		if rel == "https://agenttool.dev/rels/log-checkpoint" && r.Status == 404 && r.code(t) == "log_empty" {
			return // no sequencer in this relay: readable, but nothing integrated (TestLogReads)
		}
		if r.Status != 200 {
			t.Errorf("%s: rel %q → GET %s without a token: %d %s", from, rel, path, r.Status, r.Body)
		}
	}
	for _, read := range []string{
		"/v1/correspondence/events.atom?project_id=" + pub + "&repository_id=repo",
		"/v1/correspondence/events.atom?project_id=" + pub + "&repository_id=repo&limit=1",
		"/v1/correspondence/events.json?project_id=" + pub + "&repository_id=repo&limit=1",
		"/v1/correspondence/events?project_id=" + pub + "&repository_id=repo&limit=1",
		"/v1/correspondence/claims?project_id=" + pub + "&repository_id=repo",
		"/v1/correspondence/voice?project_id=" + pub + "&repository_id=repo",
	} {
		t.Run(read, func(t *testing.T) {
			r := e.do("GET", read, "", nil)
			mustStatus(t, r, 200)
			links := linkTargets(t, r.Header.Get("Link"))
			for _, rel := range []string{"self", "alternate", "https://agenttool.dev/rels/correspondence-voice", "https://agenttool.dev/rels/active-claims"} {
				if links[rel] == "" {
					t.Errorf("no rel %q in %s", rel, r.Header.Get("Link"))
				}
			}
			if strings.Contains(read, "limit=1") && links["next"] == "" {
				t.Errorf("no rel next in %s", r.Header.Get("Link"))
			}
			for rel, href := range links {
				if rel == "hub" { // WebSub's POST endpoint (its GET is 405)
					continue
				}
				follow(t, "Link", rel, href)
			}
			if !strings.Contains(read, ".atom") {
				return
			}
			feed, err := (&gatom.Parser{}).Parse(bytes.NewReader(r.Body))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range feed.Links {
				if l.Rel != "hub" {
					follow(t, "Atom", l.Rel, l.Href)
				}
			}
		})
	}

	feedID := func(pid string) string {
		r := e.do("GET", "/v1/correspondence/events.atom?project_id="+pid+"&repository_id=repo", "", nil)
		mustStatus(t, r, 200)
		feed, err := (&gatom.Parser{}).Parse(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatal(err)
		}
		return feed.ID
	}
	if a, b := feedID(pub), feedID(other); a == b || !strings.Contains(a, pub) || !strings.Contains(b, other) {
		t.Errorf("feed ids %q and %q: want one per project", a, b)
	}
}

// TestFeedCapabilityEndsWithItsToken: revoking the token that minted a
// feed capability ends the capability and every page under it (found by a
// hostile newcomer: the feed outlived its reader's token, and an admin
// cannot find feed ids to revoke them one by one).
func TestFeedCapabilityEndsWithItsToken(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.intent("repo", "x")), 201)
	r := e.do("POST", "/v1/admin/projects/"+pid+"/tokens", operatorToken, []byte(`{"scopes":["read"]}`))
	mustStatus(t, r, 201)
	m := r.json(t)
	readTok, readID := m["token"].(string), m["token_id"].(string)
	r = e.do("POST", "/v1/feeds", readTok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, r, 201)
	feedURL := r.json(t)["url"].(string)
	path := feedURL[strings.Index(feedURL, "/v1/feeds/"):]
	jsonPath := strings.Replace(path, ".atom?", ".json?", 1)
	mustStatus(t, e.do("GET", path, "", nil), 200)
	mustStatus(t, e.do("GET", jsonPath, "", nil), 200)

	mustStatus(t, e.do("DELETE", "/v1/admin/tokens/"+readID, tok, nil), 204)
	wantCode(t, e.do("GET", path, "", nil), 404, "not_found")
	wantCode(t, e.do("GET", jsonPath, "", nil), 404, "not_found")
}
