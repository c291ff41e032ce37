package relay_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
)

func TestPostRefusals(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	otherPID, otherTok := e.newProject("")
	other := e.newAgent(otherPID, otherTok)
	good := eventJSON(t, a.intent("repo-a", "hello"))

	forged := a.intent("repo-a", "forged")
	forged.Signature = other.intent("repo-a", "x").Signature
	badID := a.intent("repo-a", "bad id")
	badID.ID = "sha256:" + strings.Repeat("0", 64)
	wrongProject := a.intent("repo-a", "p")
	wrongProject.ProjectID = otherPID
	_ = wrongProject.Sign(a.Priv)
	sigEv := a.intent("repo-a", "sig2")
	sigB := eventJSON(t, sigEv)
	last := sigEv.Signature[85]
	alt := byte('B')
	if last == 'B' {
		alt = 'C'
	}
	sigB = bytes.Replace(sigB, []byte(sigEv.Signature), []byte(sigEv.Signature[:85]+string(alt)), 1)

	readOnly := e.newToken(pid, "read")
	big := append([]byte(`{"pad":"`), bytes.Repeat([]byte("a"), 65536)...)
	big = append(big, `"}`...)

	cases := []struct {
		name   string
		tok    string
		body   []byte
		hdr    []string
		status int
		code   string
	}{
		{"no token", "", good, nil, 401, "unauthorized"},
		{"unknown token", "acr_aaaaaaaaaaaaaaaaaaaaaaaaaa_" + strings.Repeat("A", 43), good, nil, 401, "unauthorized"},
		{"read-only token", readOnly, good, nil, 403, "scope_insufficient"},
		{"operator token", operatorToken, good, nil, 403, "project_token_required"},
		{"text/plain", tok, good, []string{"Content-Type", "text/plain"}, 415, "content_type_unsupported"},
		{"latin1 charset", tok, good, []string{"Content-Type", "application/json; charset=latin1"}, 415, "content_type_unsupported"},
		{"vendor type ok", tok, good, []string{"Content-Type", "application/vnd.agenttool.correspondence+json; charset=utf-8"}, 201, ""},
		{"too large", tok, big, nil, 413, "body_too_large"},
		{"duplicate name", tok, []byte(`{"a":1,"a":2}`), nil, 400, "duplicate_object_name"},
		{"fraction", tok, []byte(`{"n":1.5}`), nil, 400, "fractional_number"},
		{"lone surrogate", tok, []byte(`{"s":"\ud800"}`), nil, 400, "non_scalar_unicode"},
		{"not an event", tok, []byte(`{"protocol":"agent-correspondence/v0.1"}`), nil, 400, "event_invalid"},
		{"non-canonical signature", tok, sigB, nil, 400, "signature_encoding_invalid"},
		{"forged signature", tok, eventJSON(t, forged), nil, 403, "signature_invalid"},
		{"event id mismatch", tok, eventJSON(t, badID), nil, 400, "event_id_mismatch"},
		{"project mismatch", tok, eventJSON(t, wrongProject), nil, 403, "project_mismatch"},
		{"sender of another project", otherTok, eventJSON(t, a.intent("repo-a", "x")), nil, 403, "project_mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/correspondence/events", tc.tok, tc.body, tc.hdr...)
			mustStatus(t, r, tc.status)
			if tc.code != "" {
				if got := r.code(t); got != tc.code {
					t.Errorf("error = %q, want %q (%s)", got, tc.code, r.Body)
				}
				if r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
					t.Errorf("error Content-Type %q", r.Header.Get("Content-Type"))
				}
			}
		})
	}

	t.Run("event_invalid lists issues", func(t *testing.T) {
		r := e.do("POST", "/v1/correspondence/events", tok, []byte(`{"protocol":"agent-correspondence/v0.1"}`))
		issues, _ := r.json(t)["issues"].([]any)
		if len(issues) < 5 {
			t.Fatalf("issues = %v, want every missing member", issues)
		}
	})

	t.Run("revoked key and deactivated identity stop new events but keep history", func(t *testing.T) {
		b := e.newAgent(pid, tok)
		first := b.intent("repo-rev", "before")
		mustStatus(t, e.post(b, first), 201)
		mustStatus(t, e.do("POST", "/v1/admin/keys/"+b.KeyID+"/revoke", tok, nil), 200)
		r := e.post(b, b.intent("repo-rev", "after"))
		mustStatus(t, r, 403)
		if r.code(t) != "sender_or_signing_key_not_active" {
			t.Fatalf("code %s", r.code(t))
		}
		c := e.newAgent(pid, tok)
		mustStatus(t, e.post(c, c.intent("repo-rev", "before")), 201) // the sender is now remembered active
		mustStatus(t, e.do("POST", "/v1/admin/identities/"+c.IdentityID+"/deactivate", tok, nil), 200)
		r = e.post(c, c.intent("repo-rev", "after"))
		mustStatus(t, r, 403)
		r = e.do("GET", "/v1/correspondence/events?repository_id=repo-rev", tok, nil)
		if !strings.Contains(string(r.Body), first.ID) {
			t.Fatal("history lost after revocation")
		}
	})
}

// TestRevokedTokenRefusedAtOnce: a token that has just been used (and so
// is cached) is refused by the very next request after DELETE returns.
func TestRevokedTokenRefusedAtOnce(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	appender := e.newToken(pid, "read", "append")
	id := e.do("GET", "/v1/whoami", appender, nil).json(t)["token_id"].(string)
	mustStatus(t, e.do("GET", "/v1/correspondence/events?repository_id=repo-tok", appender, nil), 200)
	mustStatus(t, e.do("POST", "/v1/correspondence/events", appender, eventJSON(t, a.intent("repo-tok", "before"))), 201)
	mustStatus(t, e.do("DELETE", "/v1/admin/tokens/"+id, tok, nil), 204)
	for _, r := range []resp{
		e.do("GET", "/v1/correspondence/events?repository_id=repo-tok", appender, nil),
		e.do("POST", "/v1/correspondence/events", appender, eventJSON(t, a.intent("repo-tok", "after"))),
	} {
		mustStatus(t, r, 401)
	}
	mustStatus(t, e.do("GET", "/v1/correspondence/events?repository_id=repo-tok", tok, nil), 200)
}

func TestPostWarningsAndLineage(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	open := a.event("repo", "t", correspondence.KindClaimOpen,
		obj("claim_id", newUUID(), "generation", 1, "expires_at", "2999-01-01T00:00:00.000Z"), nil, "docs")
	claimID, _ := open.Body.Get("claim_id")
	renew := a.event("repo", "t", correspondence.KindClaimRenew,
		obj("claim_id", claimID.Str, "generation", 2, "predecessor_event_id", open.ID, "expires_at", "2999-01-02T00:00:00.000Z"), []string{open.ID}, "docs")

	r := e.post(a, renew)
	mustStatus(t, r, 201)
	m := r.json(t)
	if m["lineage_status"] != "pending" {
		t.Fatalf("lineage_status %v", m["lineage_status"])
	}
	if !strings.Contains(string(r.Body), `"code":"claim_lineage_pending"`) {
		t.Errorf("no claim_lineage_pending warning: %s", r.Body)
	}
	if !jsonEqual(m["missing_parents"], []string{open.ID}) {
		t.Errorf("missing_parents %v", m["missing_parents"])
	}
	mustStatus(t, e.post(a, open), 201)
	r = e.do("GET", "/v1/correspondence/events?repository_id=repo", tok, nil)
	recs := r.json(t)["events"].([]any)
	for _, rec := range recs {
		rm := rec.(map[string]any)
		if rm["lineage_status"] != "valid" || len(rm["missing_parents"].([]any)) != 0 {
			t.Errorf("after the predecessor arrived: %v", rm)
		}
	}

	// Session fork: same (identity, device, session, seq), different ids.
	x := a.intent("repo", "one")
	y := a.intent("repo", "two")
	y.SessionSeq = x.SessionSeq
	_ = y.Sign(a.Priv)
	mustStatus(t, e.post(a, x), 201)
	r = e.post(a, y)
	mustStatus(t, r, 201)
	if !strings.Contains(string(r.Body), `"code":"session_fork"`) || !strings.Contains(string(r.Body), x.ID) {
		t.Errorf("no session_fork warning naming the other event: %s", r.Body)
	}
}

func TestEventsQueryAndPaging(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	var ids []string
	for i := 0; i < 5; i++ {
		thread := "t1"
		if i%2 == 1 {
			thread = "t2"
		}
		ev := a.event("repo", thread, correspondence.KindProgress, obj("summary", "step"), nil)
		mustStatus(t, e.post(a, ev), 201)
		ids = append(ids, ev.ID)
	}
	mustStatus(t, e.post(a, a.intent("other-repo", "elsewhere")), 201)

	cases := []struct {
		name   string
		query  string
		status int
		code   string
		ids    []string
		page   string
	}{
		{"all", "repository_id=repo", 200, "", ids, `{"after":null,"has_more":false,"next_after":"5"}`},
		{"limit 2", "repository_id=repo&limit=2", 200, "", ids[:2], `{"after":null,"has_more":true,"next_after":"2"}`},
		{"after 2 limit 2", "repository_id=repo&after=2&limit=2", 200, "", ids[2:4], `{"after":"2","has_more":true,"next_after":"4"}`},
		{"after end", "repository_id=repo&after=5", 200, "", nil, `{"after":"5","has_more":false,"next_after":"5"}`},
		{"thread", "repository_id=repo&thread_id=t2", 200, "", []string{ids[1], ids[3]}, `{"after":null,"has_more":false,"next_after":"4"}`},
		{"empty repo", "repository_id=none", 200, "", nil, `{"after":null,"has_more":false,"next_after":null}`},
		{"missing repository", "", 400, "repository_id_required", nil, ""},
		{"unknown parameter", "repository_id=repo&cursor=1", 400, "query_invalid", nil, ""},
		{"repeated parameter", "repository_id=repo&limit=1&limit=2", 400, "query_invalid", nil, ""},
		{"after leading zero", "repository_id=repo&after=01", 400, "after_invalid", nil, ""},
		{"after negative", "repository_id=repo&after=-1", 400, "after_invalid", nil, ""},
		{"limit 0", "repository_id=repo&limit=0", 400, "limit_invalid", nil, ""},
		{"limit 201", "repository_id=repo&limit=201", 400, "limit_invalid", nil, ""},
		{"limit 200", "repository_id=repo&limit=200", 200, "", ids, `{"after":null,"has_more":false,"next_after":"5"}`},
		{"bad repository id", "repository_id=a%20b", 400, "repository_id_invalid", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", "/v1/correspondence/events?"+tc.query, tok, nil)
			mustStatus(t, r, tc.status)
			if tc.code != "" {
				if r.code(t) != tc.code {
					t.Fatalf("code %s, want %s", r.code(t), tc.code)
				}
				return
			}
			m := r.json(t)
			var got []string
			for _, rec := range m["events"].([]any) {
				got = append(got, rec.(map[string]any)["event"].(map[string]any)["event_id"].(string))
			}
			if strings.Join(got, ",") != strings.Join(tc.ids, ",") {
				t.Errorf("ids %v, want %v", got, tc.ids)
			}
			if pg, _ := jsonMarshal(m["page"]); pg != tc.page {
				t.Errorf("page %s, want %s", pg, tc.page)
			}
		})
	}
}

func TestNegotiationAndHeaders(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.intent("repo", "hi")), 201)
	path := "/v1/correspondence/events?repository_id=repo"

	// Content-Type values (spec §9): what is served, with charset=utf-8; a
	// 406 is an error body, plain JSON.
	const (
		vnd  = "application/vnd.agenttool.correspondence+json; charset=utf-8"
		js   = "application/json; charset=utf-8"
		atom = "application/atom+xml; charset=utf-8"
	)
	cases := []struct {
		accept string
		status int
		ct     string
	}{
		{"", 200, vnd},
		{"*/*", 200, vnd},
		{"application/json", 200, js},
		{"application/atom+xml", 200, atom},
		{"application/json;q=0.5, application/atom+xml;q=0.9", 200, atom},
		{"application/*;q=0.1, application/json;q=0.8", 200, js},
		{"application/json; charset=utf-8", 200, js},
		{`application/json; charset="UTF-8"`, 200, js},
		{"application/json; charset=iso-8859-1", 406, js},
		{"text/html", 406, js},
		{"application/json;q=0", 406, js},
		{"application/json;q=0, */*;q=0.1", 200, vnd},
		// A media-range parameter before q other than charset=utf-8
		// matches no offer.
		{"application/json;profile=other", 406, js},
		{"application/atom+xml;type=entry", 406, js},
		{"application/json;profile=other, application/atom+xml;q=0.5", 200, atom},
		{"application/json;charset=utf-8;profile=x", 406, js},
		// Parameters after q are accept extensions, ignored.
		{"application/json;q=1;charset=iso-8859-1", 200, js},
		{"application/atom+xml;q=0.5;type=entry, application/json;q=0.4", 200, atom},
		// A malformed q invalidates its range: it matches nothing, the
		// others still count (so */* alone picks the default, vendor JSON).
		{"application/vnd.agenttool.correspondence+json;q=wat, */*", 200, vnd},
		{"application/atom+xml;q=wat, application/json;q=0.1", 200, js},
		{"application/atom+xml;q=1.0001, application/json;q=0.1", 200, js},
		{"application/atom+xml;q=2, application/json;q=0.1", 200, js},
		{"application/json;q=wat", 406, js},
		{"application/json;q=0.001", 200, js},
		{"application/json;q=1.000", 200, js},
		// The charset=utf-8 range is more specific than the bare type.
		{"application/json;charset=utf-8;q=0, application/json", 406, js},
	}
	for _, tc := range cases {
		t.Run("accept "+tc.accept, func(t *testing.T) {
			r := e.do("GET", path, tok, nil, "Accept", tc.accept)
			mustStatus(t, r, tc.status)
			if got := r.Header.Get("Content-Type"); got != tc.ct {
				t.Errorf("Content-Type %q, want %q", got, tc.ct)
			}
			if tc.status == 406 && r.code(t) != "representation_not_acceptable" {
				t.Errorf("code %s", r.code(t))
			}
		})
	}

	r := e.do("GET", path, tok, nil)
	h := r.Header
	for name, want := range map[string]string{
		"Vary":                   "Accept, Authorization",
		"Cache-Control":          "private, no-cache, no-transform",
		"X-Content-Type-Options": "nosniff",
		"Link-Template": `"http://relay.test/v1/wake/voice?identity_id={identity_id}&keys=correspondence";rel="https://agenttool.dev/rels/correspondence-live";type="text/event-stream", ` +
			`"http://relay.test/v1/log/` + pid + `/proof/inclusion{?received_seq,tree_size}";rel="https://agenttool.dev/rels/log-inclusion-proof";type="application/json"`,
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// self is the request's own URL; the other links name the project, so
	// that they work without a token for a public project too.
	wantLink := `<http://relay.test/v1/correspondence/events?repository_id=repo>; rel="self"; type="application/vnd.agenttool.correspondence+json", ` +
		`<http://relay.test/v1/correspondence/events.atom?project_id=` + pid + `&repository_id=repo>; rel="alternate"; type="application/atom+xml", ` +
		`<http://relay.test/v1/correspondence/voice?project_id=` + pid + `&repository_id=repo>; rel="https://agenttool.dev/rels/correspondence-voice"; type="application/vnd.agenttool.correspondence+json", ` +
		`<http://relay.test/v1/correspondence/claims?project_id=` + pid + `&repository_id=repo>; rel="https://agenttool.dev/rels/active-claims"; type="application/vnd.agenttool.correspondence+json", ` +
		`<http://relay.test/v1/log/` + pid + `/checkpoint>; rel="https://agenttool.dev/rels/log-checkpoint"; type="text/plain", ` +
		`<http://relay.test/v1/profile>; rel="describedby"`
	if got := h.Get("Link"); got != wantLink {
		t.Errorf("Link =\n%s\nwant\n%s", got, wantLink)
	}
	etag := h.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		t.Fatalf("ETag %q is not strong", etag)
	}
	if r2 := e.do("GET", path, tok, nil); r2.Header.Get("ETag") != etag || !bytes.Equal(r2.Body, r.Body) {
		t.Errorf("ETag or bytes not stable across identical reads")
	}
	for _, inm := range []string{etag, "W/" + etag, `"nope", ` + etag, "*"} {
		r304 := e.do("GET", path, tok, nil, "If-None-Match", inm)
		mustStatus(t, r304, 304)
		if len(r304.Body) != 0 || r304.Header.Get("ETag") != etag || r304.Header.Get("Content-Type") != "application/vnd.agenttool.correspondence+json; charset=utf-8" ||
			r304.Header.Get("Cache-Control") != "private, no-cache, no-transform" || r304.Header.Get("Vary") != "Accept, Authorization" {
			t.Errorf("304 for %q: body %q etag %q", inm, r304.Body, r304.Header.Get("ETag"))
		}
	}
	mustStatus(t, e.do("GET", path, tok, nil, "If-None-Match", `"other"`), 200)
	// If-Match (RFC 9110 §13.1.1, strong comparison) is evaluated first.
	for _, im := range []string{etag, "*", `"nope", ` + etag} {
		if r := e.do("GET", path, tok, nil, "If-Match", im); r.Status != 200 || !bytes.Equal(r.Body, e.do("GET", path, tok, nil).Body) {
			t.Errorf("If-Match %q: %d, want 200 with the representation", im, r.Status)
		}
	}
	mustStatus(t, e.do("GET", path, tok, nil, "If-None-Match", `"x,*,y"`), 200) // one tag, not a list with *
	for _, im := range []string{`"nope"`, "W/" + etag, " ,", `"x,*,y"`, etag + " junk"} {
		r412 := e.do("GET", path, tok, nil, "If-Match", im, "If-None-Match", etag)
		mustStatus(t, r412, 412)
		if !strings.Contains(string(r412.Body), `"error":"precondition_failed"`) {
			t.Errorf("If-Match %q: body %s, want precondition_failed", im, r412.Body)
		}
	}
	mustStatus(t, e.do("HEAD", path, tok, nil, "If-Match", `"nope"`), 412)
	if atom := e.do("GET", path, tok, nil, "Accept", "application/atom+xml"); atom.Header.Get("ETag") == etag {
		t.Error("Atom and JSON share an ETag")
	}

	head := e.do("HEAD", path, tok, nil)
	mustStatus(t, head, 200)
	if len(head.Body) != 0 || head.Header.Get("ETag") != etag || head.Header.Get("Link") != wantLink {
		t.Errorf("HEAD differs from GET: %v", head.Header)
	}

	// A new append changes the bytes and so the ETag.
	mustStatus(t, e.post(a, a.intent("repo", "again")), 201)
	if r3 := e.do("GET", path, tok, nil, "If-None-Match", etag); r3.Status != 200 {
		t.Errorf("stale ETag still matched: %d", r3.Status)
	}
}

func jsonMarshal(v any) (string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", nil
	}
	keys := []string{"after", "has_more", "next_after"}
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		x, _ := jsonEncode(m[k])
		b.WriteString(`"` + k + `":` + x)
	}
	b.WriteString("}")
	return b.String(), nil
}

// TestWeakPublicKeyRefused: a small-order key would let anyone forge
// events (RFC 8032 verification accepts R = identity, S = 0 for it).
func TestWeakPublicKeyRefused(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	r := e.do("POST", "/v1/admin/projects/"+pid+"/identities", tok, []byte(`{}`))
	mustStatus(t, r, 201)
	ident := r.json(t)["identity_id"].(string)
	for _, k := range []string{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		r = e.do("POST", "/v1/admin/identities/"+ident+"/keys", tok, []byte(`{"public_key_b64url":"`+k+`"}`))
		mustStatus(t, r, 400)
		if r.code(t) != "public_key_invalid" {
			t.Fatalf("code %s", r.code(t))
		}
	}
}

// TestSelfLinkCannotBeInjected: the self link re-encodes the query, so a
// '>' or ',' in a parameter cannot close the link and add another.
func TestSelfLinkCannotBeInjected(t *testing.T) {
	e := newEnv(t)
	_, tok := e.newProject("")
	r := e.do("GET", "/v1/correspondence/events?repository_id=a%3E,%3Chttps://evil.example/x", tok, nil)
	mustStatus(t, r, 200)
	link := r.Header.Get("Link")
	if strings.Contains(link, "<https://evil.example") || strings.Count(link, "<") != 6 { // self, alternate, voice, claims, log-checkpoint, describedby
		t.Fatalf("Link header carries an injected target: %s", link)
	}
	if !strings.HasPrefix(link, `<http://relay.test/v1/correspondence/events?repository_id=a%3E%2C%3Chttps%3A%2F%2Fevil.example%2Fx>; rel="self"`) {
		t.Fatalf("self link: %s", link)
	}
}

// TestAmbiguousHeadersRefused: two Content-Types, a content coding, or two
// Authorization headers are never resolved by picking one.
func TestAmbiguousHeadersRefused(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	body := eventJSON(t, a.intent("repo", "x"))
	send := func(h http.Header) int {
		req, _ := http.NewRequest("POST", e.url+"/v1/correspondence/events", bytes.NewReader(body))
		req.Header = h
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	h := http.Header{"Authorization": {"Bearer " + tok}, "Content-Type": {"application/json", "text/plain"}}
	if s := send(h); s != 415 {
		t.Errorf("two Content-Types: %d", s)
	}
	h = http.Header{"Authorization": {"Bearer " + tok}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	if s := send(h); s != 415 {
		t.Errorf("Content-Encoding gzip: %d", s)
	}
	h = http.Header{"Authorization": {"Bearer " + tok, "Bearer nope"}, "Content-Type": {"application/json"}}
	if s := send(h); s != 401 {
		t.Errorf("two Authorization headers: %d", s)
	}
	h = http.Header{"Authorization": {"Bearer " + tok}, "Content-Type": {"application/json"}}
	if s := send(h); s != 201 {
		t.Errorf("plain request: %d", s)
	}
}

// TestKeyForInactiveIdentityRefused: a key added to a deactivated identity
// could never sign; it is refused, and a CR/LF-split key is not a second
// spelling of a valid one.
func TestKeyForInactiveIdentityRefused(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	r := e.do("POST", "/v1/admin/projects/"+pid+"/identities", tok, []byte(`{}`))
	ident := r.json(t)["identity_id"].(string)
	r = e.do("POST", "/v1/admin/identities/"+ident+"/keys", tok, []byte(`{"public_key_b64url":"A6EHv_POEL4dcN0Y50v\r\nAmWfk1jCbpQ1fHdyGZBJVMbg"}`))
	mustStatus(t, r, 400)
	if r.code(t) != "public_key_invalid" {
		t.Fatalf("CR/LF key: %s", r.Body)
	}
	mustStatus(t, e.do("POST", "/v1/admin/identities/"+ident+"/deactivate", tok, nil), 200)
	r = e.do("POST", "/v1/admin/identities/"+ident+"/keys", tok, []byte(`{"public_key_b64url":"A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"}`))
	mustStatus(t, r, 400)
	if r.code(t) != "identity_not_active" {
		t.Fatalf("inactive identity: %s", r.Body)
	}
}
