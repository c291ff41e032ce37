package federation

import (
	"context"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Reasons of refusals that are the federation's own (the others are the
// ingest path's stable codes, ingest.Refusal).
const (
	// ReasonSigningKeyUnknown: the record's signing key is not known here
	// after a registry sync; it may pass once the key is imported.
	ReasonSigningKeyUnknown = "signing_key_unknown"
	// ReasonReceiptInvalid: the remote's received_at does not parse.
	ReasonReceiptInvalid = "receipt_invalid"
	// ReasonReceiptBackdated: the remote's received_at is earlier than a
	// previous record's from that remote by more than ClockTolerance.
	ReasonReceiptBackdated = "receipt_backdated"
)

// A kept refusal (one that may pass) turns final once it has been refused
// KeptAttempts times over at least KeptGrace, and at once when the link
// keeps MaxKept already (a remote cannot make this relay hold an
// unbounded number of records).
const (
	KeptAttempts = 10
	KeptGrace    = time.Hour
	MaxKept      = 10000
)

// keptRetryEvery: without a registry change, the kept refusals are tried
// again at most this often (a backfill round may come every 250 ms).
const keptRetryEvery = time.Minute

// refuse keeps a refused record with its reason (store.Refusals):
// final, or kept to retry (with its bytes) and holding the cursor. It
// answers temporary when the refusal could not be stored: the record is
// then fetched again, never skipped.
func (l *link) refuse(ctx context.Context, r pageRecord, reason string, final bool, err error) outcome {
	l.mu.Lock()
	full := len(l.pending) >= MaxKept && !l.pending[r.seq]
	l.mu.Unlock()
	if !final && (full || (r.attempts+1 >= KeptAttempts && !r.first.IsZero() && time.Since(r.first) >= KeptGrace)) {
		final = true
	}
	at, _ := parseTime(r.receivedAt)
	ref := store.Refusal{ProjectID: l.peer.ProjectID, PeerID: l.peer.ID, ReceivedSeq: r.seq, EventID: eventIDOf(r.raw),
		Reason: reason, Final: final, Record: r.raw, RemoteReceivedAt: at}
	if serr := l.m.st.SaveRefusal(ctx, ref); serr != nil {
		l.log.Warn("federation: refusal not kept; the record is fetched again", "event_id", ref.EventID, "err", serr)
		return temporary
	}
	l.mu.Lock()
	if final {
		delete(l.pending, r.seq)
	} else {
		l.pending[r.seq] = true
	}
	l.mu.Unlock()
	if r.attempts == 0 {
		l.refused.Add(1)
		attrs := []any{"event_id", ref.EventID, "received_seq", r.seq, "code", reason, "final", final}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		l.log.Warn("federation: record refused", attrs...)
	}
	if final {
		return handled
	}
	return kept
}

// resolved forgets the kept refusal of a record that is now stored.
func (l *link) resolved(ctx context.Context, r pageRecord) outcome {
	l.mu.Lock()
	was := l.pending[r.seq]
	l.mu.Unlock()
	if !was {
		return handled
	}
	if err := l.m.st.DeleteRefusal(ctx, l.peer.ProjectID, l.peer.ID, r.seq); err != nil {
		return temporary
	}
	l.mu.Lock()
	delete(l.pending, r.seq)
	l.mu.Unlock()
	l.log.Info("federation: refused record stored after all", "received_seq", r.seq)
	return handled
}

// loadPending reads the link's kept refusals (a restart keeps them).
func (l *link) loadPending(ctx context.Context) error {
	var after int64
	for {
		rows, err := l.m.st.PendingRefusals(ctx, l.peer.ProjectID, l.peer.ID, after, 200)
		if err != nil {
			return err
		}
		l.mu.Lock()
		for _, r := range rows {
			l.pending[r.ReceivedSeq] = true
		}
		l.mu.Unlock()
		if len(rows) < 200 {
			return nil
		}
		after = rows[len(rows)-1].ReceivedSeq
	}
}

// retryKept takes the kept refusals again after a backfill round when the
// registry changed here since their last try, or keptRetryEvery after it:
// each is stored, refused again, or turns final; then the cursor moves
// over what no longer holds it.
func (l *link) retryKept(ctx context.Context) error {
	keys := l.keysImported.Load()
	l.mu.Lock()
	n := len(l.pending)
	due := keys != l.keptKeys || time.Since(l.keptTried) >= keptRetryEvery
	l.mu.Unlock()
	if n == 0 || !due {
		return nil
	}
	l.mu.Lock()
	l.keptKeys, l.keptTried = keys, time.Now()
	l.mu.Unlock()
	var after int64
	for {
		rows, err := l.m.st.PendingRefusals(ctx, l.peer.ProjectID, l.peer.ID, after, 200)
		if err != nil {
			return err
		}
		recs := make([]pageRecord, len(rows))
		for i, r := range rows {
			recs[i] = pageRecord{raw: r.Record, receivedAt: correspondence.FormatTimestamp(r.RemoteReceivedAt), seq: r.ReceivedSeq,
				checked: true, attempts: r.Attempts, first: r.FirstRefusedAt}
		}
		l.takePage(ctx, recs, false)
		if len(rows) < 200 {
			break
		}
		after = rows[len(rows)-1].ReceivedSeq
	}
	return l.advance(ctx)
}
