package conformance

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/acrelay/acrelay/canonicaljson"
)

// lifecycle deactivates the identity and revokes the tokens, checking
// that each takes effect (spec §10).
func (h *httpRun) lifecycle(ctx context.Context, g *Group) {
	r, err := h.do(ctx, "POST", "/v1/admin/identities/"+h.identity+"/deactivate", h.admin, nil)
	if err == nil {
		var ident struct {
			Status string `json:"status"`
		}
		if err = r.decode(http.StatusOK, &ident); err == nil && ident.Status != "inactive" {
			err = fmt.Errorf("status %q, want inactive", ident.Status)
		}
	}
	g.record("deactivate identity", err)
	raw, _ := h.event(h.repo, "close", canonicaljson.ObjectValue()).CanonicalJSON()
	r, err = h.post(ctx, raw)
	if err == nil {
		err = r.expectError(http.StatusForbidden, "sender_or_signing_key_not_active")
	}
	g.record("inactive identity cannot append", err)
	for _, t := range []struct{ name, id, tok string }{{"read+append", h.rwID, h.rw}, {"read", h.roID, h.ro}} {
		r, err := h.do(ctx, "DELETE", "/v1/admin/tokens/"+url.PathEscape(t.id), h.admin, nil)
		if err == nil && r.status != http.StatusNoContent {
			err = fmt.Errorf("status %d (%s), want 204", r.status, r.errorCode())
		}
		if err == nil {
			r, err = h.do(ctx, "GET", "/v1/correspondence/events?"+h.query(), t.tok, nil)
			if err == nil {
				err = r.expectError(http.StatusUnauthorized, "")
			}
		}
		g.record("revoked "+t.name+" token is refused", err)
	}
}
