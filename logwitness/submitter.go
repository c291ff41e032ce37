package logwitness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/witness"
)

// PeerPrefix starts the PeerID of the split-view evidence a witness's
// refusal leaves (store.SplitView): PeerPrefix + the witness's key name.
const PeerPrefix = store.LogWitnessPeerPrefix

// Defaults of Options.
const (
	// DefaultInterval: a quiet log's latest checkpoint reaches each
	// witness within 10 s of its signing (the sequencer signs within 1 s
	// of a record's 201), so it is cosigned within about 12 s; a busy log
	// costs at most 360 requests per hour per witness.
	DefaultInterval = 10 * time.Second
	// MaxBackoff caps the wait after repeated failures at one witness for
	// one project.
	MaxBackoff = 10 * time.Minute
	// DefaultRescan: every project in scope is looked at this often, besides
	// the store's advances (a head integrated by another process while this
	// one missed the advance, a visibility changed).
	DefaultRescan = time.Minute
	// tick is how often pending projects are looked at.
	tick = time.Second
	// requestTimeout bounds one add-checkpoint request.
	requestTimeout = 30 * time.Second
	// cosignatureSkew is how far in the future a cosignature's time may be.
	cosignatureSkew = 10 * time.Minute
	// maxAnswer bounds a witness's answer read (signature lines).
	maxAnswer = 64 << 10
)

// Scope values of Options.Scope.
const (
	ScopePublic = "public" // every public project (the default)
	ScopeAll    = "all"    // every project, private ones included
)

// Store is what the Submitter reads and writes.
type Store interface {
	store.LogWitnesses
	TreeHead(ctx context.Context, projectID string) (store.TreeHead, error)
	Head(ctx context.Context, projectID string) (seq int64, at time.Time, err error)
	ReadTiles(ctx context.Context, projectID string, tiles []xtlog.Tile) ([][]byte, error)
	ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)
	ProjectVisibility(ctx context.Context, projectID string) (string, error)
	SubscribeAdvances() *store.AdvanceSubscription
	SaveCosignature(ctx context.Context, c store.Cosignature) (bool, error)
	SaveSplitView(ctx context.Context, e store.SplitView) (store.SplitView, error)
	SplitViews(ctx context.Context, projectID string) ([]store.SplitView, error)
}

// Options configure a Submitter.
type Options struct {
	Witnesses []Witness
	// LogVerifier is the relay's log key's verifier: a witness's answer
	// is checked on the checkpoint it signs.
	LogVerifier note.Verifier
	// Scope is ScopePublic ("" too), ScopeAll, or a comma-separated list
	// of project ids.
	Scope string
	// Interval is the shortest time between two requests for one project
	// to one witness (0: DefaultInterval).
	Interval time.Duration
	// Rescan: 0 means DefaultRescan.
	Rescan time.Duration
	// HTTP sends the requests (nil: a client with no SSRF guard: the
	// witnesses are the operator's configuration).
	HTTP   *http.Client
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// OnSubmit, when set, is called after each request with the witness's
	// name and the outcome: "cosigned", "conflict" (409), "refused_inconsistent"
	// (422), "error".
	OnSubmit func(witness, result string)
}

// Submitter submits the projects' checkpoints to the witnesses.
type Submitter struct {
	st  Store
	opt Options
	log *slog.Logger

	mu     sync.Mutex
	states map[key]*entry
}

// key names one project at one witness.
type key struct{ projectID, witness string }

// entry is the Submitter's view of one project at one witness.
type entry struct {
	state    store.LogWitnessState
	loaded   bool
	next     time.Time     // no request before
	backoff  time.Duration // after the last failure (0: none)
	failures int
	halted   bool // a split view: nothing more is submitted
}

// New returns a Submitter. It starts no goroutines.
func New(st Store, opt Options) *Submitter {
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	if opt.Rescan <= 0 {
		opt.Rescan = DefaultRescan
	}
	if opt.HTTP == nil {
		opt.HTTP = &http.Client{Timeout: requestTimeout}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Submitter{st: st, opt: opt, log: opt.Logger, states: map[key]*entry{}}
}

// inScope reports whether projectID's checkpoints are submitted.
func (s *Submitter) inScope(ctx context.Context, projectID string) (bool, error) {
	switch s.opt.Scope {
	case "", ScopePublic:
		v, err := s.st.ProjectVisibility(ctx, projectID)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return v == store.VisibilityPublic, err
	case ScopeAll:
		return true, nil
	}
	for id := range strings.SplitSeq(s.opt.Scope, ",") {
		if strings.TrimSpace(id) == projectID {
			return true, nil
		}
	}
	return false, nil
}

// Load reads the stored states and the evidence of earlier split views
// (a restart does not start over, nor submit again after a refusal). Run
// calls it first.
func (s *Submitter) Load(ctx context.Context) error {
	states, err := s.st.LogWitnessStates(ctx, "")
	if err != nil {
		return err
	}
	views, err := s.st.SplitViews(ctx, "")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = map[key]*entry{}
	for _, st := range states {
		s.states[key{st.ProjectID, st.Witness}] = &entry{state: st, loaded: true}
	}
	for _, v := range views {
		for _, w := range s.opt.Witnesses {
			if v.PeerID == PeerPrefix+w.Name {
				e := s.entry(v.ProjectID, w)
				e.halted = true
			}
		}
	}
	return nil
}

// entry returns the entry of (projectID, w), creating it (s.mu held).
func (s *Submitter) entry(projectID string, w Witness) *entry {
	k := key{projectID, w.VerifierKey}
	e := s.states[k]
	if e == nil {
		e = &entry{state: store.LogWitnessState{ProjectID: projectID, Witness: w.VerifierKey}}
		s.states[k] = e
	}
	return e
}

// Run submits until ctx ends: every project in scope at start and each
// Rescan, and each project the store's advances name, as its checkpoints
// change. It returns ctx's error, or the store's at start.
func (s *Submitter) Run(ctx context.Context) error {
	if len(s.opt.Witnesses) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	if err := s.Load(ctx); err != nil {
		return fmt.Errorf("log witnesses: %w", err)
	}
	sub := s.st.SubscribeAdvances()
	defer sub.Close()
	pending := map[string]int64{} // project → the received_seq to see cosigned
	// skip: a pending project whose witnesses are all waiting (pace or
	// backoff) is not read again before the first is due, unless it
	// advances: a witness failing for every project costs no store reads
	// per second.
	skip := map[string]time.Time{}
	t := time.NewTicker(tick)
	defer t.Stop()
	var lastScan time.Time
	for {
		if now := s.opt.Now(); now.Sub(lastScan) >= s.opt.Rescan {
			if err := s.scan(ctx, pending); err != nil && ctx.Err() == nil {
				s.log.Warn("log witnesses: project scan", "err", err)
			} else {
				lastScan = now
			}
		}
		now := s.opt.Now()
		for pid, seq := range pending {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if now.Before(skip[pid]) {
				continue // no witness is due for it, and it did not advance
			}
			done, err := s.Pass(ctx, pid, seq)
			if err != nil && ctx.Err() == nil {
				s.log.Debug("log witnesses: pass", "project_id", pid, "err", err)
			}
			if done {
				delete(pending, pid)
				delete(skip, pid)
			} else {
				skip[pid] = s.nextDue(pid)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.Ready():
			for _, a := range sub.Take() {
				pending[a.ProjectID] = max(pending[a.ProjectID], a.ReceivedSeq)
				delete(skip, a.ProjectID)
			}
		case <-t.C:
		}
	}
}

// nextDue is when the first witness of projectID that is not halted
// may be sent a request (the zero time: now).
func (s *Submitter) nextDue(projectID string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	set := false
	for _, w := range s.opt.Witnesses {
		e := s.entry(projectID, w)
		if e.halted {
			continue
		}
		if !set || e.next.Before(first) {
			first, set = e.next, true
		}
	}
	return first
}

// scan marks every project pending (their scope is checked by Pass).
func (s *Submitter) scan(ctx context.Context, pending map[string]int64) error {
	after := ""
	for {
		ids, err := s.st.ProjectIDs(ctx, after, 500)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, ok := pending[id]; !ok {
				pending[id] = 0
			}
		}
		if len(ids) < 500 {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

// Pass looks at projectID once: for each witness whose last known
// cosignature is not of the current tree head, and whose pace allows it,
// one submission (and one more after a 409 naming another size). done is
// true when the project needs no more passes until it advances: out of
// scope, or every witness cosigned (or refused for good) a head of at
// least seq leaves.
func (s *Submitter) Pass(ctx context.Context, projectID string, seq int64) (done bool, err error) {
	ok, err := s.inScope(ctx, projectID)
	if err != nil || !ok {
		return err == nil, err
	}
	// The target is the project's last record, not only the advance
	// seen: an advance published before this process subscribed (a
	// restart) is not seen again, and the sequencer's integration
	// publishes none.
	last, _, err := s.st.Head(ctx, projectID)
	if err != nil {
		return false, err
	}
	seq = max(seq, last)
	head, err := s.st.TreeHead(ctx, projectID)
	if err != nil {
		return false, err
	}
	if head.Size == 0 {
		return seq == 0, nil // nothing to submit until the first record is integrated
	}
	done = head.Size >= seq
	for _, w := range s.opt.Witnesses {
		s.mu.Lock()
		e := s.entry(projectID, w)
		cosigned := e.halted || (e.state.CosignedSize == head.Size && e.state.KnownSize == head.Size)
		due := !s.opt.Now().Before(e.next)
		s.mu.Unlock()
		if cosigned {
			continue
		}
		if !due {
			done = false
			continue
		}
		if err := s.submit(ctx, projectID, w, head); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			s.failed(ctx, projectID, w, err)
		}
		s.mu.Lock()
		done = done && (e.halted || (e.state.CosignedSize == head.Size && e.state.KnownSize == head.Size))
		s.mu.Unlock()
	}
	return done, nil
}

// errInconsistent: the witness refused our checkpoint as inconsistent
// with the one it holds (422): a split view, handled already.
var errInconsistent = errors.New("the witness refused the checkpoint as inconsistent with the one it cosigned (422): split view")

// submit sends head to w from the size w is known to hold, following one
// 409 that names another size.
func (s *Submitter) submit(ctx context.Context, projectID string, w Witness, head store.TreeHead) error {
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		e := s.entry(projectID, w)
		if !e.loaded {
			// Not in the store when this process started: another
			// process may have written it since.
			e.loaded = true
			s.mu.Unlock()
			if all, err := s.st.LogWitnessStates(ctx, projectID); err == nil {
				s.mu.Lock()
				for _, st := range all {
					if st.Witness == w.VerifierKey {
						e.state = st
					}
				}
				s.mu.Unlock()
			}
			s.mu.Lock()
		}
		known := e.state.KnownSize
		e.next = s.opt.Now().Add(s.opt.Interval)
		s.mu.Unlock()
		if known > head.Size {
			return fmt.Errorf("the witness holds a checkpoint of size %d, larger than this log's tree (%d): the store is older than what was published (a restored backup?), or another relay signs this origin", known, head.Size)
		}
		err := s.post(ctx, projectID, w, head, known)
		var conflict errConflict
		if errors.As(err, &conflict) && attempt == 0 {
			s.mu.Lock()
			e.state.KnownSize = int64(conflict)
			st := e.state
			s.mu.Unlock()
			if err := s.st.SaveLogWitnessState(ctx, st); err != nil {
				return fmt.Errorf("save state: %w", err)
			}
			continue
		}
		return err
	}
}

// errConflict is a 409's size.
type errConflict int64

func (e errConflict) Error() string {
	return fmt.Sprintf("the witness answered 409: it last cosigned size %d", int64(e))
}

// post sends one add-checkpoint request and handles its answer.
func (s *Submitter) post(ctx context.Context, projectID string, w Witness, head store.TreeHead, known int64) error {
	var proof xtlog.TreeProof
	if known > 0 && known < head.Size {
		hr := acrtlog.NewStoreHashReader(ctx, func(ctx context.Context, tiles []xtlog.Tile) ([][]byte, error) {
			return s.st.ReadTiles(ctx, projectID, tiles)
		})
		p, err := xtlog.ProveTree(head.Size, known, hr)
		if err != nil {
			return fmt.Errorf("consistency proof %d→%d: %w", known, head.Size, err)
		}
		proof = p
	}
	body := witness.AddCheckpoint{OldSize: known, Proof: proof, Note: head.Checkpoint}.Marshal()
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, w.AddCheckpointURL(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := s.opt.HTTP.Do(req)
	if err != nil {
		s.result(w, "error")
		return fmt.Errorf("add-checkpoint: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		s.result(w, "error")
		return fmt.Errorf("add-checkpoint: reading the answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return s.cosigned(ctx, projectID, w, head, answer)
	case http.StatusConflict:
		s.result(w, "conflict")
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		n, ok := parseSize(answer)
		if mt != "text/x.tlog.size" || !ok {
			return fmt.Errorf("add-checkpoint: 409 without a text/x.tlog.size body")
		}
		return errConflict(n)
	case http.StatusUnprocessableEntity:
		s.result(w, "refused_inconsistent")
		return s.splitView(ctx, projectID, w, head, body, answer)
	case http.StatusNotFound:
		s.result(w, "error")
		return fmt.Errorf("the witness does not know this log (404): ask its operator to add the origin and the log's verifier key")
	case http.StatusForbidden:
		s.result(w, "error")
		return fmt.Errorf("the witness does not trust this log's key for the origin (403): ask its operator to add the log's verifier key")
	}
	s.result(w, "error")
	return fmt.Errorf("add-checkpoint: the witness answered %d", resp.StatusCode)
}

func (s *Submitter) result(w Witness, r string) {
	if s.opt.OnSubmit != nil {
		s.opt.OnSubmit(w.Name, r)
	}
}

// parseSize reads a text/x.tlog.size body: a decimal and a newline.
func parseSize(b []byte) (int64, bool) {
	t, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok || len(t) == 0 || len(t) > 19 || (len(t) > 1 && t[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(t), 10, 64)
	return n, err == nil && n >= 0
}

// cosigned verifies the witness's signature lines on head's checkpoint
// and keeps the one by w's key.
func (s *Submitter) cosigned(ctx context.Context, projectID string, w Witness, head store.TreeHead, answer []byte) error {
	c, _, cosigs, err := witness.OpenCosigned(append(bytes.Clone(head.Checkpoint), answer...), s.opt.LogVerifier, "",
		[]note.Verifier{w.Verifier}, s.opt.Now(), cosignatureSkew)
	if err != nil || len(cosigs) == 0 {
		// The witness moved to head's size all the same (a 200): the next
		// request starts there.
		s.mu.Lock()
		s.entry(projectID, w).state.KnownSize = head.Size
		s.mu.Unlock()
		s.result(w, "error")
		return fmt.Errorf("the witness's answer carries no cosignature that verifies under its configured key: %v", err)
	}
	text, _, _ := bytes.Cut(head.Checkpoint, []byte("\n\n"))
	text = append(text, '\n')
	cs := cosigs[0]
	if _, err := s.st.SaveCosignature(ctx, store.Cosignature{ProjectID: projectID, KeyName: cs.Name, Size: c.Size, Root: c.Root,
		Body: text, Line: cs.Line, SignedAt: cs.SignedAt}); err != nil {
		return fmt.Errorf("save cosignature: %w", err)
	}
	s.result(w, "cosigned")
	s.mu.Lock()
	e := s.entry(projectID, w)
	e.state.KnownSize, e.state.CosignedSize, e.state.CosignedAt = c.Size, c.Size, s.opt.Now().UTC().Truncate(time.Millisecond)
	e.state.LastError, e.state.ErrorAt = "", time.Time{}
	if e.failures > 0 {
		s.log.Info("log witness: cosigning again", "project_id", projectID, "witness", w.Name, "size", c.Size, "failures", e.failures)
	}
	e.failures, e.backoff = 0, 0
	st := e.state
	s.mu.Unlock()
	if err := s.st.SaveLogWitnessState(ctx, st); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// splitView keeps the evidence of a witness's 422, raises the alarm (one
// ERROR line) and stops submitting this project to w.
func (s *Submitter) splitView(ctx context.Context, projectID string, w Witness, head store.TreeHead, request, answer []byte) error {
	c, _ := acrtlog.ParseCheckpoint(string(head.Checkpoint[:bytes.Index(head.Checkpoint, []byte("\n\n"))+1]))
	ev, err := s.st.SaveSplitView(ctx, store.SplitView{ProjectID: projectID, PeerID: PeerPrefix + w.Name, Kind: store.SplitViewInconsistent,
		Origin: c.Origin, Cosigned: answer, Seen: request})
	if err != nil {
		return fmt.Errorf("split view evidence: %w", err)
	}
	s.mu.Lock()
	e := s.entry(projectID, w)
	e.halted = true
	s.mu.Unlock()
	s.log.Error("log witness: split view: the witness refused this log's checkpoint as inconsistent with the one it cosigned for the origin; nothing more is submitted to it for this project",
		"project_id", projectID, "witness", w.Name, "origin", c.Origin, "size", head.Size, "evidence_id", ev.ID)
	return errInconsistent
}

// failed records err as the last error of (projectID, w) and backs off:
// said once at WARN, then at DEBUG until a success.
func (s *Submitter) failed(ctx context.Context, projectID string, w Witness, err error) {
	s.mu.Lock()
	e := s.entry(projectID, w)
	e.failures++
	if e.backoff == 0 {
		e.backoff = s.opt.Interval
	} else {
		e.backoff = min(2*e.backoff, MaxBackoff)
	}
	now := s.opt.Now()
	e.next = now.Add(e.backoff)
	e.state.LastError, e.state.ErrorAt = err.Error(), now.UTC().Truncate(time.Millisecond)
	st, n, wait := e.state, e.failures, e.backoff
	s.mu.Unlock()
	if errors.Is(err, errInconsistent) {
		// said at ERROR already
	} else if n == 1 {
		s.log.Warn("log witness: submission failed", "project_id", projectID, "witness", w.Name, "err", err, "retry_in", wait)
	} else {
		s.log.Debug("log witness: submission failed", "project_id", projectID, "witness", w.Name, "err", err, "failures", n, "retry_in", wait)
	}
	if serr := s.st.SaveLogWitnessState(ctx, st); serr != nil && ctx.Err() == nil {
		s.log.Warn("log witness: state not saved", "project_id", projectID, "witness", w.Name, "err", serr)
	}
}
