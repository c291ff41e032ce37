package registry

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/internal/token"
	"github.com/acrelay/acrelay/store"
)

// settingOperatorHash names the setting holding the hex SHA-256 of a
// generated operator token.
const settingOperatorHash = "operator_token_sha256"

// Bootstrap is what a first start created; the token strings are shown
// once and never stored.
type Bootstrap struct {
	ProjectID     string
	ProjectToken  string // scopes read, append, admin
	OperatorToken string // "" when supplied by the operator or already set
}

// OperatorHash returns the operator token's hash: SHA-256 of given when
// given is non-empty, else the stored hash of a generated token (nil when
// none exists yet).
func OperatorHash(ctx context.Context, st store.Registry, given string) ([]byte, error) {
	if given != "" {
		return token.Hash(given), nil
	}
	v, err := st.Setting(ctx, settingOperatorHash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(v)
}

// FirstStart creates, on an empty store only, a default project with a
// project token (read, append, admin) and, unless the operator supplied
// one, an operator token whose hash is stored. It returns nil on a store
// that already has projects.
func FirstStart(ctx context.Context, st store.Registry, operatorGiven bool) (*Bootstrap, error) {
	n, err := st.CountProjects(ctx)
	if err != nil {
		return nil, fmt.Errorf("count projects: %w", err)
	}
	if n > 0 {
		return nil, nil
	}
	p, err := CreateProject(ctx, st, "")
	if err != nil {
		return nil, fmt.Errorf("create default project: %w", err)
	}
	_, tok, err := CreateToken(ctx, st, p.ID, []string{store.ScopeRead, store.ScopeAppend, store.ScopeAdmin})
	if err != nil {
		return nil, err
	}
	b := &Bootstrap{ProjectID: p.ID, ProjectToken: tok}
	if !operatorGiven {
		if _, err := st.Setting(ctx, settingOperatorHash); errors.Is(err, store.ErrNotFound) {
			_, op, hash := token.New()
			if err := st.PutSetting(ctx, settingOperatorHash, hex.EncodeToString(hash)); err != nil {
				return nil, fmt.Errorf("store operator token hash: %w", err)
			}
			b.OperatorToken = op
		}
	}
	return b, nil
}
