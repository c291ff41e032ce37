package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// AuditState is what an auditor keeps between runs (a JSON file):
// the log's origin and verifier key, pinned at the first run, and the
// last checkpoint it verified, as the signed note served.
type AuditState struct {
	Origin     string `json:"origin"`
	LogKey     string `json:"log_key"`
	Checkpoint string `json:"checkpoint"`
	// Entries is how many entries from the start the auditor has read
	// and checked (the size of the checkpoint it last audited fully).
	Entries   int64  `json:"entries_checked"`
	CheckedAt string `json:"checked_at"`
}

// LoadAuditState reads an audit state file; a missing file is the zero
// state (nothing seen). Errors: file I/O, or a file that is not the JSON
// of AuditState.
func LoadAuditState(path string) (*AuditState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &AuditState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit state: %w", err)
	}
	var s AuditState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("audit state %s: %w", path, err)
	}
	return &s, nil
}

// Save writes the state to path atomically (temporary file and rename),
// mode 0600.
func (s *AuditState) Save(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'), 0o600)
}

// AuditOptions select what Log.Audit reads.
type AuditOptions struct {
	// All reads every entry from the first, not only those added since
	// the previous checkpoint.
	All bool
	// Progress, when set, is called after each entry bundle with the
	// entries checked so far and the number to check.
	Progress func(done, total int64)
}

// AuditReport says what Log.Audit checked.
type AuditReport struct {
	Previous   *Checkpoint // nil on a first audit
	Checkpoint *Checkpoint // the checkpoint fetched (nil if that failed)
	// Consistent: the consistency of Previous → Checkpoint was proved.
	Consistent bool
	// From and To bound the entries read: [From, To) by leaf index
	// (received_seq − 1); Checked counts those verified before any failure.
	From, To int64
	Checked  int64
}

// Audit verifies the log (spec/tlog.md §Auditing): it fetches the
// checkpoint and verifies its signature and origin; when previous (the
// last checkpoint the auditor verified) is given, proves the new tree
// consistent with it; then reads the entries added since previous (all
// of them with opt.All) through entry bundles, streaming, each checked
// against the tree (its leaf hash) and as a record (CheckEntry: the
// canonical {event, receipt} with received_seq = index+1; the signature
// too when the Client has a Keyring). The report holds what passed
// before the first failure, which is the error: ErrCheckpointInvalid,
// *SplitView, ErrNotIncluded, ErrEntryInvalid, a read error.
func (l *Log) Audit(ctx context.Context, previous *Checkpoint, opt AuditOptions) (*AuditReport, error) {
	rep := &AuditReport{Previous: previous}
	cp, err := l.Checkpoint(ctx)
	if err != nil {
		return rep, fmt.Errorf("checkpoint: %w", err)
	}
	rep.Checkpoint = cp
	if previous != nil {
		if err := l.CheckConsistency(ctx, previous, cp); err != nil {
			return rep, err
		}
		rep.Consistent = true
		if !opt.All {
			rep.From = previous.Size
		}
	}
	rep.To = cp.Size
	for e, err := range l.Entries(ctx, cp, rep.From, rep.To) {
		if err != nil {
			return rep, err
		}
		if _, err := l.CheckEntry(e); err != nil {
			return rep, err
		}
		rep.Checked++
		if opt.Progress != nil && (e.Index+1)%256 == 0 {
			opt.Progress(rep.Checked, rep.To-rep.From)
		}
	}
	if opt.Progress != nil {
		opt.Progress(rep.Checked, rep.To-rep.From)
	}
	return rep, nil
}

// InclusionChecker verifies records as they are read (acrelay follow
// --verify-log): each record must be included in the project's log at a
// checkpoint. A record newer than the checkpoint held waits for a newer
// one (fetched every Poll, for at most Wait), which must be consistent
// with the one before. It keeps one Log per project (the event's
// project_id). Safe for concurrent use.
type InclusionChecker struct {
	Client   *Client
	Verifier note.Verifier
	// Wait bounds how long a record waits for a checkpoint that covers
	// it (default 5s: the relay integrates within 1 s).
	Wait time.Duration
	// Poll paces the checkpoint fetches while waiting (default 250ms).
	Poll time.Duration

	mu   sync.Mutex
	logs map[string]*checkedLog
}

type checkedLog struct {
	mu  sync.Mutex
	log *Log
	cp  *Checkpoint
}

// NewInclusionChecker returns an InclusionChecker of c's records against
// checkpoints signed by v.
func (c *Client) NewInclusionChecker(v note.Verifier) *InclusionChecker {
	return &InclusionChecker{Client: c, Verifier: v}
}

// Check verifies that r is included in its project's log. Errors:
// ErrCheckpointBehind (no checkpoint covered r within Wait),
// ErrNotIncluded, *SplitView (a new checkpoint inconsistent with the
// last), ErrCheckpointInvalid, read errors.
func (ic *InclusionChecker) Check(ctx context.Context, r Record) error {
	var pid string
	if r.Event != nil {
		pid = r.Event.ProjectID
	} else {
		var ev struct {
			ProjectID string `json:"project_id"`
		}
		if err := json.Unmarshal(r.Raw, &ev); err != nil || ev.ProjectID == "" {
			return fmt.Errorf("%w: record without project_id", ErrMalformedRecord)
		}
		pid = ev.ProjectID
	}
	ic.mu.Lock()
	if ic.logs == nil {
		ic.logs = map[string]*checkedLog{}
	}
	cl := ic.logs[pid]
	if cl == nil {
		cl = &checkedLog{log: ic.Client.Log(pid, ic.Verifier)}
		ic.logs[pid] = cl
	}
	ic.mu.Unlock()

	cl.mu.Lock()
	defer cl.mu.Unlock()
	seq := r.Receipt.ReceivedSeq
	if cl.cp == nil || cl.cp.Size < seq {
		wait, poll := ic.Wait, ic.Poll
		if wait <= 0 {
			wait = 5 * time.Second
		}
		if poll <= 0 {
			poll = 250 * time.Millisecond
		}
		deadline := time.Now().Add(wait)
		for {
			cp, err := cl.log.Checkpoint(ctx)
			var ae *APIError
			switch {
			case errors.As(err, &ae) && ae.Status == 404:
				// log_empty: nothing integrated yet
			case err != nil:
				return err
			default:
				if cl.cp != nil {
					if err := cl.log.CheckConsistency(ctx, cl.cp, cp); err != nil {
						return err
					}
				}
				cl.cp = cp
			}
			if cl.cp != nil && cl.cp.Size >= seq {
				break
			}
			if time.Now().After(deadline) {
				size := int64(0)
				if cl.cp != nil {
					size = cl.cp.Size
				}
				return fmt.Errorf("%w: received_seq %d, checkpoint size %d after %s", ErrCheckpointBehind, seq, size, wait)
			}
			t := time.NewTimer(poll)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return cl.log.CheckRecord(ctx, cl.cp, r)
}
