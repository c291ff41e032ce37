package conformance

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/acrelay/acrelay/correspondence"
)

// setup learns the token's project, registers an identity and a key, and
// creates the two tokens the suite uses.
func (h *httpRun) setup(ctx context.Context, g *Group) error {
	var who struct {
		ProjectID *string  `json:"project_id"`
		Scopes    []string `json:"scopes"`
	}
	r, err := h.do(ctx, "GET", "/v1/whoami", h.admin, nil)
	if err != nil {
		return err
	}
	if err := r.decode(http.StatusOK, &who); err != nil {
		return fmt.Errorf("whoami: %w", err)
	}
	if who.ProjectID == nil || !correspondence.ValidUUID(*who.ProjectID) || !slices.Contains(who.Scopes, "admin") {
		return errors.New("whoami: the token is not a project token with the admin scope")
	}
	g.Passed++
	h.project = *who.ProjectID

	var ident struct {
		IdentityID string `json:"identity_id"`
		ProjectID  string `json:"project_id"`
		Status     string `json:"status"`
	}
	r, err = h.do(ctx, "POST", "/v1/admin/projects/"+h.project+"/identities", h.admin, []byte(`{"display_name":"acrelay conformance"}`))
	if err != nil {
		return err
	}
	if err := r.decode(http.StatusCreated, &ident); err != nil {
		return fmt.Errorf("register identity: %w", err)
	}
	if !correspondence.ValidUUID(ident.IdentityID) || ident.ProjectID != h.project || ident.Status != "active" {
		return fmt.Errorf("register identity: answer has id valid=%v, project match=%v, status %q (want active)",
			correspondence.ValidUUID(ident.IdentityID), ident.ProjectID == h.project, ident.Status)
	}
	g.Passed++
	h.identity = ident.IdentityID

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	h.priv = priv
	var key struct {
		SigningKeyID    string `json:"signing_key_id"`
		IdentityID      string `json:"identity_id"`
		PublicKeyB64URL string `json:"public_key_b64url"`
		Status          string `json:"status"`
	}
	reqBody, _ := json.Marshal(map[string]string{"public_key_b64url": correspondence.EncodePublicKey(pub)})
	r, err = h.do(ctx, "POST", "/v1/admin/identities/"+h.identity+"/keys", h.admin, reqBody)
	if err != nil {
		return err
	}
	if err := r.decode(http.StatusCreated, &key); err != nil {
		return fmt.Errorf("add key: %w", err)
	}
	if !correspondence.ValidUUID(key.SigningKeyID) || key.IdentityID != h.identity ||
		key.PublicKeyB64URL != correspondence.EncodePublicKey(pub) || key.Status != "active" {
		return fmt.Errorf("add key: answer does not echo the identity, public key and status active (status %q)", key.Status)
	}
	g.Passed++
	h.keyID = key.SigningKeyID

	for _, t := range []struct {
		scopes    string
		tok, id   *string
		wantScope []string
	}{
		{`{"scopes":["read","append"]}`, &h.rw, &h.rwID, []string{"read", "append"}},
		{`{"scopes":["read"]}`, &h.ro, &h.roID, []string{"read"}},
	} {
		var tok struct {
			TokenID string   `json:"token_id"`
			Token   string   `json:"token"`
			Scopes  []string `json:"scopes"`
		}
		r, err = h.do(ctx, "POST", "/v1/admin/projects/"+h.project+"/tokens", h.admin, []byte(t.scopes))
		if err != nil {
			return err
		}
		if err := r.decode(http.StatusCreated, &tok); err != nil {
			return fmt.Errorf("create token %s: %w", t.scopes, err)
		}
		if tok.Token == "" || tok.TokenID == "" ||
			!slices.Equal(slices.Sorted(slices.Values(tok.Scopes)), slices.Sorted(slices.Values(t.wantScope))) {
			return fmt.Errorf("create token %s: answer lacks the token, its id or the scopes", t.scopes)
		}
		if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
			g.fail("create token: Cache-Control %q, want no-store on an answer carrying a secret", cc)
		} else {
			g.Passed++
		}
		*t.tok, *t.id = tok.Token, tok.TokenID
	}

	suffix := newUUID()
	h.repo = "repo:acrelay-conformance/" + suffix
	h.claimRepo = "repo:acrelay-conformance-claims/" + suffix
	h.device, h.session = newUUID(), newUUID()
	return nil
}
