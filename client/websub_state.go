package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// WebSubState keeps what a WebSubSubscriber must know of a topic to
// answer its hub — the latest request (its id, mode and time), the HMAC
// secret, and whether and for how long the hub verified it — outside the
// subscriber, so that several processes serving one callback URL (behind
// a load balancer) answer the hub's verification of intent and
// authenticate a delivery whichever of them sent the request. Nil
// (WebSubSubscriber.State) keeps it in the subscriber's memory.
//
// Topics are passed normalized (lowercase scheme and host, sorted
// query); an implementation that keeps a single topic may ignore the
// argument: the subscriber compares the stored Topic itself. The stored
// Secret is the HMAC key of X-Hub-Signature: it must be kept readable,
// and should be kept like any credential.
type WebSubState interface {
	// LoadWebSubTopic returns the stored state of topic; ok is false when
	// there is none.
	LoadWebSubTopic(ctx context.Context, topic string) (st WebSubStored, ok bool, err error)
	// SaveWebSubTopic stores st as its topic's state, replacing any.
	SaveWebSubTopic(ctx context.Context, st WebSubStored) error
	// ReplaceWebSubTopic stores st only while the stored RequestID is
	// requestID (no newer request was sent meanwhile); ok reports it.
	ReplaceWebSubTopic(ctx context.Context, st WebSubStored, requestID string) (ok bool, err error)
}

// WebSubStored is one topic's state as a WebSubState keeps it.
type WebSubStored struct {
	Topic     string    // as given to Subscribe
	RequestID string    // random id of the latest request
	Mode      string    // its hub.mode: "subscribe" or "unsubscribe"
	Secret    []byte    // the hub.secret sent (the HMAC key); nil when none
	SentAt    time.Time // when the latest request was sent
	Failed    bool      // the latest request never reached the hub or was refused
	// State is WebSubPending (a subscribe not yet verified, a renewal
	// included), WebSubActive, WebSubUnsubscribing, WebSubUnsubscribed or
	// WebSubDenied.
	State string
	// Verified: a subscribe was verified and no unsubscribe since, so
	// deliveries are processed (a renewal pending keeps it).
	Verified   bool
	Lease      time.Duration // hub.lease_seconds of the last verification
	VerifiedAt time.Time
	Reason     string // a denial's hub.reason (untrusted; at most maxDeniedReason bytes)
}

// webSubStatePoll is how often Wait reads a WebSubState for a
// verification another process answered.
const webSubStatePoll = 100 * time.Millisecond

// maxDeniedReason bounds the hub.reason kept in a WebSubState.
const maxDeniedReason = 200

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// loadState reads topic's stored state; ok is false when none is stored
// for that topic.
func (s *WebSubSubscriber) loadState(ctx context.Context, topic string) (WebSubStored, bool, error) {
	key := topicKey(topic)
	st, ok, err := s.State.LoadWebSubTopic(ctx, key)
	if err != nil || !ok || topicKey(st.Topic) != key {
		return WebSubStored{}, false, err
	}
	return st, true, nil
}

// syncState reads the stored state of t for Wait: a verification or
// denial of req that another subscriber on the same State answered
// resolves req here, and a newer request stored (sent by another)
// supersedes it.
func (s *WebSubSubscriber) syncState(ctx context.Context, t *wsTopic, req *wsRequest) {
	st, ok, err := s.loadState(ctx, t.topic)
	if err != nil || !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case st.RequestID != req.id:
		req.resolve(errSuperseded)
	case st.State == WebSubDenied:
		t.state, t.reason = WebSubDenied, st.Reason
		req.resolve(fmt.Errorf("%w: %q", ErrWebSubDenied, st.Reason))
	case req.mode == "subscribe" && st.State == WebSubActive:
		t.state, t.verified, t.lease, t.verifiedAt, t.reason = WebSubActive, true, st.Lease, st.VerifiedAt, ""
		req.resolve(nil)
	case req.mode == "unsubscribe" && st.State == WebSubUnsubscribed:
		t.state, t.verified, t.secret, t.seen = WebSubUnsubscribed, false, nil, recentIDs{}
		req.resolve(nil)
	}
}

// serveStoredVerification answers the hub's verification of intent from
// the State: the stored latest request must be of mode, not failed, and
// sent in the last 5 minutes; the verification is stored only while that
// request is still the latest.
func (s *WebSubSubscriber) serveStoredVerification(w http.ResponseWriter, r *http.Request, mode, topic, challenge string, lease time.Duration) {
	ctx := r.Context()
	st, ok, err := s.loadState(ctx, topic)
	if err != nil {
		s.logger().Warn("websub verification not answered: state unavailable", "topic", topic, "err", err)
		http.Error(w, "state unavailable", http.StatusServiceUnavailable)
		return
	}
	if !ok || st.Mode != mode || st.Failed || time.Since(st.SentAt) > webSubVerifyWindow {
		http.NotFound(w, r)
		return
	}
	next := st
	if mode == "subscribe" {
		next.State, next.Verified, next.Lease, next.VerifiedAt, next.Reason = WebSubActive, true, lease, time.Now(), ""
	} else {
		next.State, next.Verified, next.Secret = WebSubUnsubscribed, false, nil
	}
	if ok, err = s.State.ReplaceWebSubTopic(ctx, next, st.RequestID); err != nil {
		s.logger().Warn("websub verification not answered: state unavailable", "topic", topic, "err", err)
		http.Error(w, "state unavailable", http.StatusServiceUnavailable)
		return
	}
	if !ok { // a newer request was sent meanwhile
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	if t := s.topics[topicKey(topic)]; t != nil {
		if mode == "subscribe" {
			// The hub's lease starts when it has this answer: after the
			// store's write, so the local time is taken now (the stored
			// one, which others read, is up to one write earlier).
			t.state, t.verified, t.lease, t.verifiedAt, t.reason = WebSubActive, true, next.Lease, time.Now(), ""
		} else {
			t.state, t.verified, t.secret, t.seen = WebSubUnsubscribed, false, nil, recentIDs{}
		}
		if t.req != nil && t.req.id == st.RequestID {
			t.req.resolve(nil)
		}
	}
	s.mu.Unlock()
	writeChallenge(w, challenge)
}

// storeDenied records a denial of topic's latest request in the State.
func (s *WebSubSubscriber) storeDenied(ctx context.Context, topic, reason string) {
	st, ok, err := s.loadState(ctx, topic)
	if err != nil || !ok {
		return
	}
	if len(reason) > maxDeniedReason {
		reason = reason[:maxDeniedReason]
	}
	st.State, st.Reason = WebSubDenied, strings.ToValidUTF8(strings.ReplaceAll(reason, "\x00", ""), "")
	if _, err := s.State.ReplaceWebSubTopic(ctx, st, st.RequestID); err != nil {
		s.logger().Warn("websub denial not recorded: state unavailable", "topic", topic, "err", err)
	}
}
