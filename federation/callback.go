package federation

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/store"
)

// peerState keeps a link's WebSub subscriber state in the store
// (client.WebSubState over store.PeerSubscriptions): one topic per link,
// so the topic argument is not needed to find it (the subscriber
// compares the stored topic itself).
type peerState struct {
	st                store.PeerSubscriptions
	projectID, peerID string
}

var _ client.WebSubState = peerState{}

func (p peerState) LoadWebSubTopic(ctx context.Context, _ string) (client.WebSubStored, bool, error) {
	s, err := p.st.PeerSubscription(ctx, p.projectID, p.peerID)
	if errors.Is(err, store.ErrNotFound) {
		return client.WebSubStored{}, false, nil
	}
	if err != nil {
		return client.WebSubStored{}, false, err
	}
	return client.WebSubStored{Topic: s.Topic, RequestID: s.RequestID, Mode: s.Mode, Secret: s.Secret, SentAt: s.RequestedAt,
		Failed: s.Failed, State: s.State, Verified: s.Verified, Lease: s.Lease, VerifiedAt: s.VerifiedAt, Reason: s.Reason}, true, nil
}

func (p peerState) row(w client.WebSubStored) store.PeerSubscription {
	return store.PeerSubscription{ProjectID: p.projectID, PeerID: p.peerID, Topic: w.Topic, RequestID: w.RequestID, Mode: w.Mode,
		Secret: w.Secret, RequestedAt: w.SentAt, Failed: w.Failed, State: w.State, Verified: w.Verified, Lease: w.Lease,
		VerifiedAt: w.VerifiedAt, Reason: w.Reason}
}

func (p peerState) SaveWebSubTopic(ctx context.Context, w client.WebSubStored) error {
	return p.st.SavePeerSubscription(ctx, p.row(w))
}

func (p peerState) ReplaceWebSubTopic(ctx context.Context, w client.WebSubStored, requestID string) (bool, error) {
	return p.st.ReplacePeerSubscription(ctx, p.row(w), requestID)
}

// peerCacheFor is how long a process that does not run a link keeps
// what it read of it (the peer row) to serve the link's callback.
const peerCacheFor = 10 * time.Second

// callbackLinks serves the callbacks of links this process does not run
// (doc.go, "Callback on any process"): per link, a link that is never
// started, whose subscriber answers from the store and whose pushes go
// through the link's own push path (takePage: clock check, ingest).
type callbackLinks struct {
	mu    sync.Mutex
	links map[string]callbackLink // by peer id
}

type callbackLink struct {
	l    *link
	read time.Time
}

// serveShared serves the callback of link peerID, which this process
// does not run, from the store. A link that does not exist: a delivery
// is 410 Gone (the hub drops the subscription), a verification 404.
func (m *Manager) serveShared(w http.ResponseWriter, r *http.Request, peerID string) {
	m.shared.mu.Lock()
	c, ok := m.shared.links[peerID]
	m.shared.mu.Unlock()
	if !ok || time.Since(c.read) > peerCacheFor {
		peers, err := m.st.Peers(r.Context(), "")
		if err != nil {
			m.log.Warn("federation: callback: list peers", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		p, found := findPeer(peers, peerID)
		m.shared.mu.Lock()
		if m.shared.links == nil {
			m.shared.links = map[string]callbackLink{}
		}
		if !found {
			delete(m.shared.links, peerID)
			m.shared.mu.Unlock()
			if r.Method == http.MethodPost {
				w.WriteHeader(http.StatusGone)
				return
			}
			http.NotFound(w, r)
			return
		}
		if !ok || c.l.peer != p {
			c.l = newLink(m, p, store.Lease{})
			c.l.callbackOnly = true
		}
		m.shared.mu.Unlock()
		e, err := splitViewOf(r.Context(), m.st, p)
		m.shared.mu.Lock()
		if err != nil {
			m.shared.mu.Unlock()
			m.log.Warn("federation: callback: split view evidence", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		c.l.halted.Store(e != nil) // its pushes are dropped (witness.go)
		c.read = time.Now()
		m.shared.links[peerID] = c
		m.shared.mu.Unlock()
	}
	c.l.sub.ServeHTTP(w, r)
}
