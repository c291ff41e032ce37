package relay

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Wake stream settings (spec §9, STYLE §7).
const (
	// DefaultWakeHeartbeat is the interval of the ": heartbeat" comment.
	DefaultWakeHeartbeat = 15 * time.Second
	// DefaultWakeWriteTimeout bounds one frame's write and flush; a client
	// that does not take it in time is disconnected.
	DefaultWakeWriteTimeout = 10 * time.Second
	// DefaultWakeMaxStreamsPerToken caps one token's open wake streams.
	DefaultWakeMaxStreamsPerToken = 64

	wakeBuffer        = 16  // frames queued per subscriber; the oldest gives way
	wakePage          = 100 // recipients read per ActiveIdentityIDs page
	wakeMaxInFlight   = 8   // publishes in flight per fan-out
	wakePageTimeout   = 10 * time.Second
	wakeEventFormat   = "wake_event/v1"
	wakeKey           = "correspondence"
	mediaEventStream  = "text/event-stream"
	wakeCacheControl  = "private, no-cache"
	wakeHeartbeatLine = ": heartbeat\n\n"
)

// wakeFrame is one invalidation for one subscriber.
type wakeFrame struct {
	seq        int64
	version    int64
	occurredAt time.Time
	newest     wakeRecord
}

// wakeRecord names the newest record of a frame (spec §9 context): its
// ids and kind, never its body. Zero when that record could not be read;
// the frame then carries received_seq alone.
type wakeRecord struct {
	eventID, repositoryID, threadID, kind string
}

// wakeReadTimeout bounds the read of a frame's newest record.
const wakeReadTimeout = 5 * time.Second

// wakeSub is one open wake stream. Its handler is the only receiver on
// ch; publishers (holding the project's lock) are the only senders.
type wakeSub struct {
	project    *wakeProject
	identityID string
	tokenID    string // the bearer token that opened the stream
	ch         chan wakeFrame
	end        chan struct{} // closed when access ends (token revoked, identity deactivated)
	endOnce    sync.Once
}

// stop ends the stream's access; its handler returns at once.
func (s *wakeSub) stop() { s.endOnce.Do(func() { close(s.end) }) }

// wakeIdentity holds the streams of one identity and its wake_version.
type wakeIdentity struct {
	subs    map[*wakeSub]struct{}
	version int64
}

// wakeProject holds the streams of one project and its fan-out state.
type wakeProject struct {
	id         string
	mu         sync.Mutex
	identities map[string]*wakeIdentity
	subs       int
	pending    int64 // newest received_seq announced
	sent       int64 // newest received_seq fanned out
	running    bool  // a fan-out goroutine owns this project
}

// wakeFanout is the in-process wake fan-out (spec §9): streams are grouped by
// project and identity; Advance schedules a fan-out that pages the
// project's active identities and publishes to each one's streams without
// ever blocking. Fan-outs of one project are coalesced: a burst of appends
// yields frames for the newest received_seq rather than one per append,
// which is all an invalidation needs.
type wakeFanout struct {
	reg interface {
		ActiveIdentityIDs(ctx context.Context, projectID, afterID string, limit int) ([]string, error)
	}
	feed     recordsReader
	advances store.Advances
	log      *slog.Logger

	mu       sync.Mutex
	sub      *store.AdvanceSubscription // while any stream is open
	projects map[string]*wakeProject
	perToken map[string]int // open streams per bearer token
	maxToken int            // cap per token; < 0 means none
}

// wakeStore is what the wake fan-out reads: each project's active
// identities (store.Registry), the newest record (store.Feed) and the
// advances that start a fan-out (store.Advances).
type wakeStore interface {
	ActiveIdentityIDs(ctx context.Context, projectID, afterID string, limit int) ([]string, error)
	recordsReader
	store.Advances
}

var _ wakeStore = store.Store(nil)

func newWakeFanout(st wakeStore, log *slog.Logger, maxPerToken int) *wakeFanout {
	return &wakeFanout{reg: st, feed: st, advances: st, log: log, projects: make(map[string]*wakeProject), perToken: make(map[string]int), maxToken: maxPerToken}
}

// subscribe registers a stream for identityID of projectID.
func (h *wakeFanout) subscribe(projectID, identityID, tokenID string) (*wakeSub, error) {
	h.mu.Lock() // held while adding, so unsubscribe cannot forget p meanwhile
	defer h.mu.Unlock()
	if h.maxToken >= 0 && h.perToken[tokenID] >= h.maxToken {
		return nil, errTooManyStreams
	}
	h.perToken[tokenID]++
	if h.sub == nil {
		// Subscribed before the stream reads anything, so no append after
		// its first read goes unheard.
		h.sub = h.advances.SubscribeAdvances()
		go h.follow(h.sub)
	}
	p := h.projects[projectID]
	if p == nil {
		p = &wakeProject{id: projectID, identities: make(map[string]*wakeIdentity)}
		h.projects[projectID] = p
	}
	sub := &wakeSub{project: p, identityID: identityID, tokenID: tokenID, ch: make(chan wakeFrame, wakeBuffer), end: make(chan struct{})}
	p.mu.Lock()
	wi := p.identities[identityID]
	if wi == nil {
		wi = &wakeIdentity{subs: make(map[*wakeSub]struct{})}
		p.identities[identityID] = wi
	}
	wi.subs[sub] = struct{}{}
	p.subs++
	p.mu.Unlock()
	return sub, nil
}

// unsubscribe removes sub (a no-op when it was dropped already) and
// forgets a project with no streams left.
func (h *wakeFanout) unsubscribe(sub *wakeSub) {
	p := sub.project
	p.mu.Lock()
	p.removeLocked(sub)
	empty := p.subs == 0
	p.mu.Unlock()
	h.mu.Lock()
	if h.perToken[sub.tokenID]--; h.perToken[sub.tokenID] <= 0 {
		delete(h.perToken, sub.tokenID)
	}
	if empty {
		p.mu.Lock()
		if p.subs == 0 && h.projects[p.id] == p {
			delete(h.projects, p.id)
		}
		p.mu.Unlock()
	}
	if len(h.perToken) == 0 && h.sub != nil {
		h.sub.Close() // the last stream left: follow ends
		h.sub = nil
	}
	h.mu.Unlock()
}

func (p *wakeProject) removeLocked(sub *wakeSub) bool {
	wi := p.identities[sub.identityID]
	if wi == nil {
		return false
	}
	if _, ok := wi.subs[sub]; !ok {
		return false
	}
	delete(wi.subs, sub)
	p.subs--
	if len(wi.subs) == 0 {
		delete(p.identities, sub.identityID)
	}
	return true
}

// follow pumps the store's advances into the fan-out while streams are
// open: the subscription is taken with the first stream and closed with
// the last (whose close ends this loop).
func (h *wakeFanout) follow(sub *store.AdvanceSubscription) {
	for range sub.Ready() {
		for _, a := range sub.Take() {
			h.advance(a.ProjectID, a.ReceivedSeq)
		}
	}
}

// advance tells the fan-out that projectID committed up to seq. It never
// blocks: the fan-out runs on its own goroutine (one per project at a
// time).
func (h *wakeFanout) advance(projectID string, seq int64) {
	h.mu.Lock()
	p := h.projects[projectID]
	h.mu.Unlock()
	if p == nil {
		return // nobody listens in this process
	}
	p.mu.Lock()
	if seq > p.pending {
		p.pending = seq
	}
	start := !p.running && p.pending > p.sent
	if start {
		p.running = true
	}
	p.mu.Unlock()
	if start {
		go h.fanOut(p)
	}
}

// fanOut publishes the newest pending received_seq until none is left.
func (h *wakeFanout) fanOut(p *wakeProject) {
	for {
		p.mu.Lock()
		if p.pending <= p.sent || p.subs == 0 {
			p.sent = max(p.sent, p.pending)
			p.running = false
			p.mu.Unlock()
			return
		}
		seq := p.pending
		p.sent = seq
		p.mu.Unlock()
		h.publishAll(p, seq, h.newest(p.id, seq))
	}
}

// newest reads the ids of the record at seq with one store read, once per
// fan-out (a coalesced burst reads only its newest). A failed read is
// logged and leaves the frame with received_seq alone: the invalidation
// still goes out.
func (h *wakeFanout) newest(projectID string, seq int64) wakeRecord {
	ctx, cancel := context.WithTimeout(context.Background(), wakeReadTimeout)
	defer cancel()
	return readNewest(ctx, h.feed, h.log, projectID, seq)
}

// recordsReader is the one store.Feed method the wake frames need.
type recordsReader interface {
	RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]store.Record, error)
}

// readNewest returns the ids of the record at seq (zero when it cannot be
// read, or seq names no record).
func readNewest(ctx context.Context, feed recordsReader, log *slog.Logger, projectID string, seq int64) wakeRecord {
	recs, err := feed.RecordsAfter(ctx, projectID, seq-1, 1)
	if err != nil {
		log.Warn("wake fan-out: reading the newest record failed", "project_id", projectID, "received_seq", seq, "err", err)
		return wakeRecord{}
	}
	if len(recs) == 0 || recs[0].ReceivedSeq != seq {
		return wakeRecord{}
	}
	r := recs[0]
	return wakeRecord{eventID: r.EventID, repositoryID: r.RepositoryID, threadID: r.ThreadID, kind: string(r.Kind)}
}

// publishAll pages the project's active identities wakePage at a time
// (every active identity is a recipient, spec §9) and publishes to those
// with streams here, at most wakeMaxInFlight at once.
func (h *wakeFanout) publishAll(p *wakeProject, seq int64, newest wakeRecord) {
	after := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wakePageTimeout)
		ids, err := h.reg.ActiveIdentityIDs(ctx, p.id, after, wakePage)
		cancel()
		if err != nil {
			h.log.Warn("wake fan-out: reading recipients failed", "project_id", p.id, "received_seq", seq, "err", err)
			return
		}
		var recipients []string
		p.mu.Lock()
		for _, id := range ids {
			if _, ok := p.identities[id]; ok {
				recipients = append(recipients, id)
			}
		}
		p.mu.Unlock()
		inParallel(recipients, wakeMaxInFlight, func(id string) { p.publish(id, seq, newest, time.Now()) })
		if len(ids) < wakePage {
			return
		}
		after = ids[len(ids)-1]
	}
}

// inParallel calls f for each item with at most n calls in flight.
func inParallel(items []string, n int, f func(string)) {
	if len(items) <= 1 {
		for _, it := range items {
			f(it)
		}
		return
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(n, len(items)) {
		wg.Go(func() {
			for it := range work {
				f(it)
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

// publish queues one frame on every stream of identityID without ever
// waiting: when a stream's buffer is full its oldest frame gives way, since
// a newer invalidation supersedes it. A stream that stops reading is not
// waited for either: its handler's write deadline ends it.
func (p *wakeProject) publish(identityID string, seq int64, newest wakeRecord, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wi := p.identities[identityID]
	if wi == nil {
		return
	}
	f := wakeFrame{seq: seq, version: wi.next(at), occurredAt: at, newest: newest}
	for sub := range wi.subs {
		sub.offer(f)
	}
}

// offer queues f, discarding the oldest queued frame when the buffer is
// full. Callers hold the project's lock, so no other sender interleaves.
func (sub *wakeSub) offer(f wakeFrame) {
	for {
		select {
		case sub.ch <- f:
			return
		default:
		}
		select {
		case <-sub.ch:
		default:
		}
	}
}

// publishTo sends one frame to a single stream (the Last-Event-ID answer).
func (p *wakeProject) publishTo(sub *wakeSub, seq int64, newest wakeRecord, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wi := p.identities[sub.identityID]
	if wi == nil {
		return
	}
	if _, ok := wi.subs[sub]; !ok {
		return
	}
	sub.offer(wakeFrame{seq: seq, version: wi.next(at), occurredAt: at, newest: newest})
}

// next returns the identity's next wake_version: an in-process counter
// that never goes below the current Unix time in microseconds, so that it
// keeps increasing across reconnects to another process or a restart
// (unless the clock steps back, or an identity sustains more than a
// million frames a second). Values stay below 2^53 until the 2250s.
func (wi *wakeIdentity) next(at time.Time) int64 {
	wi.version = max(wi.version+1, at.UnixMicro())
	return wi.version
}

// endWhere ends every stream for which match is true (revocation in this
// process takes effect at once; see handleWake for other processes).
func (h *wakeFanout) endWhere(match func(projectID string, sub *wakeSub) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.projects {
		p.mu.Lock()
		for _, wi := range p.identities {
			for sub := range wi.subs {
				if match(p.id, sub) {
					sub.stop()
				}
			}
		}
		p.mu.Unlock()
	}
}

// subscribers counts the open streams (tests and metrics).
func (h *wakeFanout) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, p := range h.projects {
		p.mu.Lock()
		n += p.subs
		p.mu.Unlock()
	}
	return n
}

// wakeEventJSON is the data of a change frame (spec §9).
type wakeEventJSON struct {
	Format      string           `json:"_format"`
	Key         string           `json:"key"`
	Kind        string           `json:"kind"`
	IdentityID  string           `json:"identity_id"`
	OccurredAt  string           `json:"occurred_at"`
	WakeVersion int64            `json:"wake_version"`
	Context     wakeEventContext `json:"context"`
}

// wakeEventContext says what changed (spec §9): the newest receipt's
// received_seq and that record's ids and kind, so a consumer can tell
// which repository to read. The ids are left out when the record could not
// be read.
type wakeEventContext struct {
	ReceivedSeq  string `json:"received_seq"`
	EventID      string `json:"event_id,omitempty"`
	RepositoryID string `json:"repository_id,omitempty"`
	ThreadID     string `json:"thread_id,omitempty"`
	Kind         string `json:"kind,omitempty"`
}

// handleWake serves GET /v1/wake/voice?identity_id=…&keys=correspondence
// (spec §9): an SSE stream of "change" invalidations for an active
// identity of the bearer's project, a heartbeat comment every
// WakeHeartbeat, and an immediate frame when Last-Event-ID (a received_seq)
// is behind the project's head.
func (s *Server) handleWake(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if err := requireProject(p, store.ScopeRead); err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := readQuery(r, "identity_id", "keys")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if q["keys"] != wakeKey {
		s.writeError(w, r, errKeysInvalid)
		return
	}
	identityID, ok := q["identity_id"]
	if !ok {
		s.writeError(w, r, errIdentityIDRequired)
		return
	}
	if !correspondence.ValidUUID(identityID) {
		s.writeError(w, r, errIdentityIDInvalid)
		return
	}
	if _, ok := negotiate(r, []string{mediaEventStream}); !ok {
		s.writeError(w, r, errNotAcceptableStream)
		return
	}
	ident, err := s.st.GetIdentity(r.Context(), p.ProjectID, identityID)
	switch {
	case isNotFound(err) || err == nil && ident.ProjectID != p.ProjectID:
		s.writeError(w, r, errIdentityNotFound) // another project's identity is indistinguishable from none
		return
	case err != nil:
		s.writeError(w, r, err)
		return
	case ident.Status != store.StatusActive:
		s.writeError(w, r, errIdentityNotActive)
		return
	}

	sub, err := s.wake.subscribe(p.ProjectID, identityID, p.TokenID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.wake.unsubscribe(sub)
	// Subscribed first, then the head read: an append in between is seen
	// by one or the other (or both; frames may repeat).
	if last, ok := parseSeq(r.Header.Get("Last-Event-ID")); ok {
		head, _, err := s.st.Head(r.Context(), p.ProjectID)
		if err == nil && head > last {
			sub.project.publishTo(sub, head, readNewest(r.Context(), s.st, s.log, p.ProjectID, head), time.Now())
		}
	}

	h := w.Header()
	h.Set("Content-Type", mediaEventStream)
	h.Set("Cache-Control", wakeCacheControl)
	h.Set("Vary", "Authorization")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // the stream outlives the server's ReadTimeout
	if err := s.flushWake(rc, nil); err != nil {
		return
	}
	ticker := time.NewTicker(s.wakeHeartbeat())
	defer ticker.Stop()
	buf := make([]byte, 0, 512)
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-sub.end:
			s.log.DebugContext(r.Context(), "wake stream ended: access revoked", "project_id", p.ProjectID, "identity_id", identityID)
			return
		case f := <-sub.ch:
			buf, err = appendWakeFrame(buf[:0], identityID, f)
			if err == nil {
				err = s.flushWake(rc, func() error { _, err := w.Write(buf); return err })
			}
		case <-ticker.C:
			// Revocation by another process reaches this stream within one
			// heartbeat: the token and the identity are re-read each time.
			if !s.wakeAccessLive(r.Context(), p, identityID) {
				return
			}
			err = s.flushWake(rc, func() error { _, err := w.Write([]byte(wakeHeartbeatLine)); return err })
		}
		if err != nil {
			s.log.DebugContext(r.Context(), "wake stream ended", "project_id", p.ProjectID, "identity_id", identityID, "err", err)
			return
		}
	}
}

// wakeAccessLive reports whether the stream's token is still unrevoked and
// its identity still active. A store error keeps the stream (the next
// heartbeat checks again).
func (s *Server) wakeAccessLive(ctx context.Context, p principal, identityID string) bool {
	if t, err := s.st.GetToken(ctx, p.TokenID); err == nil && t.Revoked || isNotFound(err) {
		return false
	}
	if i, err := s.st.GetIdentity(ctx, p.ProjectID, identityID); err == nil && i.Status != store.StatusActive || isNotFound(err) {
		return false
	}
	return true
}

// flushWake writes (when write is non-nil) and flushes under a fresh write
// deadline, so a client that stops reading costs at most WakeWriteTimeout.
func (s *Server) flushWake(rc *http.ResponseController, write func() error) error {
	_ = rc.SetWriteDeadline(time.Now().Add(s.wakeWriteTimeout()))
	if write != nil {
		if err := write(); err != nil {
			return err
		}
	}
	return rc.Flush()
}

// appendWakeFrame appends "id: <seq>\nevent: change\ndata: <json>\n\n".
func appendWakeFrame(dst []byte, identityID string, f wakeFrame) ([]byte, error) {
	seq := strconv.FormatInt(f.seq, 10)
	data, err := marshalJSON(wakeEventJSON{
		Format: wakeEventFormat, Key: wakeKey, Kind: "updated", IdentityID: identityID,
		OccurredAt: correspondence.FormatTimestamp(f.occurredAt), WakeVersion: f.version,
		Context: wakeEventContext{ReceivedSeq: seq, EventID: f.newest.eventID, RepositoryID: f.newest.repositoryID,
			ThreadID: f.newest.threadID, Kind: f.newest.kind},
	})
	if err != nil {
		return dst, err
	}
	dst = append(dst, "id: "...)
	dst = append(dst, seq...)
	dst = append(dst, "\nevent: change\ndata: "...)
	dst = append(dst, data...)
	dst = append(dst, "\n\n"...)
	return dst, nil
}

func (s *Server) wakeHeartbeat() time.Duration {
	if s.cfg.WakeHeartbeat > 0 {
		return s.cfg.WakeHeartbeat
	}
	return DefaultWakeHeartbeat
}

func (s *Server) wakeWriteTimeout() time.Duration {
	if s.cfg.WakeWriteTimeout > 0 {
		return s.cfg.WakeWriteTimeout
	}
	return DefaultWakeWriteTimeout
}
