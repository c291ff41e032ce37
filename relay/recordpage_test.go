package relay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mmcdole/gofeed"
	"golang.org/x/net/html"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/sequencer"
	acrtlog "github.com/acrelay/acrelay/tlog"
)

// newRecordEnv is newUIEnv (its public URL its own, its log kept) with a
// verifiable log: the sequencer integrates on demand.
func newRecordEnv(t *testing.T) (*uiEnv, *sequencer.Sequencer) {
	t.Helper()
	st := openTestStore(t)
	skey, _, err := acrtlog.NewLogKey("relay.test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := acrtlog.OpenLogKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	srv := httptest.NewUnstartedServer(nil)
	public := "http://" + srv.Listener.Addr().String()
	s := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: public, LogVerifierKey: key.VerifierKey,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	srv.Config.Handler = s.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(s.CloseStreams)
	return &uiEnv{env: &env{t: t, st: st, srv: srv, url: srv.URL}, logs: logs},
		sequencer.New(st, sequencer.Options{PublicURL: public, Key: key})
}

// newAgentNamed registers an identity named name with a fresh key.
func (e *env) newAgentNamed(projectID, tok, name string) *agent {
	e.t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	b, _ := json.Marshal(map[string]string{"display_name": name})
	r := e.do("POST", "/v1/admin/projects/"+projectID+"/identities", tok, b)
	mustStatus(e.t, r, 201)
	ident := r.json(e.t)["identity_id"].(string)
	r = e.do("POST", "/v1/admin/identities/"+ident+"/keys", tok, []byte(`{"public_key_b64url":"`+correspondence.EncodePublicKey(pub)+`"}`))
	mustStatus(e.t, r, 201)
	return &agent{ProjectID: projectID, IdentityID: ident, KeyID: r.json(e.t)["signing_key_id"].(string),
		DeviceID: newUUID(), SessionID: newUUID(), Priv: priv, Token: tok}
}

// Hostile text (issue 32): markup in every agent-controlled string.
const (
	hostileName    = `<script>alert('name')</script> &amp; "Eve" </title>`
	hostileSummary = `</title><script>alert(1)</script><a href="javascript:alert(2)">click</a> &lt;b&gt; &#60;i&#62;`
	hostileRepo    = `repo<script>alert(3)</script>`
	hostileThread  = `</title><img/src=x/onerror=alert(4)>`
	hostilePath    = `src/<b onmouseover="alert(5)">x</b> & more`
	hostileLocator = `javascript:alert(6)//</code><script>alert(7)</script>`
)

// liveMarkupOf tokenizes doc as an HTML5 parser would and returns the
// first live markup in it: a script, img, iframe, object, embed, form or
// input element, any other element the relay does not write, an event
// handler attribute, or an href/src that is not on this relay; "" when
// there is none.
func liveMarkupOf(doc, relayURL string) string {
	allowed := map[string]bool{"html": true, "head": true, "meta": true, "title": true, "link": true, "body": true, "header": true,
		"h1": true, "h2": true, "h3": true, "span": true, "dl": true, "dt": true, "dd": true, "code": true, "time": true, "main": true,
		"article": true, "p": true, "strong": true, "section": true, "a": true, "pre": true, "ul": true, "li": true, "br": true}
	z := html.NewTokenizer(strings.NewReader(doc))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if !allowed[tok.Data] {
				return "<" + tok.Data + ">"
			}
			for _, at := range tok.Attr {
				if strings.HasPrefix(strings.ToLower(at.Key), "on") {
					return at.Key + "=" + at.Val
				}
				if (at.Key == "href" || at.Key == "src") && !strings.HasPrefix(at.Val, relayURL+"/") && !strings.HasPrefix(at.Val, "/ui/") {
					return at.Key + "=" + at.Val
				}
			}
		}
	}
}

// hrefs finds every href and src attribute value of a page.
var hrefs = regexp.MustCompile(`(?:href|src)="([^"]*)"`)

// TestRecordPagesAndHostileText: a feed reader's view of records whose
// every agent-controlled string is markup. Through a feed capability:
// the Atom document is well-formed (encoding/xml, jing) and gofeed reads
// each entry's title as the kind's label and the summary, its author as
// the display name, its content as inert HTML, its link as its own
// record page; each page answers 200 text/html with no header, with the
// web view's CSP, no-referrer and nosniff, shows the record (escaped),
// its JSON and a working inclusion-proof link, links nothing outside the
// relay, and ends with the capability. A public project's topic links
// public pages; a private one's need the web view's session. No log line
// holds the capability.
func TestRecordPagesAndHostileText(t *testing.T) {
	e, seq := newRecordEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgentNamed(pid, tok, hostileName)
	evs := []*correspondence.Event{
		a.event(hostileRepo, hostileThread, correspondence.KindProgress, obj("summary", hostileSummary), nil, hostilePath),
		a.event(hostileRepo, hostileThread, correspondence.KindArtifactOffer, obj("summary", hostileSummary,
			"artifact", obj("kind", "content_digest", "digest", "sha256:"+strings.Repeat("d", 64), "locator", hostileLocator)), nil, hostilePath),
	}
	open := a.event(hostileRepo, hostileThread, correspondence.KindClaimOpen, obj("claim_id", newUUID(), "generation", 1, "expires_at", "2999-01-01T00:00:00.000Z"), nil, hostilePath)
	evs = append(evs, open)
	for _, ev := range evs {
		mustStatus(t, e.post(a, ev), 201)
	}
	body, _ := json.Marshal(map[string]string{"repository_id": hostileRepo})
	r := e.do("POST", "/v1/feeds", tok, body)
	mustStatus(t, r, 201)
	m := r.json(t)
	feedURL, feedID := m["url"].(string), m["feed_id"].(string)
	capability := strings.TrimPrefix(feedURL[:strings.Index(feedURL, ".atom?")], e.url+"/v1/feeds/")

	if _, err := seq.Integrate(context.Background(), pid); err != nil {
		t.Fatal(err)
	}
	feed := bare(t, feedURL)
	mustStatus(t, feed, 200)
	mustWellFormed(t, feed.Body)
	jingValid(t, feed.Body)
	parsed, err := gofeed.NewParser().ParseString(string(feed.Body))
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Items) != len(evs) {
		t.Fatalf("%d items", len(parsed.Items))
	}
	wantTitles := []string{"Progress: " + hostileSummary, "Artifact: " + hostileSummary, "Claim: " + hostilePath + " until 2999-01-01T00:00:00.000Z"}
	links := map[string]bool{}
	for i, item := range parsed.Items {
		if item.Title != wantTitles[i] {
			t.Errorf("item %d title %q, want %q", i, item.Title, wantTitles[i])
		}
		if item.Author == nil || item.Author.Name != hostileName {
			t.Errorf("item %d author %+v, want %q", i, item.Author, hostileName)
		}
		if m := liveMarkupOf(item.Content, e.url); m != "" {
			t.Errorf("item %d content holds live markup %q:\n%s", i, m, item.Content)
		}
		for _, s := range []string{hostileRepo, hostileThread, hostilePath, hostileName} {
			if !strings.Contains(item.Content, htmlEscaped(s)) {
				t.Errorf("item %d content lacks %q escaped", i, s)
			}
		}
		want := e.url + "/v1/feeds/" + capability + "/records/" + strconv.Itoa(i+1)
		if item.Link != want || links[item.Link] {
			t.Errorf("item %d link %q, want %q", i, item.Link, want)
		}
		links[item.Link] = true
	}
	if !strings.Contains(parsed.Items[1].Content, htmlEscaped(hostileLocator)) {
		t.Errorf("the artifact's locator is missing:\n%s", parsed.Items[1].Content)
	}

	t.Run("record pages under the capability", func(t *testing.T) {
		for i, item := range parsed.Items {
			p := bare(t, item.Link)
			mustStatus(t, p, 200)
			if ct := p.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Fatalf("Content-Type %q", ct)
			}
			mustSecurityHeaders(t, p)
			if cc := p.Header.Get("Cache-Control"); cc != "private, no-cache" {
				t.Errorf("Cache-Control %q", cc)
			}
			page := string(p.Body)
			if m := liveMarkupOf(page, e.url); m != "" {
				t.Errorf("page %d holds live markup %q", i, m)
			}
			want := []string{hostileName, hostileRepo, hostileThread, hostilePath, evs[i].ID}
			if i < 2 {
				want = append(want, hostileSummary)
			} else {
				want = append(want, "2999-01-01T00:00:00.000Z")
			}
			for _, s := range want {
				if !strings.Contains(page, htmlEscaped(s)) {
					t.Errorf("page %d lacks %q escaped", i, s)
				}
			}
			// Every link stays on this relay: the stylesheet, the icon,
			// the inclusion proof and the feed (the last two rel=noreferrer).
			var proof string
			for _, h := range hrefs.FindAllStringSubmatch(page, -1) {
				u := strings.ReplaceAll(h[1], "&amp;", "&")
				switch {
				case u == "/ui/static/ui.css", u == "/ui/static/favicon.svg":
				case u == feedURL:
				case strings.HasPrefix(u, e.url+"/v1/feeds/"+capability+"/log/proof/inclusion?received_seq="):
					proof = u
				default:
					t.Errorf("page %d links %q", i, u)
				}
			}
			if strings.Count(page, `rel="noreferrer"`) != 2 {
				t.Errorf("page %d: links without rel=noreferrer", i)
			}
			if proof == "" {
				t.Fatalf("page %d has no inclusion proof link", i)
			}
			pr := bare(t, proof)
			mustStatus(t, pr, 200)
			var pj map[string]any
			if err := json.Unmarshal(pr.Body, &pj); err != nil {
				t.Fatalf("proof: %v %s", err, pr.Body)
			}
			// The record's exact JSON is on the page, escaped.
			if !strings.Contains(page, htmlEscaped(`"event_id":"`+evs[i].ID+`"`)) {
				t.Errorf("page %d lacks the record JSON", i)
			}
		}
		wantCode404 := func(u string) {
			t.Helper()
			if p := bare(t, u); p.Status != 404 || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") {
				t.Errorf("%s: %d %q", u, p.Status, p.Header.Get("Content-Type"))
			} else {
				mustSecurityHeaders(t, p)
			}
		}
		// Another repository's record, a record that does not exist, a forged capability.
		mustStatus(t, e.post(a, a.intent("other", "o")), 201)
		wantCode404(e.url + "/v1/feeds/" + capability + "/records/4")
		wantCode404(e.url + "/v1/feeds/" + capability + "/records/99")
		wantCode404(e.url + "/v1/feeds/" + capability[:len(capability)-2] + "AA/records/1")
		mustStatus(t, e.do("DELETE", "/v1/feeds/"+feedID, tok, nil), 204)
		wantCode404(parsed.Items[0].Link)
		for _, secret := range []string{capability, capability[len(capability)-43:]} {
			if strings.Contains(e.logs.String(), secret) {
				t.Fatalf("a log line holds the feed capability")
			}
		}
		if !strings.Contains(e.logs.String(), "/v1/feeds/{feed_token}/records/{received_seq:[0-9]+}") {
			t.Errorf("no log line names the record page's route")
		}
	})

	t.Run("web view pages: behind sign-in for a private project", func(t *testing.T) {
		topic := e.do("GET", "/v1/correspondence/events.atom?repository_id="+urlQueryEscape(hostileRepo), tok, nil)
		mustStatus(t, topic, 200)
		f, err := gofeed.NewParser().ParseString(string(topic.Body))
		if err != nil {
			t.Fatal(err)
		}
		link := f.Items[0].Link
		want := e.url + "/ui/projects/" + pid + "/records/1.html?repository_id=" + urlQueryEscape(hostileRepo)
		if link != want {
			t.Fatalf("topic entry link %q, want %q", link, want)
		}
		path := strings.TrimPrefix(link, e.url)
		r := e.ui("GET", path, nil, nil)
		if r.Status != 303 || !strings.HasPrefix(r.Header.Get("Location"), "/ui/signin") {
			t.Fatalf("without a session: %d %q", r.Status, r.Header.Get("Location"))
		}
		sess := e.signIn(e.newToken(pid, "read"), hostileRepo)
		// The live view links each event to its record page.
		lv := e.ui("GET", "/ui/projects/"+pid+"?repository_id="+urlQueryEscape(hostileRepo), nil, []*http.Cookie{sess})
		mustStatus(t, lv, 200)
		if !strings.Contains(string(lv.Body), `href="`+strings.ReplaceAll(path, "&", "&amp;")+`"`) {
			t.Errorf("the live view does not link %s", path)
		}
		r = e.ui("GET", path, nil, []*http.Cookie{sess})
		mustStatus(t, r, 200)
		mustSecurityHeaders(t, r)
		if m := liveMarkupOf(string(r.Body), e.url); m != "" || !strings.Contains(string(r.Body), htmlEscaped(hostileSummary)) {
			t.Errorf("web view record page: live markup %q or no summary", m)
		}
		// Another project's session sees nothing of it.
		_, otherTok := e.newProject("")
		otherSess := e.signIn(otherTok, hostileRepo)
		if r := e.ui("GET", path, nil, []*http.Cookie{otherSess}); r.Status != 404 {
			t.Errorf("another project's session: %d", r.Status)
		}
	})

	t.Run("web view pages: public for a public project", func(t *testing.T) {
		pub, pubTok := e.newProjectVisible("public")
		b := e.newAgentNamed(pub, pubTok, "Bob")
		mustStatus(t, e.post(b, b.intent("repo", hostileSummary)), 201)
		if _, err := seq.Integrate(context.Background(), pub); err != nil {
			t.Fatal(err)
		}
		topic := bare(t, e.url+"/v1/correspondence/events.atom?project_id="+pub+"&repository_id=repo")
		mustStatus(t, topic, 200)
		f, err := gofeed.NewParser().ParseString(string(topic.Body))
		if err != nil || len(f.Items) != 1 || f.Items[0].Author.Name != "Bob" {
			t.Fatalf("public topic: %v %+v", err, f)
		}
		p := bare(t, f.Items[0].Link)
		mustStatus(t, p, 200)
		mustSecurityHeaders(t, p)
		page := string(p.Body)
		if !strings.Contains(page, htmlEscaped(hostileSummary)) || liveMarkupOf(page, e.url) != "" {
			t.Errorf("public record page:\n%s", page)
		}
		proof := regexp.MustCompile(`href="([^"]*/proof/inclusion[^"]*)"`).FindStringSubmatch(page)
		if proof == nil {
			t.Fatal("no inclusion proof link")
		}
		mustStatus(t, bare(t, strings.ReplaceAll(proof[1], "&amp;", "&")), 200)
		// Once private, the same URL needs the web view's sign-in.
		mustStatus(t, e.do("PATCH", "/v1/admin/projects/"+pub, operatorToken, []byte(`{"visibility":"private"}`)), 200)
		if r := e.ui("GET", strings.TrimPrefix(f.Items[0].Link, e.url), nil, nil); r.Status != 303 {
			t.Errorf("private again: %d", r.Status)
		}
	})
}

func htmlEscaped(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// mustWellFormed decodes b as XML to its end.
func mustWellFormed(t *testing.T, b []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := dec.Token(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
	}
}

// jingValid validates b against RFC 4287's RELAX NG schema with jing
// (skipped when jing is absent).
func jingValid(t *testing.T, b []byte) {
	t.Helper()
	jing, err := exec.LookPath("jing")
	if err != nil {
		t.Log("jing not installed (scripts/test.sh installs Debian's jing when it can): schema check skipped")
		return
	}
	p := filepath.Join(t.TempDir(), "feed.xml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(jing, "-c", shareddir.Path(t, "corpora", "atom", "atom.rnc"), p).CombinedOutput(); err != nil {
		t.Fatalf("jing: %v\n%s", err, out)
	}
}
