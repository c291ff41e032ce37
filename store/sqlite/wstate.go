package sqlite

import (
	"database/sql"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/acrelay/acrelay/store"
)

// wstate is what the group committer remembers of committed rows, so that
// a common append runs three statements (savepoint, insert, release)
// instead of eight: each project's receipt counter and lineage flags, the
// sender pairs last seen active, and each session's highest session_seq.
//
// It is touched only while db.wmu is held (by the writer goroutine during
// a batch, or by a registry write that must invalidate it). It is trusted
// only while no other connection has written the database: every batch
// first compares PRAGMA data_version (which changes when another
// connection, such as an admin command in another process, commits) and
// starts afresh when it moved. Changes a job makes are staged and applied
// when its savepoint is released; a batch whose transaction fails drops
// the whole state, so it is reloaded from what was really committed.
type wstate struct {
	dataVersion int64
	projects    map[string]*projectState
	senders     *simplelru.LRU[senderKey, struct{}] // identity and key both active
	sessions    *simplelru.LRU[sessionKey, int64]   // highest stored session_seq
	// external runs when another connection is seen to have committed.
	external func()
	// threadEvery is how many of a project's events may wait outside
	// thread_events before a batch adds them (Options.ThreadIndexEvery).
	threadEvery int64
}

// projectState mirrors one projects row and what the lineage tables hold.
type projectState struct {
	lastSeq    int64
	lastAt     string // received_at of lastSeq, "" when none
	incomplete bool   // projects.lineage_incomplete: the frontier has rows
	// waiting is false only when lineage_waiting is known to hold no row of
	// the project: no claim waits for a predecessor, so an arrival readies
	// nothing.
	waiting bool
	dirty   bool // lastSeq or lastAt changed in this batch
	// threadIndexed is projects.thread_indexed_seq: every event up to it
	// is in thread_events (migration 0005).
	threadIndexed int64
}

// threadIndexEvery is Options.ThreadIndexEvery's default: a bulk insert
// every 256 of a project's appends writes each busy thread's leaf of
// thread_events once for them, and a thread-filtered read scans at most
// ~256 + one batch of the newest events besides the index.
const threadIndexEvery = 256

type senderKey struct{ projectID, keyID, identityID string }

type sessionKey struct{ projectID, identityID, deviceID, sessionID string }

// Bounds on the remembered senders and sessions; past them the least
// recently used is forgotten (its rows are re-read on its next use).
const (
	maxSenders  = 1 << 14
	maxSessions = 1 << 16
)

func newWState() *wstate {
	return &wstate{
		dataVersion: -1,
		projects:    map[string]*projectState{},
		senders:     must(simplelru.NewLRU[senderKey, struct{}](maxSenders, nil)),
		sessions:    must(simplelru.NewLRU[sessionKey, int64](maxSessions, nil)),
	}
}

// reset forgets everything; the next use re-reads the rows.
func (w *wstate) reset() {
	w.dataVersion = -1
	w.forget()
}

// forget drops what is remembered of committed rows but keeps the
// data_version baseline: after a rollback of this connection's own
// transaction, which no other connection's commit is hidden behind.
func (w *wstate) forget() {
	clear(w.projects)
	w.senders.Purge()
	w.sessions.Purge()
}

// must is for the caches' constructors, which fail only on a size ≤ 0.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// begin runs at the start of each batch transaction: it starts afresh when
// another connection has committed since the last batch.
func (w *wstate) begin(t *txn) error {
	var v int64
	var marked bool
	if err := t.queryRow(dataVersion).Scan(&v, &marked); err != nil {
		return err
	}
	if !marked {
		// A new writer connection: its data_version says nothing about
		// the old one's baseline.
		if _, err := t.exec(writerMark); err != nil {
			return err
		}
		w.dataVersion = -1
	}
	w.observe(v)
	return nil
}

// observe takes a data_version reading of the writer connection (see
// dataVersion for a replaced connection): when it
// moved, another connection has committed, and everything remembered
// (here and in the token cache) is dropped.
//
// After a reset (dataVersion -1) any reading counts as a move: a change
// committed elsewhere between the reset and this reading must not become
// the new baseline unnoticed.
func (w *wstate) observe(v int64) {
	if v == w.dataVersion {
		return
	}
	w.reset()
	w.dataVersion = v
	if w.external != nil {
		w.external()
	}
}

// project returns the state of projectID, reading it on first use.
// Errors: store.ErrNotFound for an unknown project.
func (w *wstate) project(t *txn, projectID string) (*projectState, error) {
	if p, ok := w.projects[projectID]; ok {
		return p, nil
	}
	var p projectState
	var at sql.NullString
	err := t.queryRow(selectProjectState, projectID, projectID).Scan(&p.lastSeq, &at, &p.incomplete, &p.waiting, &p.threadIndexed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	p.lastAt = at.String
	w.projects[projectID] = &p
	return &p, nil
}

// markWaiting records that a claim of projectID now waits for its
// predecessor (a lineage_waiting row), so appends run the release and
// reconciliation steps. Set at once rather than staged: a stale true only
// costs a lookup; a project not loaded yet reads it from the table.
func (w *wstate) markWaiting(projectID string) {
	if w == nil {
		return
	}
	if p, ok := w.projects[projectID]; ok {
		p.waiting = true
	}
}

// flush writes the receipt counters changed in this batch, and adds a
// project's events to thread_events once threadEvery of them wait outside
// it; it runs inside the batch transaction, just before the commit (a
// failed commit resets w, so nothing here outlives a rollback).
func (w *wstate) flush(t *txn) error {
	for id, p := range w.projects {
		if !p.dirty {
			continue
		}
		if _, err := t.exec(updateProjectHead, p.lastSeq, p.lastAt, id); err != nil {
			return err
		}
		p.dirty = false
		if p.lastSeq-p.threadIndexed < max(w.threadEvery, 1) {
			continue
		}
		if _, err := t.exec(indexThreadTail, id); err != nil {
			return err
		}
		if _, err := t.exec(updateThreadIndexed, id); err != nil {
			return err
		}
		p.threadIndexed = p.lastSeq
	}
	return nil
}

// senderActive reports whether the pair was seen active since the last
// invalidation.
func (w *wstate) senderActive(k senderKey) bool {
	_, ok := w.senders.Get(k)
	return ok
}

func (w *wstate) rememberSender(k senderKey) { w.senders.Add(k, struct{}{}) }

// forgetSenders runs after a key revocation or identity deactivation.
func (w *wstate) forgetSenders() { w.senders.Purge() }

func (w *wstate) sessionMax(k sessionKey) (int64, bool) {
	return w.sessions.Get(k)
}

func (w *wstate) rememberSession(k sessionKey, seq int64) {
	if v, ok := w.sessions.Peek(k); ok && v >= seq {
		return
	}
	w.sessions.Add(k, seq)
}

// receiptTime is received_at for a batch: the clock at millisecond
// precision, UTC, never before the project's previous receipt, so
// received_at never decreases along received_seq.
func receiptTime(now time.Time, last string) string {
	at := now.UTC().Truncate(time.Millisecond).Format(timeLayout)
	if at < last {
		return last
	}
	return at
}

// tokenCache remembers bearer tokens read by GetToken, so a request does
// not read the tokens table each time. RevokeToken invalidates it before
// returning; a revocation committed by another process (an admin command
// on the same file) is noticed by the next batch or within
// externalCheckInterval. An entry read before an invalidation is never
// stored after it (the epoch check). At most maxTokens, least recently
// used forgotten first. The zero value is ready to use.
type tokenCache struct {
	mu    sync.Mutex // orders the epoch check with the store
	epoch uint64
	m     *simplelru.LRU[string, store.Token]
}

const maxTokens = 1 << 12

func (c *tokenCache) get(id string) (store.Token, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		return store.Token{}, c.epoch, false
	}
	t, ok := c.m.Get(id)
	if ok {
		t.Scopes = slices.Clone(t.Scopes)
	}
	return t, c.epoch, ok
}

// put stores t unless the cache was invalidated since epoch was read.
func (c *tokenCache) put(id string, t store.Token, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return
	}
	if c.m == nil {
		c.m = must(simplelru.NewLRU[string, store.Token](maxTokens, nil))
	}
	t.Scopes = slices.Clone(t.Scopes)
	c.m.Add(id, t)
}

func (c *tokenCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if c.m != nil {
		c.m.Purge()
	}
}
