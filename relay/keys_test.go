package relay_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
)

// linkRel returns the target of the Link header's member with rel, as a
// path and query relative to the relay's public base ("" when absent).
func linkRel(t *testing.T, h string, rel string) string {
	t.Helper()
	m := regexp.MustCompile(`<([^>]*)>; rel="` + rel + `"`).FindStringSubmatch(h)
	if m == nil {
		return ""
	}
	u, err := url.Parse(m[1])
	if err != nil || u.Scheme+"://"+u.Host != "http://relay.test" {
		t.Fatalf("Link rel=%s %q is not under the public base", rel, m[1])
	}
	return u.RequestURI()
}

func registryPage(t *testing.T, r resp) relay.RegistryKeysJSON {
	t.Helper()
	var out relay.RegistryKeysJSON
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("keys page: %v %s", err, r.Body)
	}
	return out
}

// TestRegistryKeysRoute: GET /v1/correspondence/keys pages a project's
// keys in ascending signing_key_id through limit, after and Link
// rel="next"; every page has a strong ETag (304 on If-None-Match) and
// rel="self"; a revoked key shows its revoked_at, an imported one its
// source; another project's token gets 404, a public project's keys are
// readable without a token and a private project's are not (401); an
// unknown parameter, a bad limit or after are 400.
func TestRegistryKeysRoute(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	var local []string
	for range 3 {
		local = append(local, e.newAgent(pid, tok).KeyID)
	}
	revoked := local[1]
	mustStatus(t, e.do("POST", "/v1/admin/keys/"+revoked+"/revoke", tok, []byte(`{}`)), 200)

	// One key imported from a peer link's registry.
	r := e.do("POST", "/v1/admin/projects/"+pid+"/peers", tok, []byte(`{"remote_url":"https://relay-b.example.org","token":"acr_remote"}`))
	mustStatus(t, r, 201)
	peerID := r.json(t)["peer_id"].(string)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	imported := store.RegistryKey{SigningKeyID: newUUID(), IdentityID: newUUID(), PublicKey: correspondence.EncodePublicKey(pub),
		Status: store.StatusActive, CreatedAt: created, DisplayName: "remote agent", IdentityStatus: store.StatusActive, IdentityCreatedAt: created}
	if _, err := e.st.ImportKey(context.Background(), pid, peerID, imported); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(local), imported.SigningKeyID)
	slices.Sort(all)

	// Paging: two per page, following rel="next".
	var got []relay.RegistryKeyJSON
	path := "/v1/correspondence/keys?limit=2"
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("rel=next never ends")
		}
		r := e.do("GET", path, tok, nil)
		mustStatus(t, r, 200)
		page := registryPage(t, r)
		if page.ProjectID != pid || len(page.Keys) > 2 {
			t.Fatalf("page %s: project %s, %d keys", path, page.ProjectID, len(page.Keys))
		}
		got = append(got, page.Keys...)
		link := r.Header.Get("Link")
		if self := linkRel(t, link, "self"); self != path {
			t.Errorf("rel=self %q, want %q", self, path)
		}
		next := linkRel(t, link, "next")
		if page.Page.HasMore != (next != "") {
			t.Fatalf("has_more %v but rel=next %q", page.Page.HasMore, next)
		}
		if next != "" {
			q, _ := url.ParseQuery(next[strings.IndexByte(next, '?')+1:])
			if q.Get("after") != *page.Page.NextAfter || q.Get("after") != page.Keys[len(page.Keys)-1].SigningKeyID || q.Get("limit") != "2" {
				t.Errorf("rel=next %q does not continue after %s with limit 2", next, *page.Page.NextAfter)
			}
		}
		etag := r.Header.Get("ETag")
		if etag == "" || strings.HasPrefix(etag, "W/") {
			t.Errorf("ETag %q, want a strong one", etag)
		}
		nm := e.do("GET", path, tok, nil, "If-None-Match", etag)
		if nm.Status != 304 || len(nm.Body) != 0 {
			t.Errorf("If-None-Match: %d %q, want an empty 304", nm.Status, nm.Body)
		}
		path = next
	}
	var ids []string
	for _, k := range got {
		ids = append(ids, k.SigningKeyID)
		switch k.SigningKeyID {
		case revoked:
			if k.Status != store.StatusRevoked || k.RevokedAt == nil {
				t.Errorf("revoked key listed %s, revoked_at %v", k.Status, k.RevokedAt)
			} else if at, code := correspondence.ParseTimestamp(*k.RevokedAt); code != "" || time.Since(at) > time.Minute {
				t.Errorf("revoked_at %q", *k.RevokedAt)
			}
		case imported.SigningKeyID:
			if k.Source != "imported" || k.Identity.Source != "imported" || k.Status != store.StatusActive || k.RevokedAt != nil ||
				k.PublicKeyB64URL != imported.PublicKey || k.Identity.DisplayName != "remote agent" || k.CreatedAt != correspondence.FormatTimestamp(created) {
				t.Errorf("imported key listed %+v", k)
			}
		default:
			if k.Source != "local" || k.Identity.Source != "local" || k.Status != store.StatusActive || k.RevokedAt != nil {
				t.Errorf("local key listed %+v", k)
			}
		}
	}
	if !slices.Equal(ids, all) {
		t.Fatalf("paged keys %v, want %v in ascending order", ids, all)
	}

	// The ETag follows a change: a revocation is a new representation.
	r = e.do("GET", "/v1/correspondence/keys", tok, nil)
	etag := r.Header.Get("ETag")
	mustStatus(t, e.do("POST", "/v1/admin/keys/"+local[0]+"/revoke", tok, []byte(`{}`)), 200)
	if r := e.do("GET", "/v1/correspondence/keys", tok, nil, "If-None-Match", etag); r.Status != 200 || r.Header.Get("ETag") == etag {
		t.Errorf("after a revocation: %d, ETag %q (was %q)", r.Status, r.Header.Get("ETag"), etag)
	}

	// Another project's token: the project is not found for it.
	other, otherTok := e.newProject("")
	if r := e.do("GET", "/v1/correspondence/keys?project_id="+pid, otherTok, nil); r.Status != 404 {
		t.Errorf("another project's token: %d %s, want 404", r.Status, r.Body)
	}
	if r := e.do("GET", "/v1/correspondence/keys", otherTok, nil); r.Status != 200 || len(registryPage(t, r).Keys) != 0 || registryPage(t, r).ProjectID != other {
		t.Errorf("own (empty) registry: %d %s", r.Status, r.Body)
	}
	// A token without the read scope.
	if r := e.do("GET", "/v1/correspondence/keys", e.newToken(pid, "append"), nil); r.Status != 403 {
		t.Errorf("append-only token: %d %s, want 403", r.Status, r.Body)
	}

	// Without a token: a public project's registry, not a private one's.
	pub1, pubTok := e.newProjectVisible("public")
	e.newAgent(pub1, pubTok)
	if r := e.do("GET", "/v1/correspondence/keys?project_id="+pub1, "", nil); r.Status != 200 || len(registryPage(t, r).Keys) != 1 {
		t.Errorf("public project without a token: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{"/v1/correspondence/keys?project_id=" + pid, "/v1/correspondence/keys", "/v1/correspondence/keys?project_id=" + newUUID()} {
		if r := e.do("GET", path, "", nil); r.Status != 401 {
			t.Errorf("%s without a token: %d %s, want 401", path, r.Status, r.Body)
		}
	}

	// Bad queries.
	for _, tc := range []struct{ name, query, code string }{
		{"unknown parameter", "?page=2", "query_invalid"},
		{"repeated parameter", "?limit=1&limit=2", "query_invalid"},
		{"limit zero", "?limit=0", "limit_invalid"},
		{"limit too big", "?limit=201", "limit_invalid"},
		{"limit not a number", "?limit=ten", "limit_invalid"},
		{"after empty", "?after=", "after_invalid"},
		{"after with a space", "?after=a%20b", "after_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", "/v1/correspondence/keys"+tc.query, tok, nil)
			if r.Status != 400 || r.code(t) != tc.code {
				t.Errorf("%s: %d %s, want 400 %s", tc.query, r.Status, r.Body, tc.code)
			}
		})
	}
}
