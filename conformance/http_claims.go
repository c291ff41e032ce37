package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// claimsAnswer is GET /claims (spec §9).
type claimsAnswer struct {
	Protocol         string  `json:"protocol"`
	Scope            string  `json:"scope"`
	EvaluatedAt      string  `json:"evaluated_at"`
	Cursor           *string `json:"cursor"`
	ProjectionStatus string  `json:"projection_status"`
	Truncated        bool    `json:"truncated"`
	Claims           []struct {
		ClaimID           string   `json:"claim_id"`
		Generation        int64    `json:"generation"`
		EventID           string   `json:"event_id"`
		OwnerIdentityID   string   `json:"owner_identity_id"`
		ExpiresAt         string   `json:"expires_at"`
		Conflicted        bool     `json:"conflicted"`
		CompetingEventIDs []string `json:"competing_event_ids"`
	} `json:"claims"`
}

func (h *httpRun) getClaims(ctx context.Context, extra string) (claimsAnswer, response, error) {
	var a claimsAnswer
	r, err := h.do(ctx, "GET", "/v1/correspondence/claims?"+url.Values{"repository_id": {h.claimRepo}}.Encode()+extra, h.ro, nil)
	if err != nil {
		return a, r, err
	}
	return a, r, r.decode(http.StatusOK, &a)
}

// claims runs one lineage, open → renew → release, in a fresh repository
// and reads the projection after each step (spec §8, §9).
func (h *httpRun) claims(ctx context.Context, g *Group) {
	claimID := newUUID()
	str := canonicaljson.StringValue
	expires := correspondence.FormatTimestamp(time.Now().Add(time.Hour))
	open := h.event(h.claimRepo, "claim.open", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "claim_id", Value: str(claimID)},
		canonicaljson.Member{Name: "generation", Value: canonicaljson.IntValue(1)},
		canonicaljson.Member{Name: "expires_at", Value: str(expires)},
	), "docs", "api")
	openP, _, err := h.append(ctx, open, "valid", false)
	g.record("claim.open appended as valid", err)

	active := func(name, extra, wantEvent string, wantGen int64) {
		a, r, err := h.getClaims(ctx, extra)
		if err == nil {
			switch {
			case a.Protocol != correspondence.Protocol || a.Scope != "project_private" || a.ProjectionStatus != "complete" || a.Truncated:
				err = fmt.Errorf("protocol %q scope %q projection_status %q truncated %v", a.Protocol, a.Scope, a.ProjectionStatus, a.Truncated)
			case !validTimestamp(a.EvaluatedAt) || a.Cursor == nil || !validSeq(*a.Cursor):
				err = errors.New("evaluated_at or cursor malformed")
			case wantEvent == "" && len(a.Claims) != 0:
				err = fmt.Errorf("%d active claims, want none", len(a.Claims))
			case wantEvent == "":
			case len(a.Claims) != 1:
				err = fmt.Errorf("%d active claims, want 1", len(a.Claims))
			case a.Claims[0].EventID != wantEvent || a.Claims[0].ClaimID != claimID || a.Claims[0].Generation != wantGen ||
				a.Claims[0].OwnerIdentityID != h.identity || a.Claims[0].ExpiresAt != expires || a.Claims[0].Conflicted:
				err = fmt.Errorf("active claim is generation %d, conflicted %v; want generation %d by this identity, not conflicted",
					a.Claims[0].Generation, a.Claims[0].Conflicted, wantGen)
			case mediaOf(r.header) != mediaVendorJSON:
				err = fmt.Errorf("Content-Type %q", mediaOf(r.header))
			default:
				err = checkHeaders(r.header, false)
			}
		}
		g.record(name, err)
	}
	active("open is active", "", openP.id, 1)
	active("path docs/specs overlaps docs", "&path=docs%2Fspecs", openP.id, 1)
	active("path doc does not overlap docs", "&path=doc", "", 0)

	renew := h.event(h.claimRepo, "claim.renew", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "claim_id", Value: str(claimID)},
		canonicaljson.Member{Name: "generation", Value: canonicaljson.IntValue(2)},
		canonicaljson.Member{Name: "predecessor_event_id", Value: str(open.ID)},
		canonicaljson.Member{Name: "expires_at", Value: str(expires)},
	), "api", "docs")
	renewP, _, err := h.append(ctx, renew, "valid", false)
	g.record("claim.renew with the same path set, reordered, appended as valid", err)
	active("renewal replaces the open as the tip", "", renewP.id, 2)

	release := h.event(h.claimRepo, "claim.release", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "claim_id", Value: str(claimID)},
		canonicaljson.Member{Name: "generation", Value: canonicaljson.IntValue(3)},
		canonicaljson.Member{Name: "predecessor_event_id", Value: str(renew.ID)},
	), "docs", "api")
	_, _, err = h.append(ctx, release, "valid", false)
	g.record("claim.release appended as valid", err)
	active("release ends the claim", "", "", 0)

	_, r, err := h.getClaims(ctx, "")
	if err == nil {
		r2, err2 := h.do(ctx, "GET", "/v1/correspondence/claims?"+url.Values{"repository_id": {h.claimRepo}}.Encode(), h.ro, nil, "If-None-Match", r.header.Get("ETag"))
		if err = err2; err == nil && r2.status != http.StatusNotModified {
			err = fmt.Errorf("status %d, want 304", r2.status)
		}
	}
	g.record("claims ETag revalidates", err)
	r, err = h.do(ctx, "GET", "/v1/correspondence/claims?"+url.Values{"repository_id": {h.claimRepo}}.Encode(), h.ro, nil, "Accept", mediaAtom)
	if err == nil {
		if err = r.expectError(http.StatusNotAcceptable, "representation_not_acceptable"); err != nil {
			err = fmt.Errorf("%w (claims offer the two JSON types only)", err)
		}
	}
	g.record("claims refuse Atom", err)
}
