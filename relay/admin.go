package relay

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/store"
)

const maxAdminBody = 16 << 10

// decodeAdmin reads a small JSON body under the strict profile into v,
// refusing unknown members. An empty body decodes as {}.
func decodeAdmin(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := readBody(w, r, maxAdminBody)
	if err != nil {
		return err
	}
	if len(raw) == 0 {
		raw = []byte("{}")
	} else if !acceptableBody(r) {
		return errUnsupportedType
	}
	if _, err := canonicaljson.ParseObject(raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v, json.RejectUnknownMembers(true)); err != nil {
		return errBodyInvalid
	}
	return nil
}

// adminError maps registry input errors; others go through the table.
func adminError(err error) error {
	var ie *registry.InputError
	if errors.As(err, &ie) {
		return apierror.Input(ie.Code, ie.Message)
	}
	return err
}

type identityJSON struct {
	IdentityID  string `json:"identity_id"`
	ProjectID   string `json:"project_id"`
	DisplayName string `json:"display_name,omitempty"`
	Status      string `json:"status"`
}

type keyJSON struct {
	SigningKeyID    string `json:"signing_key_id"`
	IdentityID      string `json:"identity_id"`
	PublicKeyB64URL string `json:"public_key_b64url"`
	Status          string `json:"status"`
}

type tokenJSON struct {
	TokenID string   `json:"token_id"`
	Token   string   `json:"token,omitempty"`
	Scopes  []string `json:"scopes"`
}

func identityOut(i store.Identity) identityJSON {
	return identityJSON{IdentityID: i.ID, ProjectID: i.ProjectID, DisplayName: i.DisplayName, Status: i.Status}
}

func keyOut(k store.SigningKey) keyJSON {
	return keyJSON{SigningKeyID: k.ID, IdentityID: k.IdentityID, PublicKeyB64URL: k.PublicKey, Status: k.Status}
}

// handleProjectCreate: POST /v1/admin/projects {"project_id"?,
// "visibility"?: "public"|"private" (default private)} (operator token) →
// 201 {"project_id", "visibility"}.
func (s *Server) handleProjectCreate(w http.ResponseWriter, r *http.Request) {
	if !principalFrom(r.Context()).Operator {
		s.writeError(w, r, errOperatorOnly)
		return
	}
	var in struct {
		ProjectID  string  `json:"project_id"`
		Visibility *string `json:"visibility"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	vis, err := parseVisibility(in.Visibility)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := registry.CreateProject(r.Context(), s.st, in.ProjectID)
	if err != nil {
		s.writeError(w, r, adminError(err))
		return
	}
	// A failure here leaves the project private, the safe default.
	if vis != store.VisibilityPrivate {
		if err := s.st.SetProjectVisibility(r.Context(), p.ID, vis); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.log.InfoContext(r.Context(), "project created", "project_id", p.ID, "visibility", vis)
	s.writeJSON(w, r, http.StatusCreated, mediaJSON, projectStateJSON{ProjectID: p.ID, Visibility: vis})
}

// handleIdentityCreate: POST /v1/admin/projects/{project_id}/identities.
func (s *Server) handleIdentityCreate(w http.ResponseWriter, r *http.Request) {
	projectID := mux.Vars(r)["project_id"]
	if err := requireAdminOf(principalFrom(r.Context()), projectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct {
		IdentityID  string `json:"identity_id"`
		DisplayName string `json:"display_name"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := registry.CreateIdentity(r.Context(), s.st, projectID, in.IdentityID, in.DisplayName)
	if err != nil {
		s.writeError(w, r, adminError(err))
		return
	}
	s.writeJSON(w, r, http.StatusCreated, mediaJSON, identityOut(id))
}

// adminProject is the project an identity or key route acts on: the
// bearer's own project, or for the operator token the project_id query
// parameter (ids are scoped to their project, so an id alone is not enough).
func adminProject(r *http.Request) (string, error) {
	q, err := readQuery(r, "project_id")
	if err != nil {
		return "", err
	}
	return adminProjectOf(principalFrom(r.Context()), q)
}

// adminProjectOf is adminProject over a query already read.
func adminProjectOf(p principal, q map[string]string) (string, error) {
	if !p.Operator {
		if pid, ok := q["project_id"]; ok && pid != p.ProjectID {
			return "", errNotFound
		}
		if !p.has(store.ScopeAdmin) {
			return "", errScope(store.ScopeAdmin)
		}
		return p.ProjectID, nil
	}
	pid, ok := q["project_id"]
	if !ok {
		return "", errProjectIDRequired
	}
	return pid, nil
}

// identityFor loads an identity of the project the caller administers
// (404 for an id that is not in that project).
func (s *Server) identityFor(r *http.Request, id string) (store.Identity, error) {
	pid, err := adminProject(r)
	if err != nil {
		return store.Identity{}, err
	}
	return s.st.GetIdentity(r.Context(), pid, id)
}

// handleKeyAdd: POST /v1/admin/identities/{identity_id}/keys.
func (s *Server) handleKeyAdd(w http.ResponseWriter, r *http.Request) {
	ident, err := s.identityFor(r, mux.Vars(r)["identity_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct {
		SigningKeyID    string `json:"signing_key_id"`
		PublicKeyB64URL string `json:"public_key_b64url"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	k, err := registry.AddKey(r.Context(), s.st, ident, in.SigningKeyID, in.PublicKeyB64URL)
	if err != nil {
		s.writeError(w, r, adminError(err))
		return
	}
	s.writeJSON(w, r, http.StatusCreated, mediaJSON, keyOut(k))
}

// handleIdentityDeactivate: POST /v1/admin/identities/{identity_id}/deactivate.
func (s *Server) handleIdentityDeactivate(w http.ResponseWriter, r *http.Request) {
	ident, err := s.identityFor(r, mux.Vars(r)["identity_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ident, err = s.st.DeactivateIdentity(r.Context(), ident.ProjectID, ident.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wake.endWhere(func(projectID string, sub *wakeSub) bool {
		return projectID == ident.ProjectID && sub.identityID == ident.ID
	})
	s.writeJSON(w, r, http.StatusOK, mediaJSON, identityOut(ident))
}

// handleKeyRevoke: POST /v1/admin/keys/{signing_key_id}/revoke.
func (s *Server) handleKeyRevoke(w http.ResponseWriter, r *http.Request) {
	pid, err := adminProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k, err := s.st.RevokeKey(r.Context(), pid, mux.Vars(r)["signing_key_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, mediaJSON, keyOut(k))
}

// handleTokenCreate: POST /v1/admin/projects/{project_id}/tokens.
func (s *Server) handleTokenCreate(w http.ResponseWriter, r *http.Request) {
	projectID := mux.Vars(r)["project_id"]
	if err := requireAdminOf(principalFrom(r.Context()), projectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct {
		Scopes []string `json:"scopes"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, tok, err := registry.CreateToken(r.Context(), s.st, projectID, in.Scopes)
	if err != nil {
		s.writeError(w, r, adminError(err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, mediaJSON, tokenJSON{TokenID: t.ID, Token: tok, Scopes: t.Scopes})
}

// handleTokenRevoke: DELETE /v1/admin/tokens/{token_id} → 204.
func (s *Server) handleTokenRevoke(w http.ResponseWriter, r *http.Request) {
	t, err := s.st.GetToken(r.Context(), mux.Vars(r)["token_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := requireAdminOf(principalFrom(r.Context()), t.ProjectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.st.RevokeToken(r.Context(), t.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wake.endWhere(func(_ string, sub *wakeSub) bool { return sub.tokenID == t.ID })
	if s.cfg.TokenRevoked != nil { // the hub denies the token's WebSub subscriptions
		if err := s.cfg.TokenRevoked(context.WithoutCancel(r.Context()), t.ID); err != nil {
			s.log.WarnContext(r.Context(), "token revoked; ending its subscriptions failed", "token_id", t.ID, "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleWhoami: GET /v1/whoami → the bearer's project, token id and scopes.
func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	out := struct {
		Operator  bool     `json:"operator"`
		ProjectID *string  `json:"project_id"`
		TokenID   *string  `json:"token_id"`
		Scopes    []string `json:"scopes"`
	}{Operator: p.Operator, Scopes: nonNil(p.Scopes)}
	if !p.Operator {
		out.ProjectID, out.TokenID = &p.ProjectID, &p.TokenID
	}
	w.Header().Set("Cache-Control", "private")
	s.writeJSON(w, r, http.StatusOK, mediaJSON, out)
}
