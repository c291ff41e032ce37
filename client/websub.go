package client

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acrelay/acrelay/wire"
)

// Errors of WebSubSubscriber.Wait.
var (
	// ErrWebSubDenied: the hub refused or ended the subscription
	// (hub.mode=denied, W3C WebSub #subscription-validation); the error
	// text carries the hub's hub.reason.
	ErrWebSubDenied = errors.New("hub denied the subscription")
	// ErrWebSubNoRequest: no Subscribe or Unsubscribe was sent for the topic.
	ErrWebSubNoRequest = errors.New("no subscription request for this topic")
	// errSuperseded ends a Wait whose request a newer one replaced.
	errSuperseded = errors.New("superseded by a newer request for the topic")
)

// States of a WebSubSubscription.
const (
	WebSubPending       = "pending"       // subscribe sent, not yet verified
	WebSubActive        = "active"        // verified; deliveries are processed
	WebSubUnsubscribing = "unsubscribing" // unsubscribe sent, not yet verified (still delivering)
	WebSubUnsubscribed  = "unsubscribed"  // unsubscribe verified, or a subscribe that failed
	WebSubDenied        = "denied"        // the hub sent hub.mode=denied
)

// Defaults of WebSubSubscriber.
const (
	// DefaultWebSubMaxBody bounds a delivery's body: the relay's batches
	// of at most 100 entries of at most 64 KiB each fit with room.
	DefaultWebSubMaxBody = 16 << 20
	// DefaultWebSubRecentIDs is how many entry ids per topic are
	// remembered for de-duplication.
	DefaultWebSubRecentIDs = 4096
	// webSubVerifyWindow is how long after a request the hub's
	// verification of it is answered: long enough for a hub that retries
	// its verification, short enough that nobody else can later make the
	// hub re-verify (with a secret of their choosing) on our behalf.
	webSubVerifyWindow = 5 * time.Minute
)

// WebSubSubscriber is a WebSub subscriber (W3C WebSub, Recommendation
// 2018-01-23) for the relay's topics, and the http.Handler that serves its
// callback. Subscribe and Unsubscribe send the hub the form request of
// #subscriber-sends-subscription-request; the handler answers the hub's
// verification of intent (#hub-verifies-intent), receives deliveries
// (#content-distribution), authenticates them
// (#authenticated-content-distribution), decodes their entries,
// de-duplicates them by event_id, verifies them with Keys and calls
// OnRecord once per new record.
//
// One callback URL serves every topic: verifications name their topic in
// hub.topic, deliveries in their Link rel="self". Topics are compared
// after normalization (lowercase scheme and host, query parameters sorted
// and percent-encoded one way), which is also the relay's canonical form.
//
// The handler answers:
//
//   - GET hub.mode=subscribe or unsubscribe: 200 text/plain with
//     hub.challenge exactly, only when this subscriber sent that request
//     for hub.topic in the last 5 minutes; anything else (another mode, a
//     topic it did not ask for, no challenge, a bad hub.lease_seconds) 404,
//     so nobody can subscribe or unsubscribe the callback behind its back.
//   - GET hub.mode=denied: 200; the denial is recorded (Subscription,
//     OnDenied, Wait). WebSub does not authenticate a denial, so it does
//     not stop the processing of signed deliveries; give each subscriber
//     an unguessable callback URL to keep strangers from sending any.
//   - POST: a delivery, always answered 204 once its body is read (W3C
//     #authenticated-content-distribution: acknowledge, then ignore what
//     fails), or 413 when the body exceeds MaxBody. Dropped unprocessed, and
//     counted in Stats: a topic not subscribed (or not yet verified); when
//     the topic has a secret, a missing X-Hub-Signature, one that does not
//     match (compared in constant time) or uses sha1 (sha256, sha384 and
//     sha512 are accepted); a body that is not an Atom feed or the relay's
//     JSON page by Content-Type. Entries refused one by one: an event that
//     does not parse or does not verify with Keys, an Atom <id> that is not
//     the event's event_id, a bad receipt.
//
// De-duplication remembers the last RecentIDs event ids delivered per
// topic (FIFO), so memory is bounded by RecentIDs × topics; a hub's
// retry repeats a recent batch, well inside that window.
//
// Fill the fields before first use; the methods are safe for concurrent
// use after. Records reach OnRecord from the handler's goroutine, one
// topic's records in order and one delivery at a time; the hub waits for
// the answer, so OnRecord should be quick. It may call Subscribe and
// Unsubscribe.
type WebSubSubscriber struct {
	// Hub is the hub's URL, e.g. {public}/websub/hub.
	Hub string
	// Callback is the public URL of this handler, sent as hub.callback.
	Callback string
	// HTTP sends hub requests; nil is http.DefaultClient.
	HTTP *http.Client
	// Token is the bearer read capability sent with hub requests; private
	// topics need it, public ones do not.
	Token string
	// NoSecret sends no hub.secret, for public topics whose deliveries are
	// then accepted unsigned. Otherwise Subscribe generates a secret per
	// topic: 32 random bytes as 43 characters of base64url, whose bytes are
	// the HMAC key; it is kept for renewals and forgotten on unsubscribe.
	NoSecret bool
	// Keys verifies every event delivered (signature and event id, spec
	// §6); an event that fails is refused. Nil verifies nothing: records
	// are then delivered with Verified false, their signatures and event
	// ids not checked (only that an Atom <id> names the event's event_id).
	Keys Keyring
	// OnRecord receives each new record of a topic, in delivery order.
	OnRecord func(topic string, rec Record)
	// OnDenied, when set, is told of each hub.mode=denied for a topic
	// this subscriber knows, with the hub's hub.reason (untrusted text).
	OnDenied func(topic, reason string)
	// MaxBody bounds a delivery's body in bytes; 0 is DefaultWebSubMaxBody.
	MaxBody int64
	// RecentIDs is how many event ids per topic are remembered; 0 is
	// DefaultWebSubRecentIDs.
	RecentIDs int
	// Logger gets Warn for deliveries dropped; nil discards.
	Logger *slog.Logger
	// State, when set, keeps each topic's latest request, secret and
	// verification outside the subscriber (WebSubState), so every
	// subscriber on the same State answers the hub and authenticates
	// deliveries, whichever sent the request; Wait then also reads it
	// (every 100 ms) for a verification another one answered. Nil keeps
	// them in memory. A State that fails makes Subscribe and Unsubscribe
	// return its error before anything is sent, a verification 503 (the
	// hub may retry) and a delivery 503 (the hub retries).
	State WebSubState

	mu     sync.Mutex
	topics map[string]*wsTopic // by topicKey

	delivered, duplicates, unknownTopic, badSignature, malformed, tooLarge, refused atomic.Int64
}

// WebSubSubscription is what a WebSubSubscriber knows of one topic.
// Lease is the hub.lease_seconds of the last verification, VerifiedAt its
// time; DeniedReason is the hub.reason of a denial.
type WebSubSubscription struct {
	Topic        string
	State        string // WebSubPending, WebSubActive, …
	Lease        time.Duration
	VerifiedAt   time.Time
	DeniedReason string
}

// WebSubStats counts what the handler did with deliveries. Delivered
// and Duplicates count entries; UnknownTopic, BadSignature, Malformed and
// TooLarge count whole deliveries dropped unprocessed; Refused counts
// entries dropped because they did not decode or verify.
type WebSubStats struct {
	Delivered    int64
	Duplicates   int64
	UnknownTopic int64
	BadSignature int64
	Malformed    int64
	TooLarge     int64
	Refused      int64
}

// Dropped is the number of deliveries dropped unprocessed.
func (st WebSubStats) Dropped() int64 {
	return st.UnknownTopic + st.BadSignature + st.Malformed + st.TooLarge
}

type wsTopic struct {
	topic      string // as given to Subscribe
	state      string
	secret     []byte // nil: deliveries are not authenticated
	verified   bool   // a subscribe was verified and no unsubscribe since: deliveries count
	lease      time.Duration
	verifiedAt time.Time
	reason     string
	req        *wsRequest // the latest request
	seen       recentIDs

	deliverMu sync.Mutex // one delivery of the topic at a time, in order
}

// wsRequest is one Subscribe or Unsubscribe and its outcome.
type wsRequest struct {
	id     string // random; a WebSubState's RequestID
	mode   string
	sentAt time.Time
	prev   string // the topic's state before the request
	done   chan struct{}
	err    error
}

func (r *wsRequest) resolve(err error) {
	select {
	case <-r.done:
	default:
		r.err = err
		close(r.done)
	}
}

// recentIDs is a set of the last n ids added, evicted first in first out.
type recentIDs struct {
	set  map[string]struct{}
	ring []string
	next int
}

func (r *recentIDs) has(id string) bool { _, ok := r.set[id]; return ok }

func (r *recentIDs) add(id string, n int) {
	if r.set == nil {
		r.set = make(map[string]struct{}, min(n, 256))
		r.ring = make([]string, 0, min(n, 256))
	}
	if len(r.ring) < n {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % n
	}
	r.set[id] = struct{}{}
}

// topicKey is the form topics are compared in: lowercase scheme and host,
// query sorted by name and encoded as url.Values does, no fragment. For
// the relay's topics it is the canonical URL (hub.Topic.URL).
func topicKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme, u.Host, u.Fragment, u.RawFragment = strings.ToLower(u.Scheme), strings.ToLower(u.Host), "", ""
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Subscribe asks the hub to subscribe Callback to topic (W3C WebSub
// #subscriber-sends-subscription-request): a form POST of hub.mode=
// subscribe, hub.topic, hub.callback, hub.lease_seconds (whole seconds,
// left out when lease is 0: the hub's default) and hub.secret (unless
// NoSecret), with Authorization: Bearer Token when Token is set. Calling
// it again renews the lease with the same secret. It returns once the hub
// accepted (2xx; the relay answers 202): verification of intent follows
// asynchronously, see Wait. Errors: *APIError for a refusal (401 without
// or with a bad token, 404 for another project's topic, 400 …), a
// transport error, or the context's error.
func (s *WebSubSubscriber) Subscribe(ctx context.Context, topic string, lease time.Duration) error {
	var stored WebSubStored
	var have bool
	if s.State != nil {
		var err error
		if stored, have, err = s.loadState(ctx, topic); err != nil {
			return fmt.Errorf("websub state: %w", err)
		}
	}
	s.mu.Lock()
	t := s.topicLocked(topic)
	if have && stored.Secret != nil && !s.NoSecret {
		t.secret = stored.Secret // the secret the hub holds, whoever sent it
	}
	switch {
	case s.NoSecret:
		t.secret = nil
	case t.secret == nil:
		var raw [32]byte
		if _, err := rand.Read(raw[:]); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("websub secret: %w", err)
		}
		t.secret = []byte(base64.RawURLEncoding.EncodeToString(raw[:]))
	}
	form := url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {s.Callback}}
	if lease > 0 {
		form.Set("hub.lease_seconds", strconv.FormatInt(int64(max(lease, time.Second)/time.Second), 10))
	}
	if t.secret != nil {
		form.Set("hub.secret", string(t.secret))
	}
	req := s.newRequestLocked(t, "subscribe")
	if t.state != WebSubActive && t.state != WebSubUnsubscribing {
		t.state = WebSubPending
	}
	var rec *WebSubStored
	if s.State != nil {
		rec = &WebSubStored{Topic: topic, RequestID: req.id, Mode: "subscribe", Secret: t.secret, SentAt: req.sentAt, State: WebSubPending}
		if have {
			rec.Verified, rec.Lease, rec.VerifiedAt = stored.Verified, stored.Lease, stored.VerifiedAt
		}
	}
	s.mu.Unlock()
	return s.send(ctx, t, req, form, rec, stored.State)
}

// Unsubscribe asks the hub to unsubscribe Callback from topic (W3C WebSub
// #subscriber-sends-subscription-request, hub.mode=unsubscribe, with the
// bearer Token when set). Deliveries are processed until the hub's
// verification arrives (see Wait); then the topic's secret and
// de-duplication state are forgotten. Errors as Subscribe.
func (s *WebSubSubscriber) Unsubscribe(ctx context.Context, topic string) error {
	var stored WebSubStored
	var have bool
	if s.State != nil {
		var err error
		if stored, have, err = s.loadState(ctx, topic); err != nil {
			return fmt.Errorf("websub state: %w", err)
		}
	}
	s.mu.Lock()
	t := s.topicLocked(topic)
	req := s.newRequestLocked(t, "unsubscribe")
	t.state = WebSubUnsubscribing
	var rec *WebSubStored
	if s.State != nil {
		r := stored // deliveries are processed until the hub verifies
		if !have {
			r = WebSubStored{Topic: topic, Secret: t.secret, Verified: t.verified, Lease: t.lease, VerifiedAt: t.verifiedAt}
		}
		r.RequestID, r.Mode, r.SentAt, r.Failed, r.State, r.Reason = req.id, "unsubscribe", req.sentAt, false, WebSubUnsubscribing, ""
		rec = &r
	}
	s.mu.Unlock()
	return s.send(ctx, t, req, url.Values{"hub.mode": {"unsubscribe"}, "hub.topic": {topic}, "hub.callback": {s.Callback}}, rec, stored.State)
}

// Wait blocks until the hub verified (or denied) the latest Subscribe or
// Unsubscribe of topic, and returns the lease the hub granted (0 after an
// unsubscribe). Errors: ErrWebSubDenied, ErrWebSubNoRequest, the error
// of the request itself, or the context's error (verification never came).
func (s *WebSubSubscriber) Wait(ctx context.Context, topic string) (time.Duration, error) {
	s.mu.Lock()
	t := s.topics[topicKey(topic)]
	if t == nil || t.req == nil {
		s.mu.Unlock()
		return 0, ErrWebSubNoRequest
	}
	req := t.req
	s.mu.Unlock()
	var poll <-chan time.Time
	if s.State != nil {
		tick := time.NewTicker(webSubStatePoll)
		defer tick.Stop()
		poll = tick.C
	}
	for done := false; !done; {
		select {
		case <-req.done:
			done = true
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-poll:
			s.syncState(ctx, t, req)
		}
	}
	if req.err != nil {
		return 0, req.err
	}
	if req.mode == "unsubscribe" {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.lease, nil
}

// Subscription returns what is known of topic; false when no request was
// ever made for it.
func (s *WebSubSubscriber) Subscription(topic string) (WebSubSubscription, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[topicKey(topic)]
	if t == nil {
		return WebSubSubscription{}, false
	}
	return WebSubSubscription{Topic: t.topic, State: t.state, Lease: t.lease, VerifiedAt: t.verifiedAt, DeniedReason: t.reason}, true
}

// Stats returns the handler's counters since the subscriber was created.
func (s *WebSubSubscriber) Stats() WebSubStats {
	return WebSubStats{Delivered: s.delivered.Load(), Duplicates: s.duplicates.Load(), UnknownTopic: s.unknownTopic.Load(),
		BadSignature: s.badSignature.Load(), Malformed: s.malformed.Load(), TooLarge: s.tooLarge.Load(), Refused: s.refused.Load()}
}

func (s *WebSubSubscriber) topicLocked(topic string) *wsTopic {
	if s.topics == nil {
		s.topics = map[string]*wsTopic{}
	}
	k := topicKey(topic)
	t := s.topics[k]
	if t == nil {
		t = &wsTopic{topic: topic}
		s.topics[k] = t
	}
	return t
}

// newRequestLocked makes req the topic's latest request; a Wait on the one
// it replaces ends with errSuperseded.
func (s *WebSubSubscriber) newRequestLocked(t *wsTopic, mode string) *wsRequest {
	if t.req != nil {
		t.req.resolve(errSuperseded)
	}
	t.req = &wsRequest{id: newRequestID(), mode: mode, sentAt: time.Now(), prev: t.state, done: make(chan struct{})}
	return t.req
}

// send POSTs the hub request. The request is registered before it is
// sent, since a hub may verify before its 202 arrives.
//
// With a State, rec is stored first; when the request fails it is stored
// again as Failed with the state it had before (prevState; unsubscribed
// when there was none), so no process answers the hub's verification.
func (s *WebSubSubscriber) send(ctx context.Context, t *wsTopic, req *wsRequest, form url.Values, rec *WebSubStored, prevState string) error {
	if rec != nil {
		if err := s.State.SaveWebSubTopic(ctx, *rec); err != nil {
			err = fmt.Errorf("websub state: %w", err)
			s.mu.Lock()
			if t.req == req {
				t.state = req.prev
			}
			req.resolve(err)
			s.mu.Unlock()
			return err
		}
	}
	err := s.post(ctx, form)
	if err != nil && rec != nil {
		failed := *rec
		failed.Failed, failed.State = true, prevState
		if failed.State == "" {
			failed.State = WebSubUnsubscribed
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if _, serr := s.State.ReplaceWebSubTopic(sctx, failed, rec.RequestID); serr != nil {
			s.logger().Warn("websub state: failed request not recorded", "topic", rec.Topic, "err", serr)
		}
		cancel()
	}
	if err != nil {
		s.mu.Lock()
		if t.req == req {
			t.state = req.prev
		}
		req.resolve(err) // Wait reports err; the hub's verification is refused
		s.mu.Unlock()
	}
	return err
}

func (s *WebSubSubscriber) post(ctx context.Context, form url.Values) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Hub, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("hub request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if s.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+s.Token)
	}
	hc := s.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(hr)
	if err != nil {
		return fmt.Errorf("hub %s: %w", form.Get("hub.mode"), err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return ParseAPIError(res.StatusCode, body)
	}
	return nil
}

// ServeHTTP is the callback: GET for verification of intent and denials,
// POST for deliveries (see the type's documentation).
func (s *WebSubSubscriber) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.serveVerification(w, r)
	case http.MethodPost:
		s.serveDelivery(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// serveVerification answers the hub's verification of intent (W3C WebSub
// #hub-verifies-intent) and denials (#subscription-validation).
func (s *WebSubSubscriber) serveVerification(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mode, topic := q.Get("hub.mode"), q.Get("hub.topic")
	if mode == "denied" {
		s.denied(r.Context(), topic, q.Get("hub.reason"))
		w.WriteHeader(http.StatusOK)
		return
	}
	challenge := q.Get("hub.challenge")
	if (mode != "subscribe" && mode != "unsubscribe") || topic == "" || challenge == "" {
		http.NotFound(w, r)
		return
	}
	var lease time.Duration
	if mode == "subscribe" {
		n, err := strconv.ParseInt(q.Get("hub.lease_seconds"), 10, 64)
		if err != nil || n < 0 || n > int64(1<<62/time.Second) {
			http.NotFound(w, r)
			return
		}
		lease = time.Duration(n) * time.Second
	}
	if s.State != nil {
		s.serveStoredVerification(w, r, mode, topic, challenge, lease)
		return
	}
	s.mu.Lock()
	t := s.topics[topicKey(topic)]
	if t == nil || t.req == nil || t.req.mode != mode || t.req.err != nil || time.Since(t.req.sentAt) > webSubVerifyWindow {
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	if mode == "subscribe" {
		t.state, t.verified, t.lease, t.verifiedAt, t.reason = WebSubActive, true, lease, time.Now(), ""
	} else {
		t.state, t.verified, t.secret, t.seen = WebSubUnsubscribed, false, nil, recentIDs{}
	}
	t.req.resolve(nil)
	s.mu.Unlock()
	writeChallenge(w, challenge)
}

func writeChallenge(w http.ResponseWriter, challenge string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, challenge)
}

func (s *WebSubSubscriber) denied(ctx context.Context, topic, reason string) {
	if s.State != nil {
		s.storeDenied(ctx, topic, reason)
	}
	s.mu.Lock()
	t := s.topics[topicKey(topic)]
	if t == nil {
		s.mu.Unlock()
		return
	}
	t.state, t.reason = WebSubDenied, reason
	if t.req != nil {
		t.req.resolve(fmt.Errorf("%w: %q", ErrWebSubDenied, reason))
	}
	on := s.OnDenied
	s.mu.Unlock()
	s.logger().Warn("websub subscription denied", "topic", t.topic)
	if on != nil {
		on(t.topic, reason)
	}
}

// deliveryEntry is one entry of a delivery: the id it claims (the Atom
// <id>, or the JSON event's event_id) and the wire record.
type deliveryEntry struct {
	id  string
	rec wire.Record
}

// serveDelivery processes a delivery (W3C WebSub #content-distribution,
// #authenticated-content-distribution).
func (s *WebSubSubscriber) serveDelivery(w http.ResponseWriter, r *http.Request) {
	limit := s.MaxBody
	if limit <= 0 {
		limit = DefaultWebSubMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.tooLarge.Add(1)
			s.logger().Warn("websub delivery too large", "max_bytes", limit)
			http.Error(w, "delivery too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	links, _ := ParseLinks(r.Header, nil)
	self, _ := links.Get(RelSelf, "")
	var t *wsTopic
	var secret []byte
	var ok bool
	if s.State != nil {
		st, have, err := s.loadState(r.Context(), self)
		if err != nil {
			s.logger().Warn("websub delivery not taken: state unavailable", "topic", self, "err", err)
			http.Error(w, "state unavailable", http.StatusServiceUnavailable) // the hub retries
			return
		}
		if ok = have && st.Verified; ok {
			secret = st.Secret
			s.mu.Lock()
			t = s.topicLocked(st.Topic) // this process's de-duplication and order
			s.mu.Unlock()
		}
	} else {
		s.mu.Lock()
		t = s.topics[topicKey(self)]
		ok = t != nil && t.verified
		if ok {
			secret = t.secret
		}
		s.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent) // from here on, whatever follows, acknowledge
	log := s.logger().With("topic", self)
	if !ok {
		s.unknownTopic.Add(1)
		log.Debug("websub delivery for a topic not subscribed")
		return
	}
	if secret != nil && !validSignature(secret, r.Header.Get("X-Hub-Signature"), body) {
		s.badSignature.Add(1)
		log.Warn("websub delivery dropped: missing or bad X-Hub-Signature")
		return
	}
	entries, err := parseDelivery(r.Header.Get("Content-Type"), body)
	if err != nil {
		s.malformed.Add(1)
		log.Warn("websub delivery dropped: malformed", "err", err)
		return
	}
	s.deliver(t, entries, log)
}

func (s *WebSubSubscriber) deliver(t *wsTopic, entries []deliveryEntry, log *slog.Logger) {
	n := s.RecentIDs
	if n <= 0 {
		n = DefaultWebSubRecentIDs
	}
	verifier := &Client{Keys: s.Keys} // record() decodes and, with Keys, verifies
	t.deliverMu.Lock()
	defer t.deliverMu.Unlock()
	for _, e := range entries {
		// Skip repeats by the id the entry claims before paying for the
		// Ed25519 verification; only verified ids are remembered.
		s.mu.Lock()
		dup := t.seen.has(e.id)
		s.mu.Unlock()
		if dup {
			s.duplicates.Add(1)
			continue
		}
		rec, err := verifier.record(e.rec)
		if err == nil && e.id != rec.Event.ID {
			err = fmt.Errorf("%w: entry id %q is not the event's event_id", ErrMalformedRecord, e.id)
		}
		if err != nil {
			s.refused.Add(1)
			log.Warn("websub entry refused", "err", err)
			continue
		}
		s.mu.Lock()
		t.seen.add(e.id, n)
		s.mu.Unlock()
		s.delivered.Add(1)
		if s.OnRecord != nil {
			s.OnRecord(t.topic, rec)
		}
	}
}

// validSignature checks an X-Hub-Signature "method=hex" (W3C WebSub
// #authenticated-content-distribution) in constant time; sha1 and unknown
// methods fail.
func validSignature(secret []byte, header string, body []byte) bool {
	method, sig, ok := strings.Cut(strings.TrimSpace(header), "=")
	if !ok {
		return false
	}
	var h func() hash.Hash
	switch strings.ToLower(method) {
	case "sha256":
		h = sha256.New
	case "sha384":
		h = sha512.New384
	case "sha512":
		h = sha512.New
	default:
		return false
	}
	want, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(h, secret)
	m.Write(body)
	return hmac.Equal(m.Sum(nil), want)
}

// parseDelivery reads a delivery's entries by its Content-Type: an Atom
// feed (application/atom+xml) whose entries hold the record JSON as text
// content, or the relay's JSON page (vendor JSON or application/json).
func parseDelivery(contentType string, body []byte) ([]deliveryEntry, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("content type %q: %w", contentType, err)
	}
	switch {
	case mt == MediaTypeAtom:
		return parseAtomDelivery(body)
	case mt == MediaTypeVendor || mt == mediaTypeJSON:
		var page wire.Events
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, fmt.Errorf("json delivery: %w", err)
		}
		out := make([]deliveryEntry, 0, len(page.Events))
		for _, r := range page.Events {
			// The id the event claims, checked against the decoded event.
			var claimed struct {
				EventID string `json:"event_id"`
			}
			_ = json.Unmarshal(r.Event, &claimed)
			out = append(out, deliveryEntry{id: claimed.EventID, rec: r})
		}
		return out, nil
	}
	return nil, fmt.Errorf("content type %q is neither Atom nor JSON", mt)
}

type atomDelivery struct {
	XMLName xml.Name `xml:"http://www.w3.org/2005/Atom feed"`
	Entries []struct {
		ID      string `xml:"http://www.w3.org/2005/Atom id"`
		Content struct {
			Type string `xml:"type,attr"`
			Text string `xml:",chardata"`
		} `xml:"http://www.w3.org/2005/Atom content"`
		Record *string `xml:"https://agenttool.dev/ns/correspondence record"`
	} `xml:"http://www.w3.org/2005/Atom entry"`
}

// parseAtomDelivery reads the feed of atom.Render: each <entry> has <id>
// = event_id and <at:record> (namespace
// https://agenttool.dev/ns/correspondence) holding {"event", "receipt"};
// a relay before issue 32 put that JSON in <content type="text"> instead,
// read when no <at:record> is present.
func parseAtomDelivery(body []byte) ([]deliveryEntry, error) {
	var f atomDelivery
	d := xml.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("atom delivery: %w", err)
	}
	out := make([]deliveryEntry, 0, len(f.Entries))
	for _, e := range f.Entries {
		de := deliveryEntry{id: strings.TrimSpace(e.ID)}
		if de.id == "" {
			de.id = "(none)" // never an event id: the entry is refused
		}
		switch {
		case e.Record != nil:
			// A record that is not the record JSON leaves rec empty: refused.
			_ = json.Unmarshal([]byte(*e.Record), &de.rec)
		case e.Content.Type == "text" || e.Content.Type == "":
			_ = json.Unmarshal([]byte(e.Content.Text), &de.rec)
		}
		out = append(out, de)
	}
	return out, nil
}

func (s *WebSubSubscriber) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
