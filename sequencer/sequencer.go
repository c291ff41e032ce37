// Package sequencer writes each project's verifiable-log tree (spec
// tlog.md, issue 24) after its records are stored: it tails every project
// by its integrated size, integrates the new records as leaves (package
// tlog) in pages of at most PageSize, and stores the tiles and a new
// checkpoint signed by the relay's log key in one transaction per page,
// fenced on the size it started from (store.Tree IntegrateTree).
//
// Why a sequencer rather than the append transaction: the append paths
// (the SQLite writer, PostgreSQL's group commit) stay untouched; appends
// from several processes never wait on a project's tile rows (the right
// edge of the tree is one row every append would rewrite); a burst is
// integrated as one step with one signature; and an existing store is
// integrated from size 0 by the same loop, streaming. The price is a lag,
// measured (Options.OnIntegrate, acrelay-bench) and bounded by the wake:
// the store's advances wake it at once.
//
// One sequencer runs per relay (cmd runs it under a relay-wide
// lease.Single); a second one that lost the lease meets store.ErrConflict
// and writes nothing.
package sequencer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/tlog"
)

// DefaultPageSize is the most records one integration step takes.
const DefaultPageSize = 1000

// DefaultPace is Options.Pace's default: well inside the spec's 1 s
// between a record's 201 and the checkpoint covering it.
const DefaultPace = 100 * time.Millisecond

// retryAfter is how long a project whose integration failed waits before
// the next attempt (advances of other projects are still served).
const retryAfter = time.Second

// Store is what the sequencer reads and writes.
type Store interface {
	store.Tree
	ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)
	RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]store.Record, error)
	SubscribeAdvances() *store.AdvanceSubscription
}

// Options configure a Sequencer.
type Options struct {
	// PublicURL is the relay's public URL; each project's checkpoint
	// origin is tlog.Origin(PublicURL, project id).
	PublicURL string
	// Key signs the checkpoints (the relay's log key).
	Key tlog.LogKey
	// PageSize caps the records of one integration step; 0 means
	// DefaultPageSize.
	PageSize int
	// Pace is the shortest time between the starts of two passes over
	// the projects that advanced: the advances of that time are taken
	// together, so a busy project costs one transaction and one signature
	// per Pace rather than one per append batch. 0 means DefaultPace; a
	// negative value integrates at each wake (tests).
	Pace   time.Duration
	Logger *slog.Logger
	// OnIntegrate, when set, is called after each stored step with the
	// project, the number of leaves added, and the lag of each leaf: the
	// time from its receipt (received_at, database clock) to the step's
	// commit (local clock). Called from Run's goroutine.
	OnIntegrate func(projectID string, leaves int, lags []time.Duration)
}

// Sequencer integrates every project's new records into its tree.
type Sequencer struct {
	st   Store
	opt  Options
	page int
	log  *slog.Logger
}

// New returns a sequencer; it starts nothing until Run.
func New(st Store, opt Options) *Sequencer {
	s := &Sequencer{st: st, opt: opt, page: opt.PageSize, log: opt.Logger}
	if s.page <= 0 {
		s.page = DefaultPageSize
	}
	if s.opt.Pace == 0 {
		s.opt.Pace = DefaultPace
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Run integrates every project once (the projects with records not yet in
// their tree), then each project an advance names, at most one pass per
// Options.Pace, until ctx ends; it returns nil then. A project whose step fails is tried again after a
// second, logged at Warn.
func (s *Sequencer) Run(ctx context.Context) error {
	sub := s.st.SubscribeAdvances() // before the scan: no advance is missed
	defer sub.Close()
	sizes := map[string]int64{} // integrated sizes this run has seen
	dirty := map[string]bool{}
	scanned := false
	var lastPass time.Time
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		if !scanned {
			if err := s.scan(ctx, dirty); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.log.Warn("tlog sequencer: list projects", "err", err)
			} else {
				scanned = true
			}
		}
		if len(dirty) > 0 && s.opt.Pace > 0 {
			// Let the advances of one pace gather (the subscription keeps
			// them, coalesced per project).
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(lastPass.Add(s.opt.Pace))):
			}
			lastPass = time.Now()
			for _, a := range sub.Take() {
				if a.ReceivedSeq > sizes[a.ProjectID] {
					dirty[a.ProjectID] = true
				}
			}
		}
		failed := false
		for _, p := range slices.Sorted(maps.Keys(dirty)) {
			head, err := s.Integrate(ctx, p)
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrGap) {
				// A record is missing from the store: not retried until
				// the project advances again (verify-log reports it).
				s.log.Error("tlog sequencer: integrate", "project_id", p, "err", err)
				sizes[p] = head.Size
				delete(dirty, p)
				continue
			}
			if err != nil {
				s.log.Warn("tlog sequencer: integrate", "project_id", p, "err", err)
				failed = true
				continue
			}
			sizes[p] = head.Size
			delete(dirty, p)
		}
		if failed || !scanned {
			retry.Reset(retryAfter)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Ready():
			for _, a := range sub.Take() {
				if a.ReceivedSeq > sizes[a.ProjectID] {
					dirty[a.ProjectID] = true
				}
			}
		case <-retry.C:
		}
	}
}

// scan marks every project dirty (one page of ids at a time; a project
// whose tree is current costs one head read and one empty records read).
func (s *Sequencer) scan(ctx context.Context, dirty map[string]bool) error {
	after := ""
	for {
		ids, err := s.st.ProjectIDs(ctx, after, 1000)
		if err != nil {
			return err
		}
		for _, id := range ids {
			dirty[id] = true
		}
		if len(ids) < 1000 {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

// ErrGap: the project's next record after its tree is not the next
// received_seq (a record missing from the store); the tree stops before it.
var ErrGap = errors.New("records are not contiguous")

// Integrate brings the project's tree up to its newest stored record, in
// steps of at most PageSize records (so any number of records is
// integrated in bounded memory), each step one fenced store transaction
// with a new signed checkpoint, and returns the head it left. A step that
// meets store.ErrConflict (another sequencer moved the tree) re-reads the
// head and goes on from there. Errors: the store's, ErrGap, signing errors.
func (s *Sequencer) Integrate(ctx context.Context, projectID string) (store.TreeHead, error) {
	head, err := s.st.TreeHead(ctx, projectID)
	if err != nil {
		return store.TreeHead{}, err
	}
	read := tlog.NewStoreHashReader(ctx, func(ctx context.Context, tiles []xtlog.Tile) ([][]byte, error) {
		return s.st.ReadTiles(ctx, projectID, tiles)
	})
	origin := tlog.Origin(s.opt.PublicURL, projectID)
	for {
		recs, err := s.st.RecordsAfter(ctx, projectID, head.Size, s.page)
		if err != nil {
			return head, err
		}
		if len(recs) == 0 {
			return head, nil
		}
		leaves := make([][]byte, 0, len(recs))
		for i, r := range recs {
			if r.ReceivedSeq != head.Size+1+int64(i) {
				if i == 0 {
					return head, fmt.Errorf("%w: received_seq %d after tree size %d", ErrGap, r.ReceivedSeq, head.Size)
				}
				recs = recs[:i]
				break
			}
			leaves = append(leaves, r.ImmutableJSON())
		}
		in, err := tlog.Integrate(read, head.Size, leaves)
		if err != nil {
			return head, err
		}
		cp, err := tlog.SignCheckpoint(s.opt.Key.Signer, tlog.Checkpoint{Origin: origin, Size: in.Size, Root: in.Root})
		if err != nil {
			return head, err
		}
		next := store.TreeHead{Size: in.Size, Root: in.Root, Checkpoint: cp}
		err = s.st.IntegrateTree(ctx, projectID, head.Size, in.Tiles, in.Data, next)
		if errors.Is(err, store.ErrConflict) {
			s.log.Info("tlog sequencer: tree moved underneath; reading it again", "project_id", projectID, "size", head.Size)
			if head, err = s.st.TreeHead(ctx, projectID); err != nil {
				return head, err
			}
			continue
		}
		if err != nil {
			return head, err
		}
		if s.opt.OnIntegrate != nil {
			now := time.Now()
			lags := make([]time.Duration, len(recs))
			for i, r := range recs {
				lags[i] = now.Sub(r.ReceivedAt)
			}
			s.opt.OnIntegrate(projectID, len(recs), lags)
		}
		head = next
		if len(recs) < s.page {
			return head, nil
		}
	}
}
