package hub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/store"
)

// Run verifies the intent of accepted subscription requests until ctx
// ends, then waits for the requests in flight and returns nil (W3C WebSub
// #hub-verifies-intent). It takes pending verifications from the store
// (woken by ServeHTTP, else every Options.Poll, so another process's and
// a restart's are found too), at most Options.Concurrency in flight, so
// one slow callback never delays another's verification. It also sends
// the denial notices DenyRevoked queues and, every Options.RevokedCheck,
// denies subscriptions whose token was revoked elsewhere. Start it once,
// from cmd.
//
// With several relay processes on one database, two may verify the same
// request; each sends its own challenge and the outcome is the same
// (activation is an idempotent upsert).
func (h *Hub) Run(ctx context.Context) error {
	rs := &runState{busy: map[string]bool{}, notBefore: map[string]time.Time{}, done: make(chan struct{}, 1),
		sem: make(chan struct{}, h.opt.Concurrency)}
	defer rs.wg.Wait()
	poll := time.NewTicker(h.opt.Poll)
	defer poll.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	var revoked <-chan time.Time
	if h.opt.RevokedCheck > 0 {
		t := time.NewTicker(h.opt.RevokedCheck)
		defer t.Stop()
		revoked = t.C
	}
	for {
		next := h.dispatch(ctx, rs)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		retry.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-h.wake:
		case <-rs.done:
		case <-poll.C:
		case <-retry.C:
		case <-revoked:
			if h.opt.RevokedCheckHeld != nil && !h.opt.RevokedCheckHeld() {
				break // another process holds the scan's lease
			}
			if err := h.denyRevokedAll(ctx); err != nil && ctx.Err() == nil {
				h.log.WarnContext(ctx, "revoked-token check failed", "err", err)
			}
		case d := <-h.denials:
			rs.wg.Go(func() {
				select {
				case rs.sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-rs.sem }()
				h.sendDenial(ctx, d)
			})
		}
	}
}

// runState is Run's bookkeeping of verifications in flight and waiting
// out a retry.
type runState struct {
	mu        sync.Mutex
	busy      map[string]bool      // verification ids in flight
	notBefore map[string]time.Time // verification ids waiting for a retry
	done      chan struct{}        // a verification finished
	sem       chan struct{}        // Concurrency slots
	wg        sync.WaitGroup
}

// dispatch starts a worker for each due pending verification while slots
// are free; it returns the earliest retry time of those waiting (zero if
// none).
func (h *Hub) dispatch(ctx context.Context, rs *runState) time.Time {
	rs.mu.Lock()
	limit := len(rs.busy) + len(rs.notBefore) + h.opt.Concurrency
	rs.mu.Unlock()
	vs, err := h.st.PendingVerifications(ctx, limit)
	if err != nil {
		if ctx.Err() == nil {
			h.log.WarnContext(ctx, "pending verifications unavailable", "err", err)
		}
		return time.Now().Add(h.opt.RetryInitial)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	pending := make(map[string]bool, len(vs))
	var next time.Time
	now := time.Now()
	for _, v := range vs {
		pending[v.ID] = true
		if rs.busy[v.ID] {
			continue
		}
		if at, ok := rs.notBefore[v.ID]; ok && at.After(now) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		select {
		case rs.sem <- struct{}{}:
		default:
			return next // every slot is busy: a finishing worker wakes Run
		}
		rs.busy[v.ID] = true
		delete(rs.notBefore, v.ID)
		rs.wg.Go(func() {
			retryAt := h.verify(ctx, v)
			rs.mu.Lock()
			delete(rs.busy, v.ID)
			if !retryAt.IsZero() {
				rs.notBefore[v.ID] = retryAt
			}
			rs.mu.Unlock()
			<-rs.sem
			select {
			case rs.done <- struct{}{}:
			default:
			}
		})
	}
	for id := range rs.notBefore { // deleted meanwhile (another process)
		if !pending[id] && len(vs) < limit {
			delete(rs.notBefore, id)
		}
	}
	return next
}

// verify makes one verification request for v and stores its outcome
// (W3C WebSub #hub-verifies-intent): only a 2xx answer whose body is
// exactly the challenge activates a subscribe (store ActivateSubscription)
// or carries out an unsubscribe (DeleteSubscription). Any other answer
// drops the verification and leaves an earlier subscription, secret
// included, as it was. A transport error counts an attempt and is retried
// after RetryInitial, doubling, until MaxAttempts. It returns when to try
// again, or the zero time when v is done with.
func (h *Hub) verify(ctx context.Context, v store.Verification) time.Time {
	log := h.log.With("project_id", v.ProjectID, "topic", v.Topic, "mode", v.Mode,
		"callback_host", hostOf(v.Callback), "verification_id", v.ID)
	later := time.Now().Add(h.opt.RetryInitial)
	if v.Mode == ModeSubscribe && v.TokenID != "" {
		// The token may have been revoked since the request was accepted.
		t, err := h.st.GetToken(ctx, v.TokenID)
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && t.Revoked):
			log.InfoContext(ctx, "verification dropped: its token was revoked")
			h.dropVerification(ctx, log, v.ID)
			return time.Time{}
		case err != nil:
			h.storeFailed(ctx, log, err)
			return later
		}
	}
	challenge := newChallenge()
	q := "hub.mode=" + url.QueryEscape(v.Mode) + "&hub.topic=" + url.QueryEscape(v.Topic) + "&hub.challenge=" + challenge
	if v.Mode == ModeSubscribe {
		q += "&hub.lease_seconds=" + strconv.FormatInt(v.LeaseSeconds, 10)
	}
	// "a little more" than the challenge: a longer body is a mismatch.
	status, body, err := h.get(ctx, withQuery(v.Callback, q), len(challenge)+1)
	if err != nil {
		if ctx.Err() != nil {
			return time.Time{} // shutting down: not an attempt; the next Run retries
		}
		attempts := v.Attempts + 1
		if attempts >= h.opt.MaxAttempts {
			log.WarnContext(ctx, "verification given up: callback unreachable", "attempts", attempts, "err", err)
			h.dropVerification(ctx, log, v.ID)
			return time.Time{}
		}
		log.InfoContext(ctx, "verification request failed; will retry", "attempts", attempts, "err", err)
		if err := h.st.RetryVerification(ctx, v.ID); err != nil {
			h.storeFailed(ctx, log, err)
		}
		return time.Now().Add(h.opt.RetryInitial << (attempts - 1))
	}
	if status/100 != 2 || body != challenge {
		// Never the body itself: it is the callback's, not ours to repeat.
		log.WarnContext(ctx, "callback did not confirm intent", "status", status, "challenge_echoed", body == challenge)
		h.dropVerification(ctx, log, v.ID)
		return time.Time{}
	}
	switch v.Mode {
	case ModeSubscribe:
		sub, err := h.st.ActivateSubscription(ctx, v, uuid.NewString())
		if err != nil {
			h.storeFailed(ctx, log, err)
			return later
		}
		log.InfoContext(ctx, "subscription verified", "subscription_id", sub.ID, "lease_seconds", sub.LeaseSeconds)
	case ModeUnsubscribe:
		if err := h.st.DeleteSubscription(ctx, v.ProjectID, v.Topic, v.Callback, v.ID); err != nil {
			h.storeFailed(ctx, log, err)
			return later
		}
		log.InfoContext(ctx, "unsubscribe verified")
	}
	h.refresh(v.ProjectID)
	return time.Time{}
}

// get makes one GET to the callback and reads at most limit bytes of the
// answer. err is a transport error (no answer, or the body broke off); its
// text quotes no URL.
func (h *Hub) get(ctx context.Context, target string, limit int) (status int, body string, err error) {
	rctx, cancel := context.WithTimeout(ctx, h.opt.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", errors.New("callback URL does not form a request")
	}
	req.Header.Set("User-Agent", "acrelay-websub-hub")
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, "", withoutURL(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)))
	if err != nil {
		return 0, "", withoutURL(err)
	}
	return resp.StatusCode, string(b), nil
}

// withoutURL drops the URL *url.Error quotes: a callback's path and query
// may hold the subscriber's secrets, and ours holds the challenge.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// withQuery appends q to callback's query with "&", or starts one (W3C
// WebSub #hub-verifies-intent: the callback may already have a query).
func withQuery(callback, q string) string {
	switch {
	case strings.HasSuffix(callback, "?"), strings.HasSuffix(callback, "&"):
		return callback + q
	case strings.Contains(callback, "?"):
		return callback + "&" + q
	}
	return callback + "?" + q
}

// newChallenge returns 256 random bits as 43 characters of unpadded
// base64url: unguessable and URL-safe.
func newChallenge() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (h *Hub) dropVerification(ctx context.Context, log *slog.Logger, id string) {
	if err := h.st.DeleteVerification(ctx, id); err != nil {
		h.storeFailed(ctx, log, err)
	}
}

func (h *Hub) storeFailed(ctx context.Context, log *slog.Logger, err error) {
	if ctx.Err() == nil {
		log.WarnContext(ctx, "hub store write failed", "err", err)
	}
}
