package federation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
	"github.com/acrelay/acrelay/witness"
)

// Witnessing (spec/tlog.md §Checkpoints and §Auditing, issue 24 item 5):
// a link is a witness of its remote's log for its project. Every
// WitnessInterval, and after each backfill round, it reads the remote's
// checkpoint (GET /v1/log/{project_id}/checkpoint), verified with the
// remote's log key (GET /v1/log-key, pinned in the link's
// store.WitnessState the first time), and puts it to witness.Add, the
// decision of this relay's C2SP add-checkpoint route, as a request from
// the size it cosigned last with the remote's consistency proof, over
// the link's state (compare-and-set on its size). Cosigned, the note is
// POSTed back to the remote (/v1/log/{project_id}/cosignatures: the wire
// existing peers speak), which serves it with its checkpoint; a remote
// answering 403 (a one-way link) is said once and offered it again with
// a backoff. A fork or a checkpoint no proof joins to the one cosigned
// (witness.InconsistentError) is a split view: both notes are stored as
// evidence (store.SplitView), the link stops mirroring on every process
// until the operator removes it, and it is raised: one ERROR line, the
// metric acrelay_federation_split_views, /readyz degraded.
//
// The remote's own witness key (GET /v1/witness-key) is kept in the
// state too: this relay accepts cosignatures on its own checkpoints only
// by the witness keys of its project's peer links.

// DefaultWitnessInterval is how often a link reads the remote's
// checkpoint besides after each backfill round.
const DefaultWitnessInterval = 10 * time.Second

// errSplitView ends a link: the remote showed two histories.
var errSplitView = errors.New("split view")

// witnessSigner returns this relay's witness signer, creating the key in
// the store the first time (witness.StoredKey).
func (m *Manager) witnessSigner(ctx context.Context) (note.Signer, error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.wsigner != nil {
		return m.wsigner, nil
	}
	skey, err := witness.StoredKey(ctx, m.st, m.opt.PublicURL)
	if err != nil {
		return nil, err
	}
	s, err := witness.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("witness key: %w", err)
	}
	m.wsigner = s
	return s, nil
}

// splitViewOf returns the evidence that stops link p, if any.
func splitViewOf(ctx context.Context, st store.Cosignatures, p store.Peer) (*store.SplitView, error) {
	vs, err := st.SplitViews(ctx, p.ProjectID)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if v.PeerID == p.ID {
			return &v, nil
		}
	}
	return nil, nil
}

// remoteClient is the SDK client of the remote, with the link's token
// and HTTP client, without retries (the link's loops retry).
func (l *link) remoteClient() (*client.Client, error) {
	c, err := client.New(l.peer.RemoteURL, l.peer.Token)
	if err != nil {
		return nil, err
	}
	c.HTTP, c.Retry = l.m.opt.HTTP, client.RetryPolicy{MaxAttempts: 1}
	return c, nil
}

// remoteWitnessKey reads the remote's witness verifier key ("" when it
// serves none: 404).
func (l *link) remoteWitnessKey(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.peer.RemoteURL+witness.KeyPath, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := l.m.opt.HTTP.Do(req)
	if err != nil {
		return "", scrub(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch {
	case err != nil:
		return "", scrub(err)
	case resp.StatusCode == http.StatusNotFound:
		return "", nil
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("witness key: remote answered %d", resp.StatusCode)
	}
	key := strings.TrimSpace(string(body))
	if _, err := witness.NewVerifier(key); err != nil {
		return "", fmt.Errorf("witness key: %w", err)
	}
	return key, nil
}

// runWitness witnesses the remote's log every WitnessInterval and when
// a backfill round asks (witnessNow), until ctx ends or a split view
// stops the link.
func (l *link) runWitness(ctx context.Context) {
	t := time.NewTicker(l.m.opt.WitnessInterval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.wkick:
		}
		err := l.witness(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errSplitView):
			return
		case err != nil:
			failures++
			l.setWitnessErr(err)
			if failures == 1 {
				l.log.Warn("federation: witness", "err", err)
			} else {
				l.log.Debug("federation: witness", "err", err, "failures", failures)
			}
		default:
			if failures > 0 {
				l.log.Info("federation: witness recovered", "failures", failures)
			}
			failures = 0
			l.setWitnessErr(nil)
		}
	}
}

// witnessNow asks runWitness for a check at once.
func (l *link) witnessNow() {
	select {
	case l.wkick <- struct{}{}:
	default:
	}
}

func (l *link) setWitnessErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.witnessErr = ""
		return
	}
	l.witnessErr = err.Error()
}

// witness reads, checks and cosigns the remote's checkpoint once (see
// the comment at the top of this file). errSplitView: the link stopped.
func (l *link) witness(ctx context.Context) error {
	st := l.m.st
	state, err := st.WitnessState(ctx, l.peer.ProjectID, l.peer.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		state = store.WitnessState{ProjectID: l.peer.ProjectID, PeerID: l.peer.ID}
	case err != nil:
		return err
	}
	rc, err := l.remoteClient()
	if err != nil {
		return err
	}
	oldSize := state.Size
	if state.LogKey == "" {
		if state.LogKey, err = rc.LogKey(ctx); err != nil {
			return fmt.Errorf("log key: %w", err)
		}
	}
	if state.WitnessKey == "" || l.wkeyRead.IsZero() || time.Since(l.wkeyRead) > l.m.opt.PollInterval {
		wk, err := l.remoteWitnessKey(ctx)
		if err != nil {
			return err
		}
		l.wkeyRead = time.Now()
		if wk != state.WitnessKey && oldSize > 0 {
			// Learnt or changed: kept now (the cosignature below may not
			// be needed).
			next := state
			next.WitnessKey = wk
			if ok, err := st.SaveWitnessState(ctx, next, oldSize); err != nil || !ok {
				return fmt.Errorf("witness state: %w (stored %v)", err, ok)
			}
		}
		state.WitnessKey = wk
	}
	lv, err := note.NewVerifier(state.LogKey)
	if err != nil {
		return fmt.Errorf("log key: %w", err)
	}
	rlog := rc.Log(l.peer.ProjectID, lv)
	var held *client.Checkpoint // the one cosigned last
	if state.Checkpoint != nil {
		// The origin pinned with the first checkpoint cosigned.
		c, _, err := witness.Open(state.Checkpoint, lv, "")
		if err != nil {
			return fmt.Errorf("stored witness checkpoint: %w", err)
		}
		rlog.Origin = c.Origin
		held = &client.Checkpoint{Origin: c.Origin, Size: c.Size, Root: c.Root, Note: state.Checkpoint}
	}
	cp, err := rlog.Checkpoint(ctx)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound && ae.Code == wire.CodeLogEmpty:
		if oldSize == 0 {
			_, err := st.SaveWitnessState(ctx, state, 0) // the pinned keys
			return err
		}
		return fmt.Errorf("checkpoint: the remote serves none after size %d", oldSize)
	case err != nil:
		return fmt.Errorf("checkpoint: %w", err)
	}
	l.mu.Lock()
	submitted := l.wsubmitted
	l.mu.Unlock()
	cosigned := state.Checkpoint
	if held == nil || cp.Size != held.Size || cp.Root != held.Root {
		if cosigned, err = l.cosign(ctx, rlog, lv, held, cp, state); err != nil {
			return err
		}
	} else if submitted {
		return nil // cosigned and submitted already
	}
	l.mu.Lock()
	l.wsize, l.wsubmitted = cp.Size, false
	l.mu.Unlock()
	if !l.m.cosignDue(l.peer.ID, time.Now()) {
		return nil // the remote refuses our cosignatures: retried later
	}
	err = l.submitCosignature(ctx, cosigned)
	if errors.Is(err, errCosignRefused) {
		l.m.cosignRefusedNow(l, time.Now())
		return nil
	}
	if err != nil {
		return err
	}
	l.m.cosignAccepted(l)
	l.mu.Lock()
	l.wsubmitted = true
	l.mu.Unlock()
	return nil
}

// cosign puts the remote's checkpoint cp to witness.Add, the decision
// of this relay's add-checkpoint route (relay/witness.go), as a C2SP
// add-checkpoint request from held, the one cosigned last, with the
// consistency proof read from the remote (checked by the SDK as it reads
// it), over the link's state (linkState), and returns the cosigned note.
// A smaller checkpoint is never cosigned: evidence when the tree cosigned
// does not extend it, else a stale read.
func (l *link) cosign(ctx context.Context, rlog *client.Log, lv note.Verifier, held, cp *client.Checkpoint, state store.WitnessState) ([]byte, error) {
	req := witness.AddCheckpoint{Note: cp.Note}
	if held != nil && held.Size > 0 && cp.Size != held.Size {
		older, newer := held, cp
		if cp.Size < held.Size {
			older, newer = cp, held
		}
		p, err := rlog.ConsistencyProof(ctx, older, newer)
		var sv *client.SplitView
		switch {
		case errors.As(err, &sv):
			return nil, l.splitView(ctx, store.SplitViewInconsistent, cp.Origin, held.Note, cp.Note)
		case err != nil:
			return nil, fmt.Errorf("consistency proof: %w", err)
		case cp.Size < held.Size:
			return nil, fmt.Errorf("checkpoint: the remote served size %d, smaller than %d cosigned (consistent)", cp.Size, held.Size)
		}
		req.Proof = make(tlog.TreeProof, len(p.Hashes))
		for i, h := range p.Hashes {
			copy(req.Proof[i][:], h) // 32 bytes each: the SDK checked
		}
	}
	if held != nil {
		req.OldSize = held.Size
	}
	res, err := witness.Add(ctx, req, map[string][]note.Verifier{cp.Origin: {lv}}, linkState{l.m.st, state}, l.m.witnessSigner)
	var bad *witness.InconsistentError
	if errors.As(err, &bad) {
		return nil, l.splitView(ctx, bad.Kind, cp.Origin, state.Checkpoint, cp.Note)
	}
	return res.Note, err
}

// linkState is a link's witness state (store.WitnessState) as
// witness.Add reads and writes it: the latest checkpoint cosigned of the
// remote's one origin, as read at the start of the round, with the keys
// the link pinned; the write is the store's compare-and-set.
type linkState struct {
	st    store.Cosignatures
	state store.WitnessState
}

func (s linkState) WitnessedLog(_ context.Context, origin string) (store.WitnessedLog, error) {
	if s.state.Checkpoint == nil {
		return store.WitnessedLog{}, store.ErrNotFound
	}
	return store.WitnessedLog{Origin: origin, Size: s.state.Size, Root: s.state.Root, Checkpoint: s.state.Checkpoint}, nil
}

func (s linkState) SaveWitnessedLog(ctx context.Context, l store.WitnessedLog, oldSize int64) (bool, error) {
	next := s.state
	next.Size, next.Root, next.Checkpoint, next.CosignedAt = l.Size, l.Root, l.Checkpoint, time.Now()
	return s.st.SaveWitnessState(ctx, next, oldSize)
}

// splitView stores the evidence, stops the link and raises it.
func (l *link) splitView(ctx context.Context, kind, origin string, cosigned, seen []byte) error {
	e, err := l.m.st.SaveSplitView(ctx, store.SplitView{ProjectID: l.peer.ProjectID, PeerID: l.peer.ID, Kind: kind,
		Origin: origin, Cosigned: cosigned, Seen: seen})
	if err != nil {
		return fmt.Errorf("split view evidence: %w", err)
	}
	l.halt(&e)
	return errSplitView
}

// halt stops the link for good because of evidence e: one ERROR line.
func (l *link) halt(e *store.SplitView) {
	if l.halted.Swap(true) {
		return
	}
	l.log.Error("federation: split view: the remote showed two histories of its log; the link stops mirroring until it is removed",
		"kind", e.Kind, "origin", e.Origin, "evidence_id", e.ID)
	l.stop()
}

// submitCosignature POSTs the cosigned note to the remote.
func (l *link) submitCosignature(ctx context.Context, cosigned []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.peer.RemoteURL+witness.CosignaturesPath(l.peer.ProjectID), bytes.NewReader(cosigned))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+l.peer.Token)
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := l.m.opt.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("submit cosignature: %w", scrub(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusForbidden {
		return errCosignRefused
	}
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("submit cosignature: remote answered %d", resp.StatusCode)
	}
	return nil
}

// errCosignRefused: the remote answered 403 to our cosignature (it holds
// no peer link to this relay, so it does not know our witness key: a
// one-way link). Not a failure of the witnessing: the remote's log is
// still checked and cosigned here.
var errCosignRefused = errors.New("submit cosignature: remote answered 403")

// Backoff of the submissions to a remote that refuses our cosignatures:
// from cosignRetryMin, doubling to cosignRetryMax (the first retry is soon: a
// new two-way link refuses until its remote's own link has read our witness
// key, one witness round).
const (
	cosignRetryMin = 5 * time.Second
	cosignRetryMax = time.Hour
)

// cosignRefusal is a remote's refusal of our cosignatures: when to try
// again and the current backoff.
type cosignRefusal struct {
	next    time.Time
	backoff time.Duration
}

// cosignDue reports whether a cosignature may be submitted to peer now.
func (m *Manager) cosignDue(peerID string, now time.Time) bool {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	r := m.refused[peerID]
	return r == nil || !now.Before(r.next)
}

// cosignRefusedNow records a 403: said once (WARN) per peer and process,
// then the submissions back off (cosignRetryMin doubling to
// cosignRetryMax).
func (m *Manager) cosignRefusedNow(l *link, now time.Time) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.refused == nil {
		m.refused = make(map[string]*cosignRefusal)
	}
	r := m.refused[l.peer.ID]
	if r == nil {
		r = &cosignRefusal{backoff: cosignRetryMin}
		m.refused[l.peer.ID] = r
		l.log.Warn("federation: the remote refuses this relay's cosignatures on its checkpoints (403): it has no peer link back to this relay, so it does not know our witness key; its log is still witnessed here, and the cosignature is offered again with a backoff",
			"retry_in", r.backoff)
	} else {
		r.backoff = min(2*r.backoff, cosignRetryMax)
		l.log.Debug("federation: cosignature still refused (403)", "retry_in", r.backoff)
	}
	r.next = now.Add(r.backoff)
}

// cosignAccepted forgets a refusal once the remote takes a cosignature.
func (m *Manager) cosignAccepted(l *link) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if _, ok := m.refused[l.peer.ID]; ok {
		delete(m.refused, l.peer.ID)
		l.log.Info("federation: the remote now accepts this relay's cosignatures")
	}
}
