package client

import (
	"context"
	"net/http"
	"net/url"
)

// PutHandoff sends a handoff contract (spec/handoff-contract-1.md, its
// JSON bytes as given) to PUT /v1/handoffs/{handoffID} and returns the
// relay's answer {version, contract, overdue, events} as served. Created
// is true for 201 (a new contract), false for 200 (the same contract
// was stored already: a PUT is safe to retry, and is retried like Post).
// Errors: *APIError (400 handoff_id_invalid or handoff_id_mismatch, 409
// handoff_exists or idempotency_key_reused, 422 contract_invalid with
// issues, 403 scope_insufficient, …).
func (c *Client) PutHandoff(ctx context.Context, handoffID string, contract []byte) (created bool, answer []byte, err error) {
	resp, err := c.doAccept(ctx, http.MethodPut, c.endpoint("/v1/handoffs/"+url.PathEscape(handoffID), nil),
		mediaTypeJSON, mediaTypeJSON, contract, true)
	if err != nil {
		return false, nil, err
	}
	return resp.status == http.StatusCreated, resp.body, nil
}
