package store

import (
	"context"
	"time"
)

// Refusal is one foreign record a peer link refused, kept with its reason
// (spec/federation.md "Trust": a peer's bad record is refused record by
// record). While it may pass (Final false: its key is not known here
// yet), Record holds the bytes as the remote served them, and the link
// retries it after each registry sync or backfill round; the remote
// cursor does not move past it until it is stored (and the refusal
// deleted) or finally refused.
type Refusal struct {
	ProjectID string
	PeerID    string
	// ReceivedSeq is the remote's received_seq of the record.
	ReceivedSeq int64
	// EventID is the event_id the record claims ("" when it has none).
	EventID string
	// Reason is a stable code: a wire.Code* refusal of the ingest path or
	// one of the federation's own ("signing_key_unknown",
	// "receipt_invalid", "receipt_backdated").
	Reason string
	Final  bool
	// Record is the record's bytes while the refusal may pass; nil once
	// it is final.
	Record []byte
	// RemoteReceivedAt is the remote's receipt time of the record (zero
	// when it had none that parses).
	RemoteReceivedAt time.Time
	// Attempts counts the refusals of this record, the first included.
	Attempts int
	// FirstRefusedAt and RefusedAt are this relay's times of the first
	// and the latest refusal.
	FirstRefusedAt, RefusedAt time.Time
}

// RefusalCount is the number of refusals of one reason and finality.
type RefusalCount struct {
	Reason string
	Final  bool
	Count  int64
}

// RefusalSummary is what a peer link's refusals add up to.
type RefusalSummary struct {
	Counts []RefusalCount // ascending (reason, final)
	// Latest is the most recently refused record (without Record), nil
	// when there is none.
	Latest *Refusal
}

// Refusals keep peer links' refused foreign records (store.Federation
// composes it). Rows go with their peer link (RemovePeer).
type Refusals interface {
	// SaveRefusal records r (ProjectID, PeerID, ReceivedSeq, Reason
	// required) dated now: a new row, or the record's row again with
	// Attempts one more, the new reason, finality and bytes (a final row
	// stays final and keeps no bytes). Errors: ErrNotFound (no such peer
	// link), ErrUnavailable.
	SaveRefusal(ctx context.Context, r Refusal) error
	// DeleteRefusal removes the refusal of the record at the remote's
	// received_seq seq (it was stored after all); none is not an error.
	// Errors: ErrUnavailable.
	DeleteRefusal(ctx context.Context, projectID, peerID string, seq int64) error
	// PendingRefusals lists the link's refusals that may pass, with their
	// bytes, in ascending remote received_seq strictly after afterSeq, at
	// most limit (clamped to 1–200). Errors: ErrUnavailable.
	PendingRefusals(ctx context.Context, projectID, peerID string, afterSeq int64, limit int) ([]Refusal, error)
	// SummarizeRefusals counts the refusals of one link, or of every link
	// (projectID and peerID ""), by reason and finality, with the latest.
	// Errors: ErrUnavailable.
	SummarizeRefusals(ctx context.Context, projectID, peerID string) (RefusalSummary, error)
}
