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
	"github.com/acrelay/acrelay/internal/backoff"
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
	fill  chan struct{} // a gap is known (or the subscription just became active): backfill now

	cancel context.CancelFunc
	done   sync.WaitGroup
	// callbackOnly: never started; it serves the callback of a link that
	// another process runs (callback.go).
	callbackOnly bool

	mu      sync.Mutex
	lease   store.Lease
	cursor  int64          // the remote cursor as stored: never past a kept refusal
	read    int64          // backfill reads after this: every record up to it was handled or kept
	seen    int64          // every remote received_seq up to here was handled (by backfill or push); never stored
	pending map[int64]bool // remote received_seq of the kept refusals that may pass
	// keptKeys and keptTried: keysImported and the time at the kept
	// refusals' last try (retryKept).
	keptKeys  int64
	keptTried time.Time
	clock     remoteClock // the latest remote receipt seen (clock.go)
	lastErr   string
	keyPages  map[string]keyPage // by the page's after ("" first)

	// witnessing (witness.go): wkick asks for a check now; wsize is the
	// size cosigned last, wsubmitted whether the remote took it;
	// witnessErr the last failure; wkeyRead when the remote's witness key
	// was read (runWitness's goroutine only); halted: a split view
	// stopped the link.
	wkick      chan struct{}
	wsize      int64
	wsubmitted bool
	witnessErr string
	wkeyRead   time.Time
	halted     atomic.Bool

	stored, duplicates, refused, keysImported atomic.Int64
	// settle is when the settling after a verified subscription ends (unix
	// nanoseconds; 0 when not settling), see runSubscription.
	settle atomic.Int64
}

// keyPage is what a registry page said, kept for its 304.
type keyPage struct {
	etag      string
	nextAfter string
	hasMore   bool
}

func newLink(m *Manager, p store.Peer, lease store.Lease) *link {
	l := &link{m: m, peer: p, lease: lease, kick: make(chan struct{}, 1), fill: make(chan struct{}, 1), wkick: make(chan struct{}, 1), keyPages: map[string]keyPage{}, pending: map[int64]bool{},
		log: m.log.With("project_id", p.ProjectID, "peer_id", p.ID)}
	l.topic = hub.Topic{ProjectID: p.ProjectID, RepositoryID: p.RepositoryID, Format: hub.FormatJSON}.URL(p.RemoteURL)
	l.sub = &client.WebSubSubscriber{
		Hub:      p.RemoteURL + hub.HubPath,
		Callback: m.opt.PublicURL + "/v1/federation/callback/" + url.PathEscape(p.ID),
		HTTP:     m.opt.HTTP,
		Token:    p.Token,
		Logger:   l.log,
		OnRecord: l.onPush,
		State:    peerState{st: m.st, projectID: p.ProjectID, peerID: p.ID},
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
	l.done.Go(func() { l.runRegistry(ctx) })
	l.done.Go(func() { l.runSubscription(ctx) })
	l.done.Go(func() { l.runWitness(ctx) })
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
	st := LinkStatus{Running: !l.halted.Load(), RemoteCursor: strconv.FormatInt(l.cursor, 10), Stored: l.stored.Load(),
		Duplicates: l.duplicates.Load(), Refused: l.refused.Load(), KeysImported: l.keysImported.Load(), LastError: l.lastErr,
		Witnessed: l.wsize, WitnessError: l.witnessErr, SplitView: l.halted.Load()}
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
				// Records the remote stored after backfill's last page and
				// before its hub took this subscription are neither pushed
				// nor fetched yet. The remote's hub starts the
				// subscription's cursor at its head only once it has our
				// answer, a moment after this, so backfill settles: a round
				// now, then every settleEvery until the first push (whose
				// received_seq shows any gap left) or settleFor.
				l.settle.Store(time.Now().Add(settleFor).UnixNano())
				l.backfillNow()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// unsubscribe tells the remote's hub that a removed link wants no more
// deliveries. The link's stored state went with it, so the request is
// sent by a subscriber without one.
func (l *link) unsubscribe(ctx context.Context) {
	if s, ok := l.sub.Subscription(l.topic); ok && s.State == client.WebSubActive {
		gone := &client.WebSubSubscriber{Hub: l.sub.Hub, Callback: l.sub.Callback, HTTP: l.sub.HTTP, Token: l.sub.Token, Logger: l.log}
		_ = gone.Unsubscribe(ctx, l.topic)
	}
}

// runBackfill syncs the registry once, then backfills from the remote
// cursor and retries the kept refusals, again every PollInterval
// (IdlePollInterval while subscribed), and at once when a gap is known (a
// push past what was handled, the subscription just verified) or the
// registry changed here. A failed round is retried after a short backoff
// (retryMin, doubling up to PollInterval).
func (l *link) runBackfill(ctx context.Context) {
	if e, err := splitViewOf(ctx, l.m.st, l.peer); err != nil && ctx.Err() == nil {
		l.log.Warn("federation: split view evidence", "err", err)
	} else if e != nil {
		l.halt(e) // stopped for good (witness.go)
		return
	}
	states, err := l.m.st.TargetStates(ctx, Courier, l.peer.ProjectID)
	if err == nil {
		for _, s := range states {
			if s.Target == l.peer.ID {
				l.mu.Lock()
				l.cursor, l.read, l.seen = s.ReceivedSeq, s.ReceivedSeq, s.ReceivedSeq
				l.mu.Unlock()
			}
		}
	}
	if err := l.loadPending(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("federation: kept refusals", "err", err)
	}
	if err := l.syncKeys(ctx); err != nil && ctx.Err() == nil { // the keys of the first page
		l.log.Warn("federation: registry sync", "err", err)
	}
	var retry time.Duration
	failed := 0 // failed rounds in a row
	for {
		more, err := l.backfill(ctx)
		if err == nil {
			err = l.retryKept(ctx)
		}
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
			failed++
			retry = backoff.Policy{Initial: retryMin, Max: l.m.opt.PollInterval}.Ceiling(failed)
		} else {
			failed, retry = 0, 0
			l.witnessNow() // check the remote's checkpoint as it backfills
		}
		if more && err == nil {
			continue // the round ended at MaxPagesPerRound with progress: the next one starts now
		}
		if !l.pause(ctx, err == nil && l.subscribed() > 0, retry) {
			return
		}
	}
}

// runRegistry re-reads the remote's key registry every KeysInterval
// (conditionally: a page that did not change is a 304) and at once when a
// pushed record's key is unknown here. A sync that changed anything here
// starts a backfill round, which retries the kept refusals first.
func (l *link) runRegistry(ctx context.Context) {
	t := time.NewTicker(l.m.opt.KeysInterval)
	defer t.Stop()
	// A remote that keeps failing is asked less often: the wait doubles
	// from KeysInterval up to PollInterval, and only the first failure of
	// a run is a warning (a misconfigured peer must not log every 2 s).
	failures, next := 0, time.Time{}
	retry := backoff.Policy{Initial: l.m.opt.KeysInterval, Max: max(l.m.opt.PollInterval, l.m.opt.KeysInterval)}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
		if time.Now().Before(next) {
			continue
		}
		before := l.keysImported.Load()
		if err := l.syncKeys(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait := retry.Ceiling(failures)
			next = time.Now().Add(wait)
			if failures == 1 {
				l.log.Warn("federation: registry sync", "err", err)
			} else {
				l.log.Debug("federation: registry sync", "err", err, "failures", failures, "retry_in", wait)
			}
			continue
		}
		if failures > 0 {
			l.log.Info("federation: registry sync recovered", "failures", failures)
			failures, next = 0, time.Time{}
		}
		if l.keysImported.Load() != before {
			l.backfillNow()
		}
	}
}

// retryMin is the first wait after a failed backfill round.
const retryMin = 100 * time.Millisecond

// settleEvery and settleFor: backfill's rounds after a subscription is
// verified, until its first push.
const (
	settleEvery = 250 * time.Millisecond
	settleFor   = 5 * time.Second
)

// backfillNow asks runBackfill for a round at once.
func (l *link) backfillNow() {
	select {
	case l.fill <- struct{}{}:
	default:
	}
}

// pause waits before the next backfill round: retry when it is set (the
// last round failed), else settleEvery while settling, PollInterval, or
// IdlePollInterval while subscribed. A gap made known (backfillNow) ends it at once. A
// subscription whose lease ends without a verified renewal (the remote
// was unreachable for each) has lapsed: the remote's hub delivers nothing
// more, so the round starts at once and backfill falls back to
// PollInterval until the link subscribes again. It is false when ctx
// ended.
func (l *link) pause(ctx context.Context, idle bool, retry time.Duration) bool {
	deadline := time.Now().Add(l.m.opt.PollInterval)
	switch {
	case retry > 0:
		deadline, idle = time.Now().Add(retry), false
	case idle:
		deadline = time.Now().Add(l.m.opt.IdlePollInterval)
	}
	if until := time.Unix(0, l.settle.Load()); time.Now().Before(until) && retry == 0 {
		deadline, idle = time.Now().Add(settleEvery), false
	}
	for {
		wait := time.Until(deadline)
		if idle {
			left := l.subscribed()
			if left == 0 {
				l.log.Info("federation: subscription lapsed; polling")
				return true
			}
			wait = min(wait, left+10*time.Millisecond)
		}
		if wait <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-l.fill:
			return true
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

// backfill reads pages after the read position until the remote has no
// more, at most MaxPagesPerRound; the read position moves over each
// page's contiguous handled prefix (stored, duplicate, refused for good,
// or refused and kept to retry), and the cursor over what is handled and
// not held by a refusal that may pass (advance). more is true when the
// round ended at MaxPagesPerRound with the remote still having more: a
// long history is read round after round without waiting for the poll
// interval between them.
func (l *link) backfill(ctx context.Context) (more bool, err error) {
	synced := false
	for range MaxPagesPerRound {
		l.mu.Lock()
		read := l.read
		l.mu.Unlock()
		q := url.Values{"project_id": {l.peer.ProjectID}, "after": {strconv.FormatInt(read, 10)}, "limit": {strconv.Itoa(pageLimit)}}
		if l.peer.RepositoryID != "" {
			q.Set("repository_id", l.peer.RepositoryID)
		}
		if read == 0 {
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
		var pageErr error
		recs := make([]pageRecord, 0, len(page.Events))
		for _, e := range page.Events {
			prev := max(read, lastSeq(recs))
			seq, err := strconv.ParseInt(e.Receipt.ReceivedSeq, 10, 64)
			if err != nil || seq <= prev {
				pageErr = fmt.Errorf("events page: received_seq %q does not follow %d", e.Receipt.ReceivedSeq, prev)
				break
			}
			recs = append(recs, pageRecord{raw: e.Event, receivedAt: e.Receipt.ReceivedAt, seq: seq})
		}
		outs := l.takePage(ctx, recs, !synced)
		var unknown []int
		for i, o := range outs {
			if o == unknownKey {
				unknown = append(unknown, i)
			}
		}
		if len(unknown) > 0 {
			synced = true
			if serr := l.syncKeys(ctx); serr != nil {
				pageErr = serr
				outs = outs[:unknown[0]] // handled up to the first unknown key
			} else {
				again := make([]pageRecord, len(unknown))
				for k, i := range unknown {
					again[k] = recs[i]
					again[k].checked = true // its clock was checked the first time
				}
				for k, o := range l.takePage(ctx, again, false) {
					outs[unknown[k]] = o
				}
			}
		}
		handled := read
		for i, o := range outs {
			if o == temporary {
				pageErr = errTemporary
				break
			}
			handled = recs[i].seq
		}
		l.mu.Lock()
		l.read = handled
		l.seen = max(l.seen, handled)
		l.mu.Unlock()
		if err := l.advance(ctx); err != nil {
			return false, err
		}
		if pageErr != nil {
			return false, pageErr
		}
		if !page.Page.HasMore {
			return false, nil
		}
		if handled == read {
			return false, errors.New("events page: has_more without records")
		}
	}
	return true, nil
}

// advance moves the remote cursor up to the read position, but never
// past a record refused for a reason that may pass (spec/federation.md
// "Cursors": the cursor moves over a contiguous stored range).
func (l *link) advance(ctx context.Context) error {
	l.mu.Lock()
	target, lease, cursor := l.read, l.lease, l.cursor
	for seq := range l.pending {
		target = min(target, seq-1)
	}
	l.mu.Unlock()
	if target <= cursor {
		return nil
	}
	if err := l.m.st.AdvanceCursor(ctx, lease, l.peer.ID, target); err != nil {
		return err
	}
	l.mu.Lock()
	l.cursor = max(l.cursor, target)
	l.mu.Unlock()
	return nil
}

// errTemporary ends a page: the record is fetched again on the next round.
var errTemporary = errors.New("temporary append failure")

// pageRecord is one record as a remote served it.
type pageRecord struct {
	raw        []byte
	receivedAt string
	seq        int64
	// checked: the remote clock was checked already (a retry).
	checked bool
	// attempts and first are a kept refusal's (a retry of one).
	attempts int
	first    time.Time
}

func lastSeq(recs []pageRecord) int64 {
	if len(recs) == 0 {
		return 0
	}
	return recs[len(recs)-1].seq
}

// outcome is what became of one foreign record.
type outcome int

const (
	handled    outcome = iota // stored, a duplicate, or refused for good
	temporary                 // not handled: fetch it again
	unknownKey                // its key is unknown here: sync the registry, then take it again
	kept                      // refused for a reason that may pass: kept, retried after a sync or round
)

// takePage takes a page of foreign records, in the remote's order: the
// remote's clock check (clock.go), then one call of the ingest path (one
// group commit). With syncFirst, a record whose key is unknown here is
// unknownKey (the caller syncs the registry and takes it again); without,
// it is refused and kept to retry (refusals.go).
func (l *link) takePage(ctx context.Context, recs []pageRecord, syncFirst bool) []outcome {
	outs := make([]outcome, len(recs))
	in := make([]ingest.ForeignRecord, 0, len(recs))
	idx := make([]int, 0, len(recs))
	var prev time.Time // the page's latest receipt so far
	for i, r := range recs {
		at, ok := parseTime(r.receivedAt)
		if !ok {
			outs[i] = l.refuse(ctx, r, ReasonReceiptInvalid, true, nil)
			continue
		}
		if !r.checked && !l.clockOK(r.seq, at, prev) {
			outs[i] = l.refuse(ctx, r, ReasonReceiptBackdated, true, nil)
			continue
		}
		prev = maxTime(prev, at)
		in = append(in, ingest.ForeignRecord{Raw: r.raw, RemoteReceivedAt: at})
		idx = append(idx, i)
	}
	if len(in) == 0 {
		return outs
	}
	for k, res := range l.m.in.AppendForeign(ctx, l.peer.ProjectID, in) {
		i, err := idx[k], res.Err
		switch {
		case err == nil:
			if res.Created {
				l.stored.Add(1)
			} else {
				l.duplicates.Add(1)
			}
			outs[i] = l.resolved(ctx, recs[i])
		case errors.Is(err, ingest.ErrAppendUnavailable) || errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil:
			outs[i] = temporary
		case errors.Is(err, ingest.ErrSenderUnknown) && syncFirst:
			outs[i] = unknownKey
		case errors.Is(err, ingest.ErrSenderUnknown):
			outs[i] = l.refuse(ctx, recs[i], ReasonSigningKeyUnknown, false, err)
		default:
			code, _ := ingest.Refusal(err)
			outs[i] = l.refuse(ctx, recs[i], code, true, err)
		}
	}
	return outs
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
// cursor. A record that does not follow what was handled (a gap: records
// the remote stored before it were neither pushed nor fetched, or it was
// not handled) starts a backfill round at once; an unknown key asks for
// the registry first. A repository link cannot tell a gap (its records'
// received_seq are the project's), so each of its pushes past what was
// handled starts a round. On a process that serves the link's callback
// without running the link, "handled" is what that process took, and a
// gap wakes the process that runs it (store.PeerWakes).
func (l *link) onPush(_ string, rec client.Record) {
	if l.halted.Load() {
		return // a split view stopped the link: nothing more is mirrored
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seq := rec.Receipt.ReceivedSeq
	o := l.takePage(ctx, []pageRecord{{raw: rec.Raw, receivedAt: rec.Receipt.ReceivedAt, seq: seq}}, true)[0]
	if o == unknownKey && l.callbackOnly {
		// No registry loop runs here: read the remote's registry now and
		// take the record again; a key still unknown leaves the record to
		// the link's backfill.
		if err := l.syncKeys(ctx); err != nil {
			l.log.Warn("federation: registry sync for a push", "err", err)
		} else {
			o = l.takePage(ctx, []pageRecord{{raw: rec.Raw, receivedAt: rec.Receipt.ReceivedAt, seq: seq, checked: true}}, true)[0]
		}
	}
	if !l.callbackOnly { // the running link's registry and settling are its own
		if o == unknownKey || o == temporary {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
		l.settle.Store(0) // the remote's hub has the subscription: gaps show from here on
	}
	l.mu.Lock()
	gap := false
	switch {
	case seq <= l.seen:
	case seq == l.seen+1 && (o == handled || o == kept) && l.peer.RepositoryID == "":
		l.seen = seq
	default:
		gap = true
		if l.callbackOnly && seq > l.seen && (o == handled || o == kept) {
			l.seen = seq // what this process took: the gap before it is told once
		}
	}
	l.mu.Unlock()
	switch {
	case !gap:
	case !l.callbackOnly:
		l.backfillNow()
	default:
		// Another process runs the link (this one serves its callback
		// only): a gap this process saw is filled by that process's
		// backfill, woken now (store.PeerWakes) instead of at its next
		// poll.
		if err := l.m.st.WakePeer(ctx, l.peer.ProjectID, l.peer.ID); err != nil {
			l.log.Warn("federation: wake the link's process", "err", err)
		}
	}
}
