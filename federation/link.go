package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// link is one running peer link.
type link struct {
	m     *Manager
	peer  store.Peer
	log   *slog.Logger
	sub   *client.WebSubSubscriber
	topic string
	kick  chan struct{} // a key is unknown here: sync the registry now

	cancel context.CancelFunc
	done   sync.WaitGroup

	mu       sync.Mutex
	lease    store.Lease
	cursor   int64
	lastErr  string
	keyPages map[string]keyPage // by the page's after ("" first)

	stored, duplicates, refused, keysImported atomic.Int64
}

// keyPage is what a registry page said, kept for its 304.
type keyPage struct {
	etag      string
	nextAfter string
	hasMore   bool
}

func newLink(m *Manager, p store.Peer, lease store.Lease) *link {
	l := &link{m: m, peer: p, lease: lease, kick: make(chan struct{}, 1), keyPages: map[string]keyPage{},
		log: m.log.With("project_id", p.ProjectID, "peer_id", p.ID)}
	l.topic = hub.Topic{ProjectID: p.ProjectID, RepositoryID: p.RepositoryID, Format: hub.FormatJSON}.URL(p.RemoteURL)
	l.sub = &client.WebSubSubscriber{
		Hub:      p.RemoteURL + hub.HubPath,
		Callback: m.opt.PublicURL + "/v1/federation/callback/" + url.PathEscape(p.ID),
		HTTP:     m.opt.HTTP,
		Token:    p.Token,
		Logger:   l.log,
		OnRecord: l.onPush,
	}
	return l
}

func (l *link) fence() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease.Fence
}

func (l *link) setLease(lease store.Lease) {
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
}

func (l *link) start(parent context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	l.cancel = cancel
	l.done.Go(func() { l.runBackfill(ctx) })
	l.done.Go(func() { l.runSubscription(ctx) })
}

func (l *link) stop() { l.cancel() }
func (l *link) wait() { l.done.Wait() }

func (l *link) setErr(err error) {
	l.mu.Lock()
	if err == nil {
		l.lastErr = ""
	} else {
		l.lastErr = err.Error()
	}
	l.mu.Unlock()
}

func (l *link) status() LinkStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := LinkStatus{Running: true, RemoteCursor: strconv.FormatInt(l.cursor, 10), Stored: l.stored.Load(),
		Duplicates: l.duplicates.Load(), Refused: l.refused.Load(), KeysImported: l.keysImported.Load(), LastError: l.lastErr}
	if s, ok := l.sub.Subscription(l.topic); ok {
		st.Subscription = s.State
		if s.State == client.WebSubActive && time.Since(s.VerifiedAt) >= s.Lease {
			// The hub's lease ended without a renewal verified (the remote
			// was unreachable): it delivers no more; backfill polls.
			st.Subscription = SubscriptionExpired
		}
	}
	return st
}

// subscribed returns how long the WebSub subscription's lease has left
// (0 when it is not verified or its lease is over).
func (l *link) subscribed() time.Duration {
	s, ok := l.sub.Subscription(l.topic)
	if !ok || s.State != client.WebSubActive {
		return 0
	}
	return max(s.Lease-time.Since(s.VerifiedAt), 0)
}

// runSubscription subscribes to the remote's topic and renews at three
// quarters of the granted lease; on failure it retries every
// PollInterval (backfill polls meanwhile).
func (l *link) runSubscription(ctx context.Context) {
	for {
		wait := l.m.opt.PollInterval
		if err := l.sub.Subscribe(ctx, l.topic, l.m.opt.SubscriptionLease); err != nil {
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("federation: subscribe refused", "err", err)
		} else {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			lease, err := l.sub.Wait(wctx, l.topic)
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				l.log.Warn("federation: subscription not verified", "err", err)
			default:
				l.log.Info("federation: subscribed", "topic", l.topic, "lease_seconds", int64(lease/time.Second))
				wait = max(lease*3/4, time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (l *link) unsubscribe(ctx context.Context) {
	if s, ok := l.sub.Subscription(l.topic); ok && s.State == client.WebSubActive {
		_ = l.sub.Unsubscribe(ctx, l.topic)
	}
}

// runBackfill syncs the registry and backfills from the remote cursor,
// then again every PollInterval (IdlePollInterval while subscribed), at
// once when a key is unknown.
func (l *link) runBackfill(ctx context.Context) {
	states, err := l.m.st.TargetStates(ctx, Courier, l.peer.ProjectID)
	if err == nil {
		for _, s := range states {
			if s.Target == l.peer.ID {
				l.mu.Lock()
				l.cursor = s.ReceivedSeq
				l.mu.Unlock()
			}
		}
	}
	var lastKeys time.Time
	for {
		if time.Since(lastKeys) >= l.m.opt.KeysInterval {
			if err := l.syncKeys(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("federation: registry sync", "err", err)
				l.setErr(err)
			} else {
				lastKeys = time.Now()
			}
		}
		more, err := l.backfill(ctx)
		if errors.Is(err, store.ErrLeaseLost) {
			l.log.Info("federation: lease lost; the link stops")
			l.m.Refresh(l.peer.ProjectID)
			return
		}
		if ctx.Err() != nil {
			return
		}
		l.setErr(err)
		if err != nil {
			l.log.Warn("federation: backfill", "err", err)
		}
		if more && err == nil {
			continue // the round ended at MaxPagesPerRound with progress: the next one starts now
		}
		kicked, ok := l.pause(ctx, err == nil && l.subscribed() > 0)
		if !ok {
			return
		}
		if kicked {
			lastKeys = time.Time{}
		}
	}
}

// pause waits before the next backfill round: PollInterval, or
// IdlePollInterval while subscribed. A subscription whose lease ends
// without a verified renewal (the remote was unreachable for each) has
// lapsed: the remote's hub delivers nothing more, so the round starts at
// once and backfill falls back to PollInterval until the link subscribes
// again. kicked reports a registry sync asked for; ok is false when ctx
// ended.
func (l *link) pause(ctx context.Context, idle bool) (kicked, ok bool) {
	deadline := time.Now().Add(l.m.opt.PollInterval)
	if idle {
		deadline = time.Now().Add(l.m.opt.IdlePollInterval)
	}
	for {
		wait := time.Until(deadline)
		if idle {
			left := l.subscribed()
			if left == 0 {
				l.log.Info("federation: subscription lapsed; polling")
				return false, true
			}
			wait = min(wait, left+10*time.Millisecond)
		}
		if wait <= 0 {
			return false, true
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-l.kick:
			return true, true
		case <-time.After(wait):
		}
	}
}

// remoteGet GETs a remote URL with the link's token, reading at most
// MaxPageBytes of the body.
func (l *link) remoteGet(ctx context.Context, u string, etag string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.peer.Token)
	req.Header.Set("Accept", wire.MediaTypeVendorJSON+", "+wire.MediaTypeJSON)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := l.m.opt.HTTP.Do(req)
	if err != nil {
		return 0, nil, nil, scrub(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageBytes+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read page: %w", scrub(err))
	}
	if len(body) > MaxPageBytes {
		return 0, nil, nil, errors.New("page exceeds the size limit")
	}
	return resp.StatusCode, resp.Header, body, nil
}

// scrub drops the URL from a transport error.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// registryRow is one row of GET /v1/correspondence/keys (docs/federation.md).
type registryRow struct {
	SigningKeyID    string  `json:"signing_key_id"`
	IdentityID      string  `json:"identity_id"`
	PublicKeyB64URL string  `json:"public_key_b64url"`
	Status          string  `json:"status"`
	CreatedAt       string  `json:"created_at"`
	RevokedAt       *string `json:"revoked_at"`
	Identity        struct {
		DisplayName   string  `json:"display_name"`
		Status        string  `json:"status"`
		CreatedAt     string  `json:"created_at"`
		DeactivatedAt *string `json:"deactivated_at"`
	} `json:"identity"`
}

type registryPage struct {
	Keys []registryRow `json:"keys"`
	Page wire.Page     `json:"page"`
}

func parseTime(s string) (time.Time, bool) {
	t, code := correspondence.ParseTimestamp(s)
	return t, code == ""
}

func parseOptTime(s *string) (time.Time, bool) {
	if s == nil {
		return time.Time{}, true
	}
	return parseTime(*s)
}

// syncKeys walks the remote's registry, conditionally per page, and
// imports every row.
func (l *link) syncKeys(ctx context.Context) error {
	after := ""
	for range 10000 {
		q := url.Values{"project_id": {l.peer.ProjectID}, "limit": {strconv.Itoa(pageLimit)}}
		if after != "" {
			q.Set("after", after)
		}
		l.mu.Lock()
		cached, known := l.keyPages[after]
		l.mu.Unlock()
		status, h, body, err := l.remoteGet(ctx, l.peer.RemoteURL+"/v1/correspondence/keys?"+q.Encode(), cached.etag)
		if err != nil {
			return fmt.Errorf("registry: %w", err)
		}
		next := keyPage{}
		switch {
		case status == http.StatusNotModified && known:
			next = cached
		case status == http.StatusOK:
			var page registryPage
			if err := json.Unmarshal(body, &page); err != nil {
				return fmt.Errorf("registry page: %w", err)
			}
			for _, k := range page.Keys {
				l.importKey(ctx, k)
			}
			next = keyPage{etag: h.Get("ETag"), hasMore: page.Page.HasMore}
			if page.Page.NextAfter != nil {
				next.nextAfter = *page.Page.NextAfter
			}
			l.mu.Lock()
			l.keyPages[after] = next
			l.mu.Unlock()
		default:
			return fmt.Errorf("registry: remote answered %d", status)
		}
		if !next.hasMore || next.nextAfter <= after {
			return nil
		}
		after = next.nextAfter
	}
	return nil
}

func (l *link) importKey(ctx context.Context, k registryRow) {
	created, ok1 := parseTime(k.CreatedAt)
	idCreated, ok2 := parseTime(k.Identity.CreatedAt)
	revoked, ok3 := parseOptTime(k.RevokedAt)
	deactivated, ok4 := parseOptTime(k.Identity.DeactivatedAt)
	_, perr := correspondence.DecodePublicKey(k.PublicKeyB64URL)
	if !ok1 || !ok2 || !ok3 || !ok4 || perr != nil || !correspondence.ValidUUID(k.SigningKeyID) || !correspondence.ValidUUID(k.IdentityID) {
		l.log.Warn("federation: registry row refused", "signing_key_id", k.SigningKeyID)
		return
	}
	rk := store.RegistryKey{SigningKeyID: k.SigningKeyID, IdentityID: k.IdentityID, PublicKey: k.PublicKeyB64URL,
		Status: k.Status, CreatedAt: created, RevokedAt: revoked, DisplayName: k.Identity.DisplayName,
		IdentityStatus: k.Identity.Status, IdentityCreatedAt: idCreated, DeactivatedAt: deactivated}
	changed, err := l.m.st.ImportKey(ctx, l.peer.ProjectID, l.peer.ID, rk)
	if err != nil {
		l.log.Warn("federation: registry row not imported", "signing_key_id", k.SigningKeyID, "err", err)
		return
	}
	if changed {
		l.keysImported.Add(1)
		l.log.Info("federation: key imported", "signing_key_id", k.SigningKeyID, "status", k.Status)
	}
}

type eventsPage struct {
	Events []struct {
		Event   json.RawMessage `json:"event"`
		Receipt struct {
			ReceivedSeq string `json:"received_seq"`
			ReceivedAt  string `json:"received_at"`
		} `json:"receipt"`
	} `json:"events"`
	Page wire.Page `json:"page"`
}

// errTemporary ends a page: the record is retried on the next round.
var errTemporary = errors.New("temporary append failure")

// backfill reads pages after the cursor until the remote has no more, at
// most MaxPagesPerRound, advancing the cursor over each page's contiguous
// handled prefix. more is true when the round ended at MaxPagesPerRound
// with the remote still having more: a long history is read round after
// round without waiting for the poll interval between them.
func (l *link) backfill(ctx context.Context) (more bool, err error) {
	synced := false
	for range MaxPagesPerRound {
		l.mu.Lock()
		cursor, lease := l.cursor, l.lease
		l.mu.Unlock()
		q := url.Values{"project_id": {l.peer.ProjectID}, "after": {strconv.FormatInt(cursor, 10)}, "limit": {strconv.Itoa(pageLimit)}}
		if l.peer.RepositoryID != "" {
			q.Set("repository_id", l.peer.RepositoryID)
		}
		if cursor == 0 {
			q.Del("after")
		}
		status, _, body, err := l.remoteGet(ctx, l.peer.RemoteURL+"/v1/correspondence/events?"+q.Encode(), "")
		if err != nil {
			return false, fmt.Errorf("events page: %w", err)
		}
		if status != http.StatusOK {
			return false, fmt.Errorf("events page: remote answered %d", status)
		}
		var page eventsPage
		if err := json.Unmarshal(body, &page); err != nil {
			return false, fmt.Errorf("events page: %w", err)
		}
		handled := cursor
		var pageErr error
		for _, e := range page.Events {
			seq, err := strconv.ParseInt(e.Receipt.ReceivedSeq, 10, 64)
			if err != nil || seq <= handled {
				pageErr = fmt.Errorf("events page: received_seq %q does not follow %d", e.Receipt.ReceivedSeq, handled)
				break
			}
			err = l.take(ctx, e.Event, e.Receipt.ReceivedAt, !synced)
			if errors.Is(err, errUnknownKey) {
				synced = true
				if serr := l.syncKeys(ctx); serr != nil {
					pageErr = serr
					break
				}
				err = l.take(ctx, e.Event, e.Receipt.ReceivedAt, false)
			}
			if errors.Is(err, errTemporary) {
				pageErr = err
				break
			}
			handled = seq
		}
		if handled > cursor {
			if err := l.m.st.AdvanceCursor(ctx, lease, l.peer.ID, handled); err != nil {
				return false, err
			}
			l.mu.Lock()
			l.cursor = handled
			l.mu.Unlock()
		}
		if pageErr != nil {
			return false, pageErr
		}
		if !page.Page.HasMore {
			return false, nil
		}
		if handled == cursor {
			return false, errors.New("events page: has_more without records")
		}
	}
	return true, nil
}

// errUnknownKey: the record's key is not (yet) known here.
var errUnknownKey = errors.New("signing key unknown here")

// take appends one foreign record. It returns nil when the record is
// handled (stored, a duplicate, or refused for good), errTemporary when it
// must be retried, and errUnknownKey (when retryUnknown) for a key that a
// registry sync may bring.
func (l *link) take(ctx context.Context, raw []byte, receivedAt string, retryUnknown bool) error {
	at, ok := parseTime(receivedAt)
	if !ok {
		l.refuse("", "receipt_invalid", nil)
		return nil
	}
	res, err := l.m.in.AppendForeign(ctx, l.peer.ProjectID, raw, at)
	if err == nil {
		if res.Created {
			l.stored.Add(1)
		} else {
			l.duplicates.Add(1)
		}
		return nil
	}
	if errors.Is(err, ingest.ErrAppendUnavailable) || errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
		return fmt.Errorf("%w: %w", errTemporary, err)
	}
	if retryUnknown && errors.Is(err, store.ErrSenderNotActive) {
		return errUnknownKey
	}
	_, code, _ := ingest.Refusal(err)
	l.refuse(eventIDOf(raw), code, err)
	return nil
}

// refuse counts and logs a refused record, never its body.
func (l *link) refuse(eventID, code string, err error) {
	l.refused.Add(1)
	attrs := []any{"event_id", eventID, "code", code}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	l.log.Warn("federation: record refused", attrs...)
}

// eventIDOf is the event_id a record claims, for logs ("" when none).
func eventIDOf(raw []byte) string {
	var v struct {
		EventID string `json:"event_id"`
	}
	_ = json.Unmarshal(raw, &v)
	if len(v.EventID) > 80 {
		return ""
	}
	return v.EventID
}

// onPush appends a record the remote's hub delivered; it never moves the
// cursor. An unknown key asks backfill to sync the registry.
func (l *link) onPush(_ string, rec client.Record) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.take(ctx, rec.Raw, rec.Receipt.ReceivedAt, true); errors.Is(err, errUnknownKey) || errors.Is(err, errTemporary) {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}
