package hub

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/acrelay/acrelay/store"
)

// ReasonTokenRevoked is the hub.reason of a denial sent because the token
// that created the subscription was revoked.
const ReasonTokenRevoked = "the token that authorized this subscription was revoked"

// denial is a queued denial notice (W3C WebSub #subscription-validation).
type denial struct {
	projectID, topic, callback, reason string
}

// DenyRevoked ends every subscription that the token tokenID created or
// last renewed, once that token is revoked (spec/websub.md "Subscribing":
// the hub stores which token created each subscription): it removes them
// and their delivery state now, calls Refresh, and queues a hub.mode=denied
// notice with hub.topic and hub.reason to each callback, which Run sends
// (W3C WebSub #subscription-validation). A token that is unknown or not
// revoked ends nothing. The relay's token-revoke handler calls it; Run's
// periodic check catches revocations made elsewhere. Errors: the store's.
func (h *Hub) DenyRevoked(ctx context.Context, tokenID string) error {
	t, err := h.st.GetToken(ctx, tokenID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deny revoked: %w", err)
	}
	if !t.Revoked {
		return nil
	}
	ended, err := h.st.TokenSubscriptions(ctx, t.ProjectID, tokenID)
	if err != nil {
		return fmt.Errorf("deny revoked: %w", err)
	}
	return h.deny(ctx, t.ProjectID, ended)
}

// revokedBatch is how many subscriptions denyRevokedAll reads at once.
const revokedBatch = 500

// denyRevokedAll denies every live subscription whose token is revoked or
// gone: one query per batch of revokedBatch, whatever the number of
// projects, subscriptions or tokens.
func (h *Hub) denyRevokedAll(ctx context.Context) error {
	for {
		subs, err := h.st.RevokedSubscriptions(ctx, revokedBatch)
		if err != nil {
			return err
		}
		full := len(subs) == revokedBatch
		for len(subs) > 0 { // one deny per project's run of subscriptions
			n := 1
			for n < len(subs) && subs[n].ProjectID == subs[0].ProjectID {
				n++
			}
			if err := h.deny(ctx, subs[0].ProjectID, subs[:n]); err != nil {
				return err // a removal failed: the next check retries, no loop on it
			}
			subs = subs[n:]
		}
		if !full {
			return nil
		}
	}
}

func (h *Hub) deny(ctx context.Context, projectID string, subs []store.Subscription) error {
	if len(subs) == 0 {
		return nil
	}
	// Serialized, and each subscription re-read first, so that the
	// revoke hook and the periodic check, both seeing one subscription,
	// send one notice.
	h.denyMu.Lock()
	defer h.denyMu.Unlock()
	var errs []error
	for _, s := range subs {
		if _, err := h.st.Subscription(ctx, projectID, s.ID); errors.Is(err, store.ErrNotFound) {
			continue // already ended
		}
		if err := h.st.RemoveSubscription(ctx, projectID, s.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		h.log.InfoContext(ctx, "subscription denied: token revoked", "project_id", projectID, "subscription_id", s.ID,
			"topic", s.Topic, "callback_host", hostOf(s.Callback))
		select {
		case h.denials <- denial{projectID: projectID, topic: s.Topic, callback: s.Callback, reason: ReasonTokenRevoked}:
		default:
			h.log.WarnContext(ctx, "denial notice not sent: queue full", "project_id", projectID, "subscription_id", s.ID)
		}
	}
	h.refresh(projectID)
	if len(errs) > 0 {
		return fmt.Errorf("deny revoked: %w", errors.Join(errs...))
	}
	return nil
}

// sendDenial sends one hub.mode=denied notice; the callback's answer
// changes nothing and is not read.
func (h *Hub) sendDenial(ctx context.Context, d denial) {
	q := "hub.mode=" + ModeDenied + "&hub.topic=" + url.QueryEscape(d.topic) + "&hub.reason=" + url.QueryEscape(d.reason)
	status, _, err := h.get(ctx, withQuery(d.callback, q), 0)
	if err != nil && ctx.Err() == nil {
		h.log.InfoContext(ctx, "denial notice not delivered", "project_id", d.projectID, "callback_host", hostOf(d.callback), "err", err)
		return
	}
	h.log.DebugContext(ctx, "denial notice sent", "project_id", d.projectID, "callback_host", hostOf(d.callback), "status", status)
}

// Deny ends one subscription whose capability no longer holds, found at
// delivery time by the WebSub courier (spec/websub.md "Subscribing":
// authorization is re-checked at delivery): it removes it and queues a
// hub.mode=denied notice, as DenyRevoked does. It implements the WebSub
// courier's Denier; reason is not sent (the notice says the token was
// revoked, the one reason the courier denies for).
func (h *Hub) Deny(ctx context.Context, sub store.Subscription, reason string) {
	if err := h.deny(ctx, sub.ProjectID, []store.Subscription{sub}); err != nil {
		h.log.WarnContext(ctx, "deny at delivery", "project_id", sub.ProjectID, "subscription_id", sub.ID, "err", err)
	}
}
