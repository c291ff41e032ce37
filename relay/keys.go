package relay

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// The key registry export (spec/federation.md "Trust"): what a peer
// imports to verify this relay's records itself.

// Key sources as the export names them.
const (
	keySourceLocal    = "local"    // created on this relay
	keySourceImported = "imported" // imported from a peer link's registry
)

// RegistryKeyJSON is one row of GET /v1/correspondence/keys.
type RegistryKeyJSON struct {
	SigningKeyID    string               `json:"signing_key_id"`
	IdentityID      string               `json:"identity_id"`
	PublicKeyB64URL string               `json:"public_key_b64url"`
	Status          string               `json:"status"`
	CreatedAt       string               `json:"created_at"`
	RevokedAt       *string              `json:"revoked_at"`
	Source          string               `json:"source"`
	Identity        RegistryIdentityJSON `json:"identity"`
}

// RegistryIdentityJSON is the identity of a RegistryKeyJSON.
type RegistryIdentityJSON struct {
	DisplayName   string  `json:"display_name"`
	Status        string  `json:"status"`
	CreatedAt     string  `json:"created_at"`
	DeactivatedAt *string `json:"deactivated_at"`
	Source        string  `json:"source"`
}

// RegistryKeysJSON is the body of GET /v1/correspondence/keys.
type RegistryKeysJSON struct {
	ProjectID string            `json:"project_id"`
	Keys      []RegistryKeyJSON `json:"keys"`
	Page      wire.Page         `json:"page"`
}

func sourceOf(s string) string {
	if s == store.SourceLocal {
		return keySourceLocal
	}
	return keySourceImported
}

func optTime(k store.RegistryKey, revoked bool) *string {
	t := k.DeactivatedAt
	if revoked {
		t = k.RevokedAt
	}
	if t.IsZero() {
		return nil
	}
	v := correspondence.FormatTimestamp(t)
	return &v
}

func registryKeyOut(k store.RegistryKey) RegistryKeyJSON {
	return RegistryKeyJSON{
		SigningKeyID: k.SigningKeyID, IdentityID: k.IdentityID, PublicKeyB64URL: k.PublicKey, Status: k.Status,
		CreatedAt: correspondence.FormatTimestamp(k.CreatedAt), RevokedAt: optTime(k, true), Source: sourceOf(k.Source),
		Identity: RegistryIdentityJSON{DisplayName: k.DisplayName, Status: k.IdentityStatus,
			CreatedAt: correspondence.FormatTimestamp(k.IdentityCreatedAt), DeactivatedAt: optTime(k, false),
			Source: sourceOf(k.IdentitySource)},
	}
}

// handleKeysGet: GET /v1/correspondence/keys[?project_id=P][&after=K][&limit=N]
// (read scope; a public project's without a token, with project_id) →
// {project_id, keys: [{signing_key_id, identity_id, public_key_b64url,
// status, created_at, revoked_at, source, identity: {display_name,
// status, created_at, deactivated_at, source}}], page: {after,
// next_after, has_more}} in ascending signing_key_id, with a strong ETag,
// Link rel="self" and, while has_more, rel="next".
func (s *Server) handleKeysGet(w http.ResponseWriter, r *http.Request) {
	pid, _, err := s.readProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, ok := negotiate(r, []string{mediaJSON}); !ok {
		s.writeError(w, r, errNotAcceptable)
		return
	}
	q, err := readQuery(r, "project_id", "after", "limit")
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
	rows, err := s.st.RegistryKeys(r.Context(), pid, after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	out := RegistryKeysJSON{ProjectID: pid, Keys: make([]RegistryKeyJSON, 0, len(rows)), Page: wire.Page{After: afterPtr, NextAfter: afterPtr, HasMore: more}}
	for _, k := range rows {
		out.Keys = append(out.Keys, registryKeyOut(k))
	}
	if n := len(rows); n > 0 {
		last := rows[n-1].SigningKeyID
		out.Page.NextAfter = &last
	}
	base := s.publicBase(r)
	links := []string{"<" + selfURL(r, base) + `>; rel="self"; type="` + mediaJSON + `"`}
	if more {
		nq := url.Values{}
		for k, v := range q {
			nq.Set(k, v)
		}
		nq.Set("after", *out.Page.NextAfter)
		links = append(links, "<"+base+r.URL.EscapedPath()+"?"+nq.Encode()+`>; rel="next"; type="`+mediaJSON+`"`)
	}
	body, err := marshalJSON(out)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Link", strings.Join(links, ", "))
	h.Set("Cache-Control", "private, no-cache")
	h.Set("Vary", "Accept, Authorization")
	s.writeRepresentation(w, r, mediaJSON, body)
}
