// Package registry is the project registry's business rules, shared by the
// relay's admin routes and the local `acrelay project|identity|key|token`
// commands: id validation and generation, key decoding, scope sets, and
// token minting (the token string is returned once; only its hash is
// stored). Spec §10; DESIGN.md "Identity, keys, capabilities".
package registry

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/token"
	"github.com/acrelay/acrelay/store"
)

// InputError is a refusal of caller input with a stable code.
type InputError struct {
	Code    string
	Message string
}

func (e *InputError) Error() string { return e.Code + ": " + e.Message }

func newID(given, what string) (string, error) {
	if given == "" {
		return uuid.NewString(), nil
	}
	if !correspondence.ValidUUID(given) {
		return "", &InputError{Code: what + "_invalid", Message: what + " must be a canonical lowercase UUID"}
	}
	return given, nil
}

// CreateProject creates a project with the given id, or a fresh UUID when
// id is "". Errors: *InputError (project_id_invalid), store.ErrExists.
func CreateProject(ctx context.Context, st store.Registry, id string) (store.Project, error) {
	id, err := newID(id, "project_id")
	if err != nil {
		return store.Project{}, err
	}
	return st.CreateProject(ctx, id)
}

// CreateIdentity creates an active identity in projectID. Errors:
// *InputError, store.ErrNotFound (project), store.ErrExists.
func CreateIdentity(ctx context.Context, st store.Registry, projectID, id, displayName string) (store.Identity, error) {
	id, err := newID(id, "identity_id")
	if err != nil {
		return store.Identity{}, err
	}
	if len(displayName) > 256 || !printable(displayName) {
		return store.Identity{}, &InputError{Code: "display_name_invalid", Message: "display_name is at most 256 bytes of UTF-8 without control characters"}
	}
	if _, err := st.GetProject(ctx, projectID); err != nil {
		return store.Identity{}, err
	}
	return st.CreateIdentity(ctx, store.Identity{ID: id, ProjectID: projectID, DisplayName: displayName, Status: store.StatusActive})
}

// AddKey registers an active Ed25519 public key (43 characters of unpadded
// base64url) for an identity. Errors: *InputError (signing_key_id_invalid,
// public_key_invalid), store.ErrNotFound, store.ErrExists.
func AddKey(ctx context.Context, st store.Registry, ident store.Identity, id, publicKey string) (store.SigningKey, error) {
	id, err := newID(id, "signing_key_id")
	if err != nil {
		return store.SigningKey{}, err
	}
	if _, err := correspondence.DecodePublicKey(publicKey); err != nil {
		return store.SigningKey{}, &InputError{Code: "public_key_invalid", Message: "public_key_b64url must be a 32-byte Ed25519 key in unpadded base64url"}
	}
	if ident.Status != store.StatusActive {
		return store.SigningKey{}, &InputError{Code: "identity_not_active", Message: "keys can be added only to an active identity"}
	}
	return st.AddKey(ctx, store.SigningKey{ID: id, IdentityID: ident.ID, ProjectID: ident.ProjectID, PublicKey: publicKey, Status: store.StatusActive})
}

// ValidScopes checks a non-empty set of distinct scopes among read, append
// and admin, returned in that canonical order.
func ValidScopes(scopes []string) ([]string, error) {
	bad := &InputError{Code: "scopes_invalid", Message: "scopes must be a non-empty set of read, append, admin"}
	if len(scopes) == 0 || len(scopes) > 3 {
		return nil, bad
	}
	var out []string
	for _, s := range []string{store.ScopeRead, store.ScopeAppend, store.ScopeAdmin} {
		n := 0
		for _, g := range scopes {
			if g == s {
				n++
			}
		}
		if n > 1 {
			return nil, bad
		}
		if n == 1 {
			out = append(out, s)
		}
	}
	if len(out) != len(scopes) {
		return nil, bad
	}
	return out, nil
}

// CreateToken mints a project token with the scopes. The returned string
// is the only copy of the secret. Errors: *InputError, store.ErrNotFound.
func CreateToken(ctx context.Context, st store.Registry, projectID string, scopes []string) (store.Token, string, error) {
	scopes, err := ValidScopes(scopes)
	if err != nil {
		return store.Token{}, "", err
	}
	if _, err := st.GetProject(ctx, projectID); err != nil {
		return store.Token{}, "", err
	}
	id, tok, hash := token.New()
	t, err := st.CreateToken(ctx, store.Token{ID: id, ProjectID: projectID, Scopes: slices.Clone(scopes), Hash: hash})
	if err != nil {
		return store.Token{}, "", fmt.Errorf("create token: %w", err)
	}
	return t, tok, nil
}

// printable reports whether s is valid UTF-8 without control characters
// (C0, DEL, C1) or U+FFFD: a display name is shown in listings and
// terminals, where a newline could forge a row and an escape sequence
// could rewrite the screen.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r < 0xa0 || r == utf8.RuneError {
			return false
		}
	}
	return true
}
