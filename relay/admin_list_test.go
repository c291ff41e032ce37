package relay_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// listAll follows a registry listing page by page (limit 2) through
// page.next_after and the Link rel="next" header, and returns every item.
func listAll(t *testing.T, e *env, path, tok, member string) []map[string]any {
	t.Helper()
	var items []map[string]any
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	url := path + sep + "limit=2"
	for range 20 {
		r := e.do("GET", url, tok, nil)
		mustStatus(t, r, http.StatusOK)
		body := r.json(t)
		page := body["page"].(map[string]any)
		for _, it := range body[member].([]any) {
			items = append(items, it.(map[string]any))
		}
		if page["has_more"] != true {
			if r.Header.Get("Link") != "" {
				t.Fatalf("last page has a Link: %s", r.Header.Get("Link"))
			}
			return items
		}
		next := page["next_after"].(string)
		link := r.Header.Get("Link")
		if !strings.Contains(link, "after="+next) || !strings.HasSuffix(link, `>; rel="next"`) {
			t.Fatalf("Link %q does not lead to after=%s", link, next)
		}
		url = path + sep + "limit=2&after=" + next
	}
	t.Fatal("listing does not end")
	return nil
}

func ids(items []map[string]any, key string) []string {
	var out []string
	for _, it := range items {
		out = append(out, it[key].(string))
	}
	return out
}

// TestAdminListings: tokens, identities and keys of a project are listed
// for its admin token and the operator token, every status included, in
// id order, paged; a token's secret and hash never appear.
func TestAdminListings(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	var tokenIDs []string
	var secrets []string
	for _, scopes := range []string{`["read"]`, `["append"]`, `["read","append"]`, `["admin"]`} {
		r := e.do("POST", "/v1/admin/projects/"+pid+"/tokens", tok, []byte(`{"scopes":`+scopes+`}`))
		mustStatus(t, r, 201)
		tokenIDs = append(tokenIDs, r.json(t)["token_id"].(string))
		secrets = append(secrets, r.json(t)["token"].(string))
	}
	revokedID := tokenIDs[1]
	mustStatus(t, e.do("DELETE", "/v1/admin/tokens/"+revokedID, tok, nil), 204)
	own := e.do("GET", "/v1/whoami", tok, nil).json(t)["token_id"].(string)
	tokenIDs = append(tokenIDs, own)
	slices.Sort(tokenIDs)

	for _, bearer := range []string{tok, operatorToken} {
		tokens := listAll(t, e, "/v1/admin/projects/"+pid+"/tokens", bearer, "tokens")
		if got := ids(tokens, "token_id"); !slices.Equal(got, tokenIDs) {
			t.Fatalf("token ids %v, want %v", got, tokenIDs)
		}
		for _, it := range tokens {
			if _, ok := it["token"]; ok || len(it) != 4 {
				t.Fatalf("token row %v: want exactly token_id, scopes, revoked, created_at", it)
			}
			if _, err := time.Parse("2006-01-02T15:04:05.000Z", it["created_at"].(string)); err != nil {
				t.Fatalf("created_at %v: %v", it["created_at"], err)
			}
			if revoked := it["revoked"].(bool); revoked != (it["token_id"] == revokedID) {
				t.Fatalf("token row %v: revoked should be %v", it, !revoked)
			}
		}
		raw := e.do("GET", "/v1/admin/projects/"+pid+"/tokens", bearer, nil).Body
		for _, s := range secrets {
			if strings.Contains(string(raw), s) {
				t.Fatalf("a listing carries a token secret: %s", raw)
			}
		}
	}

	a := e.newAgent(pid, tok)
	second := e.newAgent(pid, tok)
	mustStatus(t, e.do("POST", "/v1/admin/identities/"+second.IdentityID+"/deactivate", tok, nil), 200)
	idents := listAll(t, e, "/v1/admin/projects/"+pid+"/identities", operatorToken, "identities")
	want := []string{a.IdentityID, second.IdentityID}
	slices.Sort(want)
	if got := ids(idents, "identity_id"); !slices.Equal(got, want) {
		t.Fatalf("identity ids %v, want %v", got, want)
	}
	for _, it := range idents {
		wantStatus := map[bool]string{true: "inactive", false: "active"}[it["identity_id"] == second.IdentityID]
		if it["status"] != wantStatus || it["project_id"] != pid || it["created_at"] == nil {
			t.Fatalf("identity row %v, want status %s", it, wantStatus)
		}
	}

	// A second key for a, the first revoked.
	k2 := e.do("POST", "/v1/admin/identities/"+a.IdentityID+"/keys", tok, []byte(`{"public_key_b64url":"A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"}`))
	mustStatus(t, k2, 201)
	mustStatus(t, e.do("POST", "/v1/admin/keys/"+a.KeyID+"/revoke", tok, nil), 200)
	wantKeys := []string{a.KeyID, k2.json(t)["signing_key_id"].(string)}
	slices.Sort(wantKeys)
	for _, path := range []string{"/v1/admin/identities/" + a.IdentityID + "/keys", "/v1/admin/identities/" + a.IdentityID + "/keys?project_id=" + pid} {
		bearer := tok
		if strings.Contains(path, "project_id") {
			bearer = operatorToken
		}
		keys := listAll(t, e, path, bearer, "keys")
		if got := ids(keys, "signing_key_id"); !slices.Equal(got, wantKeys) {
			t.Fatalf("%s: key ids %v, want %v", path, got, wantKeys)
		}
		for _, it := range keys {
			wantStatus := map[bool]string{true: "revoked", false: "active"}[it["signing_key_id"] == a.KeyID]
			if it["status"] != wantStatus || it["identity_id"] != a.IdentityID || len(it["public_key_b64url"].(string)) != 43 {
				t.Fatalf("key row %v, want status %s", it, wantStatus)
			}
		}
	}

	for _, tc := range []struct{ path, tok, code string }{
		{"/v1/admin/identities/" + a.IdentityID + "/keys", operatorToken, "project_id_required"},
		{"/v1/admin/projects/" + pid + "/tokens?after=", tok, "after_invalid"},
		{"/v1/admin/projects/" + pid + "/tokens?limit=0", tok, "limit_invalid"},
		{"/v1/admin/projects/" + pid + "/identities?state=x", tok, "query_invalid"},
		{"/v1/admin/projects/" + pid + "/tokens?after=%FF", tok, "after_invalid"},
		{"/v1/admin/projects/" + pid + "/tokens?after=%00", tok, "after_invalid"},
		{"/v1/admin/projects/" + pid + "/identities?after=%C3%28", tok, "after_invalid"},
		{"/v1/admin/identities/" + a.IdentityID + "/keys?after=a%20b", tok, "after_invalid"},
	} {
		wantError(t, e.do("GET", tc.path, tc.tok, nil), 400, tc.code)
	}
	for _, path := range []string{"/v1/admin/projects/00000000-0000-4000-8000-000000000000/tokens", "/v1/admin/projects/00000000-0000-4000-8000-000000000000/identities"} {
		wantError(t, e.do("GET", path, operatorToken, nil), 404, "not_found")
	}
	wantError(t, e.do("GET", "/v1/admin/identities/00000000-0000-4000-8000-000000000000/keys", tok, nil), 404, "not_found")
	wantError(t, e.do("GET", "/v1/admin/projects/"+pid+"/tokens", e.newToken(pid, "read", "append"), nil), 403, "scope_insufficient")
	for _, accept := range []string{"text/html", "application/json;q=0", "application/atom+xml"} {
		wantError(t, e.do("GET", "/v1/admin/projects/"+pid+"/identities", tok, nil, "Accept", accept), 406, "representation_not_acceptable")
	}
	mustStatus(t, e.do("GET", "/v1/admin/projects/"+pid+"/identities", tok, nil, "Accept", "application/*"), 200)
}

// TestAdminProjectList: GET /v1/admin/projects lists every project with
// its visibility for the operator token, paged like the other listings;
// a project token, even with admin, is refused.
func TestAdminProjectList(t *testing.T) {
	e := newEnv(t)
	var want []string
	for range 3 {
		pid, _ := e.newProject("")
		want = append(want, pid)
	}
	public := want[1]
	mustStatus(t, e.do("PATCH", "/v1/admin/projects/"+public, operatorToken, []byte(`{"visibility":"public"}`)), 200)
	slices.Sort(want)

	projects := listAll(t, e, "/v1/admin/projects", operatorToken, "projects")
	if got := ids(projects, "project_id"); !slices.Equal(got, want) {
		t.Fatalf("project ids %v, want %v", got, want)
	}
	for _, it := range projects {
		wantVis := map[bool]string{true: "public", false: "private"}[it["project_id"] == public]
		if it["visibility"] != wantVis || len(it) != 3 {
			t.Fatalf("project row %v: want exactly project_id, visibility %s, created_at", it, wantVis)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", it["created_at"].(string)); err != nil {
			t.Fatalf("created_at %v: %v", it["created_at"], err)
		}
	}

	_, tok := e.newProject("")
	wantError(t, e.do("GET", "/v1/admin/projects", tok, nil), 403, "operator_token_required")
	wantError(t, e.do("GET", "/v1/admin/projects", "", nil), 401, "unauthorized")
	wantError(t, e.do("GET", "/v1/admin/projects?limit=201", operatorToken, nil), 400, "limit_invalid")
	wantError(t, e.do("GET", "/v1/admin/projects?visibility=public", operatorToken, nil), 400, "query_invalid")
	mustStatus(t, e.do("HEAD", "/v1/admin/projects", operatorToken, nil), 200)
}
