package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// HandoffParty is the issuer or assignee of a handoff contract
// (spec/handoff-contract-1.md): an id and a role, both the contract
// author's words.
type HandoffParty struct {
	ID   string `json:"id"`
	Role string `json:"role"`
}

// HandoffState is the part of GET /v1/handoffs/{handoffID} an agent
// reads to know whether work is handed to it: the contract's parties,
// objective and state, the relay's overdue flag, and Raw, the answer
// {version, contract, overdue, events} as served.
type HandoffState struct {
	Version  int64
	Issuer   HandoffParty
	Assignee HandoffParty
	State    string
	Overdue  bool
	Raw      []byte
}

// GetHandoff reads the current version of a handoff contract (read
// scope). Errors: *APIError (400 handoff_id_invalid, 404 not_found, …),
// ErrMalformedRecord.
func (c *Client) GetHandoff(ctx context.Context, handoffID string) (*HandoffState, error) {
	resp, err := c.doAccept(ctx, http.MethodGet, c.endpoint("/v1/handoffs/"+url.PathEscape(handoffID), nil), mediaTypeJSON, "", nil, true)
	if err != nil {
		return nil, err
	}
	var w struct {
		Version  int64 `json:"version"`
		Overdue  bool  `json:"overdue"`
		Contract struct {
			Issuer   HandoffParty `json:"issuer"`
			Assignee HandoffParty `json:"assignee"`
			State    string       `json:"state"`
		} `json:"contract"`
	}
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	return &HandoffState{Version: w.Version, Issuer: w.Contract.Issuer, Assignee: w.Contract.Assignee,
		State: w.Contract.State, Overdue: w.Overdue, Raw: resp.body}, nil
}
