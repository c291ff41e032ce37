package websub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
)

// PublishName is the publish courier's name in cursors and leases.
const PublishName = "websub-publish"

// PublishStore is what the publish courier reads.
type PublishStore interface {
	ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)
	ProjectVisibility(ctx context.Context, projectID string) (string, error)
}

// Publisher is the courier that announces new content of public topics to
// external hubs (spec/websub.md "The relay as publisher to other hubs"):
// for each batch of a public project's new records, one form POST
// hub.mode=publish&hub.url=<topic> per repository that moved, to each
// configured hub. Private topics are served only by the embedded hub, so a
// private project's records are skipped (the cursor still passes them). A
// hub answering 2xx has been told; anything else is retried with the
// runner's backoff. Every request goes through the SSRF-guarded client.
type Publisher struct {
	Hubs      []string // external hub URLs
	Store     PublishStore
	Client    *http.Client
	PublicURL string
}

var _ couriers.Courier = (*Publisher)(nil)

// Name implements couriers.Courier.
func (p *Publisher) Name() string { return PublishName }

// Projects implements couriers.Courier: the public projects (none when no
// hub is configured).
func (p *Publisher) Projects(ctx context.Context) ([]string, error) {
	if len(p.Hubs) == 0 {
		return nil, nil
	}
	var out []string
	after := ""
	for {
		ids, err := p.Store.ProjectIDs(ctx, after, 500)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			v, err := p.Store.ProjectVisibility(ctx, id)
			if err != nil {
				return nil, err
			}
			if v == store.VisibilityPublic {
				out = append(out, id)
			}
		}
		if len(ids) < 500 {
			return out, nil
		}
		after = ids[len(ids)-1]
	}
}

// Targets implements couriers.Courier: one target per external hub for a
// public project, none for a private one.
func (p *Publisher) Targets(ctx context.Context, projectID string) ([]couriers.Target, error) {
	if v, err := p.Store.ProjectVisibility(ctx, projectID); err != nil || v != store.VisibilityPublic {
		return nil, err
	}
	ts := make([]couriers.Target, 0, len(p.Hubs))
	for _, h := range p.Hubs {
		host := ""
		if u, err := url.Parse(h); err == nil {
			host = u.Host
		}
		ts = append(ts, couriers.Target{ID: h, Host: host})
	}
	return ts, nil
}

// Deliver implements couriers.Courier: one publish ping per repository
// among records, in the order they first appear, for a public project.
func (p *Publisher) Deliver(ctx context.Context, projectID string, t couriers.Target, records []store.Record) error {
	v, err := p.Store.ProjectVisibility(ctx, projectID)
	if err != nil {
		return err
	}
	if v != store.VisibilityPublic {
		return nil // turned private: nothing is announced
	}
	seen := map[string]bool{}
	for _, r := range records {
		if seen[r.RepositoryID] {
			continue
		}
		seen[r.RepositoryID] = true
		topic := hub.Topic{ProjectID: projectID, RepositoryID: r.RepositoryID, Format: hub.FormatAtom}.URL(p.PublicURL)
		if err := p.ping(ctx, t.ID, topic); err != nil {
			return err
		}
	}
	return nil
}

func (p *Publisher) ping(ctx context.Context, hubURL, topic string) error {
	form := url.Values{"hub.mode": {"publish"}, "hub.url": {topic}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hubURL, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("publish request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "acrelay-websub")
	resp, err := p.Client.Do(req)
	if err != nil {
		return fmt.Errorf("publish: %w", scrub(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("publish: hub answered %d", resp.StatusCode)
	}
	return nil
}
