package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// RegistryKey is one row of the project's key registry, GET
// /v1/correspondence/keys (read scope): a signing key, its identity and
// that identity's display name. Status is "active" or "revoked";
// IdentityStatus "active" or "deactivated".
type RegistryKey struct {
	SigningKeyID    string
	IdentityID      string
	PublicKeyB64URL string
	Status          string
	DisplayName     string
	IdentityStatus  string
}

// registryKeysPage is the body of GET /v1/correspondence/keys.
type registryKeysPage struct {
	Keys []struct {
		SigningKeyID    string `json:"signing_key_id"`
		IdentityID      string `json:"identity_id"`
		PublicKeyB64URL string `json:"public_key_b64url"`
		Status          string `json:"status"`
		Identity        struct {
			DisplayName string `json:"display_name"`
			Status      string `json:"status"`
		} `json:"identity"`
	} `json:"keys"`
	Page struct {
		NextAfter *string `json:"next_after"`
		HasMore   bool    `json:"has_more"`
	} `json:"page"`
}

// RegistryKeys reads the whole key registry of the bearer's project (or
// of projectID, for a public project read without a token; "" for the
// bearer's), page by page in ascending signing_key_id. Errors: *APIError
// (scope_insufficient, …), ErrMalformedRecord.
func (c *Client) RegistryKeys(ctx context.Context, projectID string) ([]RegistryKey, error) {
	var out []RegistryKey
	after := ""
	for {
		q := url.Values{"limit": {"200"}}
		if projectID != "" {
			q.Set("project_id", projectID)
		}
		if after != "" {
			q.Set("after", after)
		}
		resp, err := c.do(ctx, http.MethodGet, c.endpoint("/v1/correspondence/keys", q), "", nil, true)
		if err != nil {
			return nil, err
		}
		var p registryKeysPage
		if err := json.Unmarshal(resp.body, &p); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
		}
		for _, k := range p.Keys {
			out = append(out, RegistryKey{SigningKeyID: k.SigningKeyID, IdentityID: k.IdentityID,
				PublicKeyB64URL: k.PublicKeyB64URL, Status: k.Status,
				DisplayName: k.Identity.DisplayName, IdentityStatus: k.Identity.Status})
		}
		if !p.Page.HasMore {
			return out, nil
		}
		if p.Page.NextAfter == nil || *p.Page.NextAfter == after {
			return nil, fmt.Errorf("%w: has_more without progress", ErrMalformedRecord)
		}
		after = *p.Page.NextAfter
	}
}

// DisplayNames maps each identity id of the registry to its display name
// ("" when the identity has none).
func DisplayNames(keys []RegistryKey) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k.IdentityID] = k.DisplayName
	}
	return out
}
