// Package websub is the WebSub delivery courier (spec/websub.md
// "Distribution"; W3C WebSub #content-distribution): for every verified
// subscription of the embedded hub it POSTs the topic's new entries, as
// one feed document of at most the runner's batch, to the callback,
// signed with X-Hub-Signature when the subscription has a secret. It runs
// on couriers.Runner, so each subscription progresses on its own durable
// cursor with durable backoff, a slow callback never delays another, and
// one process delivers per project.
//
// It never renders from the request path and never follows a redirect;
// the HTTP client it is given is the hub's SSRF-guarded one.
package websub

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/acrelay/acrelay/atom"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Name is the courier's name in cursors and leases.
const Name = "websub"

// Content types of deliveries: byte-identical to a GET of the topic
// (spec/websub.md "Topics").
const (
	ContentTypeAtom = wire.ContentTypeAtom
	ContentTypeJSON = wire.ContentTypeVendorJSON
)

// Store is what the courier reads and writes: subscriptions and the tokens
// that created them.
type Store interface {
	SubscribedProjects(ctx context.Context) ([]string, error)
	Subscriptions(ctx context.Context, projectID string) ([]store.Subscription, error)
	Subscription(ctx context.Context, projectID, id string) (store.Subscription, error)
	RemoveSubscription(ctx context.Context, projectID, id string) error
	SetSubscriptionState(ctx context.Context, projectID, id, state string) error
	GetToken(ctx context.Context, id string) (store.Token, error)
	// GetIdentity names an Atom entry's author (its display name).
	GetIdentity(ctx context.Context, projectID, id string) (store.Identity, error)
}

// Denier tells a callback that its subscription ended because the token
// that created it was revoked (hub.mode=denied, W3C WebSub
// #subscription-validation). The hub implements it; cmd passes it in.
type Denier interface {
	Deny(ctx context.Context, sub store.Subscription, reason string)
}

// Courier delivers to WebSub subscriptions. The zero value is not usable;
// fill every field but Denier, Logger and Cache.
type Courier struct {
	Store     Store
	Client    *http.Client // SSRF-guarded, redirects never followed (internal/ssrf: the Guard's HTTPClient)
	PublicURL string       // the relay's public URL, no trailing slash
	Denier    Denier       // may be nil
	Logger    *slog.Logger

	// Cache, when set, keeps rendered bodies, one per (topic, batch)
	// shared by the topic's subscriptions: give it the process's one
	// couriers.Cache (the Runners' too) so that one byte budget bounds
	// them. Nil renders every delivery.
	Cache *couriers.Cache
}

var _ couriers.Courier = (*Courier)(nil)
var _ couriers.FailingReporter = (*Courier)(nil)

// Name implements couriers.Courier.
func (c *Courier) Name() string { return Name }

// Projects implements couriers.Courier: the projects with live
// subscriptions.
func (c *Courier) Projects(ctx context.Context) ([]string, error) {
	return c.Store.SubscribedProjects(ctx)
}

// Targets implements couriers.Courier: one target per live subscription,
// limited per callback host.
func (c *Courier) Targets(ctx context.Context, projectID string) ([]couriers.Target, error) {
	subs, err := c.Store.Subscriptions(ctx, projectID)
	if err != nil {
		return nil, err
	}
	ts := make([]couriers.Target, 0, len(subs))
	hosts := map[string]string{} // one string per host, shared by its targets
	for _, s := range subs {
		host := ""
		if u, err := url.Parse(s.Callback); err == nil {
			host = u.Host
			if h, ok := hosts[host]; ok {
				host = h
			} else {
				hosts[host] = host
			}
		}
		ts = append(ts, couriers.Target{ID: s.ID, Host: host})
	}
	return ts, nil
}

// errStatus is a delivery the callback refused; its body is never read
// into the error (spec/websub.md "SSRF defence").
type errStatus int

func (e errStatus) Error() string { return "callback answered " + strconv.Itoa(int(e)) }

// Deliver implements couriers.Courier: the subscription's entries among
// recs go to its callback as one signed feed document. Records of other
// repositories or threads are skipped (the cursor still passes them).
// A 2xx delivers; 410 removes the subscription (couriers.ErrTargetGone);
// any other status, a 3xx, a timeout or a transport error fails.
func (c *Courier) Deliver(ctx context.Context, projectID string, t couriers.Target, recs []store.Record) error {
	sub, err := c.Store.Subscription(ctx, projectID, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("subscription removed: %w", couriers.ErrTargetGone)
	}
	if err != nil {
		return err
	}
	if !time.Now().Before(sub.ExpiresAt) { // the lease ended: no more deliveries (W3C #subscription-lease)
		if err := c.Store.RemoveSubscription(ctx, projectID, sub.ID); err != nil {
			return err
		}
		return fmt.Errorf("lease ended: %w", couriers.ErrTargetGone)
	}
	if sub.TokenID != "" { // authorization is re-checked at every delivery
		tok, err := c.Store.GetToken(ctx, sub.TokenID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err != nil || tok.Revoked || tok.ProjectID != projectID || !hasScope(tok, store.ScopeRead) {
			if c.Denier != nil {
				c.Denier.Deny(ctx, sub, "the capability that created the subscription was revoked")
			}
			if err := c.Store.RemoveSubscription(ctx, projectID, sub.ID); err != nil {
				return err
			}
			return fmt.Errorf("capability revoked: %w", couriers.ErrTargetGone)
		}
	}
	var entries []store.Record
	for _, r := range recs {
		// RepositoryID "" is the project-wide topic (federation).
		if (sub.RepositoryID == "" || r.RepositoryID == sub.RepositoryID) && (sub.ThreadID == "" || r.ThreadID == sub.ThreadID) {
			entries = append(entries, r)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	body, contentType, err := c.render(ctx, sub, entries)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.Callback, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("delivery request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Link", LinkHeader(c.PublicURL, sub.Topic))
	req.Header.Set("User-Agent", "acrelay-websub")
	if len(sub.Secret) > 0 {
		req.Header.Set("X-Hub-Signature", Signature(sub.Secret, body))
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return fmt.Errorf("delivery: %w", scrub(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if sub.State == store.SubscriptionFailing {
			if err := c.Store.SetSubscriptionState(ctx, projectID, sub.ID, store.SubscriptionActive); err != nil {
				c.logger().Warn("mark subscription active", "project_id", projectID, "subscription_id", sub.ID, "err", err)
			}
		}
		return nil
	case resp.StatusCode == http.StatusGone:
		if err := c.Store.RemoveSubscription(ctx, projectID, sub.ID); err != nil {
			return err
		}
		return fmt.Errorf("%w: %w", errStatus(resp.StatusCode), couriers.ErrTargetGone)
	}
	return errStatus(resp.StatusCode)
}

// TargetFailing implements couriers.FailingReporter: a subscription that
// failed past the give-up time is marked failing and kept until its lease
// ends (spec/websub.md "Distribution").
func (c *Courier) TargetFailing(ctx context.Context, projectID string, t couriers.Target, since time.Time) {
	if err := c.Store.SetSubscriptionState(ctx, projectID, t.ID, store.SubscriptionFailing); err != nil && !errors.Is(err, store.ErrNotFound) {
		c.logger().Warn("mark subscription failing", "project_id", projectID, "subscription_id", t.ID, "err", err)
		return
	}
	c.logger().Warn("subscription failing", "project_id", projectID, "subscription_id", t.ID, "failing_since", since)
}

func (c *Courier) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func hasScope(t store.Token, scope string) bool {
	for _, s := range t.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// scrub drops the URL (it may carry a capability in its query) from a
// transport error, keeping the cause.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// Signature returns the X-Hub-Signature value of body under secret:
// "sha256=" and the lowercase hex HMAC-SHA256 of the exact bytes (W3C
// WebSub #signing-content).
func Signature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// LinkHeader is the Link field of a delivery and of a topic GET: the hub
// and the topic (W3C WebSub #discovery).
func LinkHeader(publicURL, topic string) string {
	return "<" + publicURL + hub.HubPath + `>; rel="hub", <` + topic + `>; rel="self"`
}

// jsonDelivery is a JSON topic's delivery: the page shape of GET
// /v1/correspondence/events.json whose records are the immutable
// {event, receipt} (the dynamic diagnostics missing_parents and
// lineage_status belong to reads, not to pushed entries).
type jsonDelivery struct {
	Protocol string           `json:"protocol"`
	Scope    string           `json:"scope"`
	Events   []jsontext.Value `json:"events"`
	Page     wire.Page        `json:"page"`
}

// Render is RenderNamed without display names: every Atom entry's author
// is its sender's identity id.
func Render(publicURL string, sub store.Subscription, entries []store.Record) ([]byte, string, error) {
	return RenderNamed(publicURL, sub, entries, nil)
}

// RenderNamed returns a delivery's body and content type: the
// subscription's topic representation holding entries (ascending
// received_seq, at least one). An Atom entry is the topic's entry
// (atom.EntryBytes): its author is names(project_id, identity_id) of its
// sender ("" or a nil names: the identity id), its link the record's page
// (atom.RecordPageURL). Display names never change, so the bytes depend
// only on the subscription's topic and the entries, and a retry of the
// same batch is the same bytes.
func RenderNamed(publicURL string, sub store.Subscription, entries []store.Record, names func(projectID, identityID string) string) ([]byte, string, error) {
	if sub.Format == hub.FormatJSON {
		page := jsonDelivery{Protocol: correspondence.Protocol, Scope: "project_private", Events: make([]jsontext.Value, 0, len(entries))}
		for _, r := range entries {
			page.Events = append(page.Events, jsontext.Value(r.ImmutableJSON()))
		}
		before := strconv.FormatInt(entries[0].ReceivedSeq-1, 10)
		next := strconv.FormatInt(entries[len(entries)-1].ReceivedSeq, 10)
		page.Page = wire.Page{After: &before, NextAfter: &next}
		b, err := json.Marshal(page, json.Deterministic(true))
		return b, ContentTypeJSON, err
	}
	f := atom.Feed{
		ID:      sub.Topic,
		Title:   "agent-correspondence " + sub.RepositoryID,
		Updated: time.Unix(0, 0).UTC(),
		Links: []atom.Link{
			{Rel: "hub", Href: publicURL + hub.HubPath},
			{Rel: "self", Type: wire.MediaTypeAtom, Href: sub.Topic},
		},
	}
	if sub.ThreadID != "" {
		f.Title += " / " + sub.ThreadID
	}
	for _, r := range entries {
		var author string
		if names != nil {
			author = names(r.ProjectID, senderOf(r))
		}
		f.Entries = append(f.Entries, atom.Entry{EventID: r.EventID, Kind: string(r.Kind), RepositoryID: r.RepositoryID,
			ThreadID: r.ThreadID, ReceivedAt: r.ReceivedAt, Record: r.ImmutableJSON(),
			Author: author, Link: atom.RecordPageURL(publicURL, r.ProjectID, r.RepositoryID, r.ReceivedSeq)})
		if r.ReceivedAt.After(f.Updated) {
			f.Updated = r.ReceivedAt
		}
	}
	return atom.Render(f), ContentTypeAtom, nil
}

// senderOf is the record's sender identity id ("" if unreadable).
func senderOf(r store.Record) string {
	var ev struct {
		Sender struct {
			IdentityID string `json:"identity_id"`
		} `json:"sender"`
	}
	_ = json.Unmarshal(r.Event, &ev)
	return ev.Sender.IdentityID
}

// bodyKey names a rendered body in the shared couriers.Cache: a body
// depends only on the topic, its format and the entries (Render), so the
// subscriptions of one topic at one cursor get one rendering; each is
// still signed with its own secret.
type bodyKey struct {
	topic       string
	format      string
	first, last int64
	n           int
}

// body is a rendered delivery body and its content type.
type body struct {
	b           []byte
	contentType string
}

// render returns the delivery body of entries for sub, rendered once per
// (topic, batch) while it stays in c.Cache; without a Cache every call
// renders.
func (c *Courier) render(ctx context.Context, sub store.Subscription, entries []store.Record) ([]byte, string, error) {
	renderNamed := func() ([]byte, string, error) {
		// A display name is fixed for the identity's life (the registry
		// never renames), so a failed lookup fails the delivery (it is
		// retried) rather than send an id where a name belongs.
		cache := map[string]string{}
		var lookupErr error
		names := func(projectID, identityID string) string {
			if n, ok := cache[identityID]; ok || identityID == "" {
				return n
			}
			ident, err := c.Store.GetIdentity(ctx, projectID, identityID)
			if err != nil && !errors.Is(err, store.ErrNotFound) && lookupErr == nil {
				lookupErr = err
			}
			cache[identityID] = ident.DisplayName
			return ident.DisplayName
		}
		b, ct, err := RenderNamed(c.PublicURL, sub, entries, names)
		if err == nil {
			err = lookupErr
		}
		return b, ct, err
	}
	if c.Cache == nil {
		return renderNamed()
	}
	k := bodyKey{topic: sub.Topic, format: sub.Format, first: entries[0].ReceivedSeq, last: entries[len(entries)-1].ReceivedSeq, n: len(entries)}
	v, err := c.Cache.Load(ctx, k, nil, func(context.Context) (any, int64, bool, error) {
		b, contentType, err := renderNamed()
		return body{b, contentType}, int64(len(b)), err == nil, err
	})
	if err != nil {
		return nil, "", err
	}
	bd := v.(body)
	return bd.b, bd.contentType, nil
}
