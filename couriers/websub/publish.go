package websub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
)

// PublishName is the publish courier's name in cursors and leases.
const PublishName = "websub-publish"

// PublishStore is what the publish courier reads.
type PublishStore interface {
	PublicProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)
	ProjectVisibility(ctx context.Context, projectID string) (string, error)
}

// Publisher is the courier that announces new content of public topics to
// external hubs (spec/websub.md "The relay as publisher to other hubs"):
// for each batch of a public project's new records, one form POST
// hub.mode=publish&hub.topic=<topic>&hub.url=<topic> per topic that moved
// — each repository's and each thread's Atom and JSON topics, and the
// project-wide JSON topic — to each configured hub, as one target per hub.
// W3C WebSub leaves the publish request to hubs, which differ: some read
// hub.url, some (flask-websub) require hub.topic, so both are sent.
// Private topics are served only by the embedded hub, so a private
// project's records are skipped (the cursor still passes them).
//
// Every topic of a batch is pinged even when another is refused, so one
// topic a hub refuses never holds back the others: a 4xx (but 408 and 429)
// is that hub refusing that topic, logged and not retried. A transport
// error, 3xx, 408, 429 or 5xx fails the batch, which the runner retries
// with its backoff; once the target has been failing for Backoff.GiveUp
// (TargetFailing), the next attempt is the last for that batch: what still
// fails is logged and dropped, and the hub hears of the following
// records. Every request goes through the SSRF-guarded client.
type Publisher struct {
	Hubs      []string // external hub URLs
	Store     PublishStore
	Client    *http.Client
	PublicURL string
	Logger    *slog.Logger // nil discards

	lastTry sync.Map // "project_id hub" → struct{}: the target gave up (TargetFailing)
}

var (
	_ couriers.Courier         = (*Publisher)(nil)
	_ couriers.FailingReporter = (*Publisher)(nil)
)

// Name implements couriers.Courier.
func (p *Publisher) Name() string { return PublishName }

// Projects implements couriers.Courier: the public projects (none when no
// hub is configured).
func (p *Publisher) Projects(ctx context.Context) ([]string, error) {
	if len(p.Hubs) == 0 {
		return nil, nil
	}
	// One query per page of public projects (store WebSubScans), not a
	// visibility read per project.
	var out []string
	after := ""
	for {
		ids, err := p.Store.PublicProjectIDs(ctx, after, 500)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
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

// Deliver implements couriers.Courier: one publish ping per topic that
// moved among records (publishTopics), for a public project. Errors: an
// error counting the pings that failed in a way worth retrying, nil
// when every ping was accepted or refused for good (or given up).
func (p *Publisher) Deliver(ctx context.Context, projectID string, t couriers.Target, records []store.Record) error {
	v, err := p.Store.ProjectVisibility(ctx, projectID)
	if err != nil {
		return err
	}
	if v != store.VisibilityPublic {
		return nil // turned private: nothing is announced
	}
	log := p.logger().With("courier", PublishName, "project_id", projectID, "hub", t.ID)
	var failed int
	var last error
	for _, topic := range publishTopics(p.PublicURL, projectID, records) {
		err := p.ping(ctx, t.ID, topic)
		var refused *refusedError
		switch {
		case err == nil:
		case errors.As(err, &refused):
			log.WarnContext(ctx, "publish ping refused; not retried", "topic", topic, "status", refused.status)
		case ctx.Err() != nil:
			return err
		default:
			failed, last = failed+1, err
		}
	}
	key := projectID + " " + t.ID
	if _, giveUp := p.lastTry.LoadAndDelete(key); giveUp && failed > 0 {
		log.WarnContext(ctx, "publish pings given up after retrying", "failed", failed, "err", last,
			"received_seq", records[len(records)-1].ReceivedSeq)
		return nil
	}
	if failed > 0 {
		return &pingError{failed: failed, last: last}
	}
	return nil
}

// TargetFailing implements couriers.FailingReporter: the target's next
// attempt is the last for its current batch.
func (p *Publisher) TargetFailing(_ context.Context, projectID string, t couriers.Target, _ time.Time) {
	p.lastTry.Store(projectID+" "+t.ID, struct{}{})
}

func (p *Publisher) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// publishTopics lists the public topics records moved, in the order they
// first appear: per record its repository's Atom and JSON topics, then its
// thread's; last the project-wide JSON topic (federation's).
func publishTopics(public, projectID string, records []store.Record) []string {
	var out []string
	seen := map[string]bool{}
	add := func(t hub.Topic) {
		u := t.URL(public)
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, r := range records {
		add(hub.Topic{ProjectID: projectID, RepositoryID: r.RepositoryID, Format: hub.FormatAtom})
		add(hub.Topic{ProjectID: projectID, RepositoryID: r.RepositoryID, Format: hub.FormatJSON})
		if r.ThreadID != "" {
			add(hub.Topic{ProjectID: projectID, RepositoryID: r.RepositoryID, ThreadID: r.ThreadID, Format: hub.FormatAtom})
			add(hub.Topic{ProjectID: projectID, RepositoryID: r.RepositoryID, ThreadID: r.ThreadID, Format: hub.FormatJSON})
		}
	}
	if len(records) > 0 {
		add(hub.Topic{ProjectID: projectID, Format: hub.FormatJSON})
	}
	return out
}

// refusedError is a hub's 4xx to one ping (but 408 and 429): it will not
// take that topic, so retrying is pointless.
type refusedError struct{ status int }

func (e *refusedError) Error() string { return fmt.Sprintf("publish: hub refused with %d", e.status) }

// pingError is a batch's failed pings that are worth retrying.
type pingError struct {
	failed int
	last   error
}

func (e *pingError) Error() string {
	return fmt.Sprintf("%d publish pings failed: %v", e.failed, e.last)
}
func (e *pingError) Unwrap() error { return e.last }

func (p *Publisher) ping(ctx context.Context, hubURL, topic string) error {
	form := url.Values{"hub.mode": {"publish"}, "hub.topic": {topic}, "hub.url": {topic}}
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
	switch s := resp.StatusCode; {
	case s >= 200 && s <= 299:
		return nil
	case s >= 400 && s <= 499 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests:
		return &refusedError{status: s}
	default:
		return fmt.Errorf("publish: hub answered %d", s)
	}
}
