package relay

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Registry listings: what an administrator needs to find the id to
// revoke or deactivate. Each pages in ascending id order with after (the
// id that ended the previous page) and limit (1–200, default 100), answers
// {<items>, page: {after, next_after, has_more}} with a Link rel="next"
// while has_more, and never carries a token's secret or hash.

type tokenRowJSON struct {
	TokenID   string   `json:"token_id"`
	Scopes    []string `json:"scopes"`
	Revoked   bool     `json:"revoked"`
	CreatedAt string   `json:"created_at"`
}

type identityRowJSON struct {
	identityJSON
	CreatedAt string `json:"created_at"`
}

type keyRowJSON struct {
	keyJSON
	CreatedAt string `json:"created_at"`
}

// maxListAfter bounds the after parameter of a registry listing (ids are
// UUIDs or token ids, far shorter); it is printable ASCII, as every id.
const maxListAfter = 200

// listPage reads a listing's after and limit, asks list for one row more
// than limit (to know has_more), and writes the page: item turns a row
// into its JSON, id gives the row's id for next_after. Errors: 400
// query_invalid, after_invalid, limit_invalid; the store's.
func listPage[T, J any](s *Server, w http.ResponseWriter, r *http.Request, member string,
	list func(ctx context.Context, after string, limit int) ([]T, error), id func(T) string, item func(T) J, extra ...string) {
	if _, ok := negotiate(r, []string{mediaJSON}); !ok {
		s.writeError(w, r, errNotAcceptable)
		return
	}
	q, err := readQuery(r, append([]string{"after", "limit"}, extra...)...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var afterPtr *string
	after, ok := q["after"]
	if ok {
		if after == "" || len(after) > maxListAfter || strings.ContainsFunc(after, func(c rune) bool { return c <= ' ' || c > '~' }) {
			s.writeError(w, r, errAfterNotListID)
			return
		}
		afterPtr = &after
	}
	limit, err := pageLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rows, err := list(r.Context(), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	items := make([]J, 0, len(rows))
	for _, row := range rows {
		items = append(items, item(row))
	}
	page := wire.Page{After: afterPtr, NextAfter: afterPtr, HasMore: more}
	if n := len(rows); n > 0 {
		last := id(rows[n-1])
		page.NextAfter = &last
	}
	if more {
		s.setNextLink(w, r, q, *page.NextAfter)
	}
	s.writeListing(w, r, map[string]any{member: items, "page": page})
}

// setNextLink sets Link rel="next" to the request's own path and query q
// with after replaced (paged listings: handoffs, registry).
func (s *Server) setNextLink(w http.ResponseWriter, r *http.Request, q map[string]string, after string) {
	nq := url.Values{}
	for k, v := range q {
		nq.Set(k, v)
	}
	nq.Set("after", after)
	w.Header().Set("Link", "<"+s.publicBase(r)+r.URL.EscapedPath()+"?"+nq.Encode()+`>; rel="next"`)
}

// listedProject is the {project_id} a project listing names, once the
// bearer may administer it (operator, or the project's admin scope) and,
// for the operator token (which may name any project), once it exists:
// 404 otherwise.
func (s *Server) listedProject(r *http.Request) (string, error) {
	projectID := mux.Vars(r)["project_id"]
	p := principalFrom(r.Context())
	if err := requireAdminOf(p, projectID); err != nil {
		return "", err
	}
	if p.Operator {
		if _, err := s.st.GetProject(r.Context(), projectID); err != nil {
			return "", err
		}
	}
	return projectID, nil
}

// handleTokenList: GET /v1/admin/projects/{project_id}/tokens → the
// project's tokens, revoked ones included: {tokens: [{token_id, scopes,
// revoked, created_at}], page}. Operator or the project's admin scope.
func (s *Server) handleTokenList(w http.ResponseWriter, r *http.Request) {
	projectID, err := s.listedProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	listPage(s, w, r, "tokens",
		func(ctx context.Context, after string, limit int) ([]store.Token, error) {
			return s.st.ListTokens(ctx, projectID, after, limit)
		},
		func(t store.Token) string { return t.ID },
		func(t store.Token) tokenRowJSON {
			return tokenRowJSON{TokenID: t.ID, Scopes: nonNil(t.Scopes), Revoked: t.Revoked, CreatedAt: correspondence.FormatTimestamp(t.CreatedAt)}
		})
}

// handleIdentityList: GET /v1/admin/projects/{project_id}/identities →
// the project's identities of every status: {identities: [{identity_id,
// project_id, display_name?, status, created_at}], page}.
func (s *Server) handleIdentityList(w http.ResponseWriter, r *http.Request) {
	projectID, err := s.listedProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	listPage(s, w, r, "identities",
		func(ctx context.Context, after string, limit int) ([]store.Identity, error) {
			return s.st.ListIdentities(ctx, projectID, after, limit)
		},
		func(i store.Identity) string { return i.ID },
		func(i store.Identity) identityRowJSON {
			return identityRowJSON{identityOut(i), correspondence.FormatTimestamp(i.CreatedAt)}
		})
}

// handleKeyList: GET /v1/admin/identities/{identity_id}/keys → the
// identity's signing keys of every status: {keys: [{signing_key_id,
// identity_id, public_key_b64url, status, created_at}], page}. The
// project is the bearer's, or ?project_id= with the operator token, as
// for the other identity routes; 404 for an identity not in it.
func (s *Server) handleKeyList(w http.ResponseWriter, r *http.Request) {
	q, err := readQuery(r, "project_id", "after", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pid, err := adminProjectOf(principalFrom(r.Context()), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ident, err := s.st.GetIdentity(r.Context(), pid, mux.Vars(r)["identity_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	listPage(s, w, r, "keys",
		func(ctx context.Context, after string, limit int) ([]store.SigningKey, error) {
			return s.st.ListKeys(ctx, ident.ProjectID, ident.ID, after, limit)
		},
		func(k store.SigningKey) string { return k.ID },
		func(k store.SigningKey) keyRowJSON {
			return keyRowJSON{keyOut(k), correspondence.FormatTimestamp(k.CreatedAt)}
		}, "project_id")
}

type projectRowJSON struct {
	projectStateJSON
	CreatedAt string `json:"created_at"`
}

// handleProjectList: GET /v1/admin/projects → every project of the relay:
// {projects: [{project_id, visibility, created_at}], page}. The operator
// token only: a project token never learns of other projects (spec §11),
// and its own project id is in GET /v1/whoami.
func (s *Server) handleProjectList(w http.ResponseWriter, r *http.Request) {
	if !principalFrom(r.Context()).Operator {
		s.writeError(w, r, errOperatorOnly)
		return
	}
	listPage(s, w, r, "projects",
		func(ctx context.Context, after string, limit int) ([]registry.ProjectRow, error) {
			return registry.ListProjects(ctx, s.st, after, limit)
		},
		func(p registry.ProjectRow) string { return p.ID },
		func(p registry.ProjectRow) projectRowJSON {
			return projectRowJSON{projectStateJSON{ProjectID: p.ID, Visibility: p.Visibility}, correspondence.FormatTimestamp(p.CreatedAt)}
		})
}
