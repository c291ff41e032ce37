package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// DisplayNames reads every page of GET /v1/correspondence/keys (read
// scope) and returns the display name of each identity that has a key in
// the token's project, keyed by identity_id; an identity whose display
// name is empty is left out. It is for showing people who wrote a record:
// names are chosen by whoever registered the identity and prove nothing.
// Errors: *APIError, ErrMalformedRecord.
func (c *Client) DisplayNames(ctx context.Context) (map[string]string, error) {
	out := make(map[string]string)
	after := ""
	for range 1000 { // 1000 pages of up to 200 keys: a bound, not a limit reached in practice
		v := url.Values{"limit": {"200"}}
		if after != "" {
			v.Set("after", after)
		}
		resp, err := c.do(ctx, http.MethodGet, c.endpoint("/v1/correspondence/keys", v), "", nil, true)
		if err != nil {
			return nil, err
		}
		var page struct {
			Keys []struct {
				IdentityID string `json:"identity_id"`
				Identity   struct {
					DisplayName string `json:"display_name"`
				} `json:"identity"`
			} `json:"keys"`
			Page struct {
				NextAfter *string `json:"next_after"`
				HasMore   bool    `json:"has_more"`
			} `json:"page"`
		}
		if err := json.Unmarshal(resp.body, &page); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
		}
		for _, k := range page.Keys {
			if k.Identity.DisplayName != "" {
				out[k.IdentityID] = k.Identity.DisplayName
			}
		}
		if !page.Page.HasMore || page.Page.NextAfter == nil || *page.Page.NextAfter == after {
			break
		}
		after = *page.Page.NextAfter
	}
	return out, nil
}
