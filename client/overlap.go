package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// OthersClaimsQuery asks which active claims of other identities overlap
// some paths of a repository (spec §4 overlap rule, §8 projection).
// RepositoryID is required; Self is the asking identity, whose own claims
// are left out ("" keeps every identity's); Paths are 1–64 path prefixes.
// WithSummaries also reads each overlapping claim's thread to find the
// owner's summary of it (OthersClaim.Summary).
type OthersClaimsQuery struct {
	RepositoryID  string
	Self          string
	Paths         []string
	WithSummaries bool
}

// OthersClaim is an active claim of another identity overlapping the
// queried paths: the projection's row, the queried paths it overlaps
// (Overlaps, in query order) and, with WithSummaries, the newest summary
// the owner gave it ("" when none was found). Summary and the row's
// scope and ids are the owner's words: show them to a model only through
// package internal/attributed.
type OthersClaim struct {
	ActiveClaim
	Overlaps []string
	Summary  string
}

// OthersClaims is the answer of Client.OthersClaims: the overlapping
// claims in the projection's order, and the projection's evaluated_at,
// cursor and status ("complete", or "truncated" when the relay cut its
// answer even per path, so some overlapping claims may be missing).
type OthersClaims struct {
	Claims           []OthersClaim
	EvaluatedAt      string
	Cursor           *string
	ProjectionStatus string
}

// maxSummaryScan bounds the records of one thread read to find a claim's
// summary (WithSummaries): a claim whose summary is older is shown
// without one.
const maxSummaryScan = 1000

// OthersClaims returns the active claims of identities other than
// q.Self whose paths overlap any of q.Paths (spec §4: equal, one a
// "/"-extension of the other, or "."). The relay keeps claims advisory,
// so an overlap is information, never a refusal.
//
// It reads GET /v1/correspondence/claims?repository_id= once; when that
// answer is truncated (over 128 active claims) it reads again once per
// queried path with path=, and merges by event_id, which finds every
// overlapping claim unless a single path has over 128 of them
// (ProjectionStatus "truncated"). With q.WithSummaries it reads the
// thread of each overlapping claim (at most 1000 records each) for the
// newest intent or progress by the owner that names an event of the
// claim's lineage in its parents (how `acrelay mcp`'s claim_paths posts a
// claim's summary), falling back to a release's detail. Errors: those of
// Claims and Events.
func (c *Client) OthersClaims(ctx context.Context, q OthersClaimsQuery) (*OthersClaims, error) {
	if q.RepositoryID == "" || len(q.Paths) == 0 {
		return nil, fmt.Errorf("others' claims: repository id and at least one path are required")
	}
	all, err := c.Claims(ctx, ClaimsQuery{RepositoryID: q.RepositoryID})
	if err != nil {
		return nil, err
	}
	out := &OthersClaims{EvaluatedAt: all.EvaluatedAt, Cursor: all.Cursor, ProjectionStatus: all.ProjectionStatus}
	rows := all.Claims
	if all.Truncated {
		out.ProjectionStatus = "complete"
		seen := map[string]bool{}
		rows = nil
		for _, p := range q.Paths {
			part, err := c.Claims(ctx, ClaimsQuery{RepositoryID: q.RepositoryID, Path: p})
			if err != nil {
				return nil, err
			}
			if part.Truncated {
				out.ProjectionStatus = "truncated"
			}
			for _, r := range part.Claims {
				if !seen[r.EventID] {
					seen[r.EventID] = true
					rows = append(rows, r)
				}
			}
		}
	}
	for _, r := range rows {
		if q.Self != "" && r.OwnerIdentityID == q.Self {
			continue
		}
		var hits []string
		for _, p := range q.Paths {
			if slices.ContainsFunc(r.Scope.Paths, func(cp string) bool { return correspondence.PathsOverlap(p, cp) }) {
				hits = append(hits, p)
			}
		}
		if len(hits) > 0 {
			out.Claims = append(out.Claims, OthersClaim{ActiveClaim: r, Overlaps: hits})
		}
	}
	if q.WithSummaries {
		for i := range out.Claims {
			s, err := c.claimSummary(ctx, q.RepositoryID, out.Claims[i].ActiveClaim)
			if err != nil {
				return nil, err
			}
			out.Claims[i].Summary = s
		}
	}
	return out, nil
}

// claimSummary finds the owner's words about claim ac in its thread: the
// newest intent or progress by the owner whose parents name an event of
// the claim's lineage (same claim_id, same owner).
func (c *Client) claimSummary(ctx context.Context, repositoryID string, ac ActiveClaim) (string, error) {
	lineage := map[string]bool{ac.EventID: true}
	summary := ""
	n := 0
	for rec, err := range c.Events(ctx, EventsQuery{RepositoryID: repositoryID, ThreadID: ac.ThreadID, Limit: 200}) {
		if err != nil {
			return "", err
		}
		if n++; n > maxSummaryScan {
			break
		}
		ev := rec.Event
		if ev.Sender.IdentityID != ac.OwnerIdentityID {
			continue
		}
		if cf, ok := ev.Claim(); ok && cf.ClaimID == ac.ClaimID {
			lineage[ev.ID] = true
			continue
		}
		if ev.Kind != correspondence.KindIntent && ev.Kind != correspondence.KindProgress {
			continue
		}
		if slices.ContainsFunc(ev.Parents, func(p string) bool { return lineage[p] }) {
			if s, ok := ev.Body.Get("summary"); ok && s.Kind == canonicaljson.String {
				summary = s.Str
			}
		}
	}
	return summary, nil
}

// Identity is one identity of the project's key registry as GET
// /v1/correspondence/keys shows it: id, display name (chosen by whoever
// registered it: another organisation's words for a federated peer's
// identity) and status ("active" or "inactive").
type Identity struct {
	IdentityID  string
	DisplayName string
	Status      string
}

// registryKeysPage is the part of GET /v1/correspondence/keys read here.
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

// Identities reads the project's key registry (GET
// /v1/correspondence/keys, read scope; every page) and returns its
// identities by identity_id, and a Keyring of all its keys (revoked ones
// too, with Key.Status "revoked": they signed history before their
// revocation, and the relay refused anything they signed after), which
// verifies records signed by any identity of the project. Errors:
// *APIError, ErrMalformedRecord.
func (c *Client) Identities(ctx context.Context) (map[string]Identity, Keyring, error) {
	ids := map[string]Identity{}
	keys := Keyring{}
	after := ""
	for {
		v := url.Values{"limit": {strconv.Itoa(200)}}
		if after != "" {
			v.Set("after", after)
		}
		resp, err := c.doAccept(ctx, http.MethodGet, c.endpoint("/v1/correspondence/keys", v), mediaTypeJSON, "", nil, true)
		if err != nil {
			return nil, nil, err
		}
		var page registryKeysPage
		if err := json.Unmarshal(resp.body, &page); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
		}
		for _, k := range page.Keys {
			ids[k.IdentityID] = Identity{IdentityID: k.IdentityID, DisplayName: k.Identity.DisplayName, Status: k.Identity.Status}
			pub, err := correspondence.DecodePublicKey(k.PublicKeyB64URL)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: key %s: %w", ErrMalformedRecord, k.SigningKeyID, err)
			}
			keys[k.SigningKeyID] = Key{IdentityID: k.IdentityID, PublicKey: pub, Status: k.Status}
		}
		if !page.Page.HasMore || page.Page.NextAfter == nil || *page.Page.NextAfter == after {
			return ids, keys, nil
		}
		after = *page.Page.NextAfter
	}
}
