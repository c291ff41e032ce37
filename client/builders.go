package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// Errors of the builders.
var (
	// ErrNotClaim: a claim.renew or claim.release was built on an event
	// that is not a claim.open or claim.renew with a well-formed claim body.
	ErrNotClaim = errors.New("predecessor is not a claim.open or claim.renew")
	// ErrNoPredecessorID: the predecessor has not been signed (no event_id).
	ErrNoPredecessorID = errors.New("predecessor has no event_id")
)

// Draft is the kind-specific part of an event: its kind, closed body
// (spec §5), the event ids the body references (added to parents when
// signed, spec §5), and for claim successors the predecessor's scope, which
// replaces At.Scope so that the set of paths stays the same (spec §8). Err
// is set by a builder that could not build; Session.Sign returns it.
type Draft struct {
	Kind  correspondence.Kind
	Body  canonicaljson.Value
	Refs  []string
	Scope *correspondence.Scope
	Err   error
}

// At says where an event applies: repository and thread ids (opaque, spec
// §4), work scope (spec §3; 1–64 path prefixes) and the parents the sender
// causally depends on (≤16 event ids, spec §3), in addition to the ids the
// body references, which Session.Sign adds itself.
type At struct {
	RepositoryID string
	ThreadID     string
	Scope        correspondence.Scope
	Parents      []string
}

// Sequencer hands out session_seq values for one session (spec §7): each
// call returns a value greater than any it returned before. Persistence is
// the caller's choice: MemorySequencer for a process-long session,
// FileSequencer to survive restarts.
type Sequencer interface {
	Next() (int64, error)
}

// MemorySequencer counts in memory from a starting point. Safe for
// concurrent use.
type MemorySequencer struct {
	mu   sync.Mutex
	last int64
}

// NewMemorySequencer returns a Sequencer whose first value is last+1.
func NewMemorySequencer(last int64) *MemorySequencer { return &MemorySequencer{last: last} }

// Next returns the next session_seq (≥1). Error when 2^53-1 is exhausted.
func (m *MemorySequencer) Next() (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last >= canonicaljson.MaxSafeInteger {
		return 0, errors.New("session_seq exhausted")
	}
	m.last++
	return m.last, nil
}

// FileSequencer keeps the last session_seq used in a file (a decimal
// integer and a newline), written atomically (temporary file and rename)
// before the value is returned, so a crash never reuses a value. A missing
// file means nothing was used yet. It is not safe for two processes at
// once: give each concurrent session its own file (and its own session id).
type FileSequencer struct {
	Path string
	mu   sync.Mutex
}

// Next reads the last value, stores last+1 and returns it. Errors: file
// I/O, or a file that does not hold a non-negative integer.
func (f *FileSequencer) Next() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next, err := f.reserve()
	if err != nil {
		return 0, err
	}
	return next, f.commit(next)
}

// Reserve returns the value Next would return, without storing it: a
// caller that may still refuse its event (a local validation, a signing
// error) reserves, and spends the value with Commit only once the event is
// signed, so a refused event uses no session_seq. Errors: those of Next.
func (f *FileSequencer) Reserve() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reserve()
}

// Commit stores n, a value Reserve returned, as the last one used. Error
// when the file already holds n or more (another writer spent it since:
// the value must not be used twice), or on file I/O.
func (f *FileSequencer) Commit(n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	next, err := f.reserve()
	if err != nil {
		return err
	}
	if n < next {
		return fmt.Errorf("session_seq file %s: %d was used since it was reserved", f.Path, n)
	}
	return f.commit(n)
}

func (f *FileSequencer) reserve() (int64, error) {
	var last int64
	data, err := os.ReadFile(f.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("session_seq file: %w", err)
	default:
		last, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || last < 0 {
			return 0, fmt.Errorf("session_seq file %s: not a non-negative integer", f.Path)
		}
	}
	if last >= canonicaljson.MaxSafeInteger {
		return 0, errors.New("session_seq exhausted")
	}
	return last + 1, nil
}

func (f *FileSequencer) commit(n int64) error {
	if err := writeFileAtomic(f.Path, []byte(strconv.FormatInt(n, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("session_seq file: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to a temporary file beside path, syncs it
// and renames it over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteFileAtomic is writeFileAtomic for the CLI's cursor files: data
// replaces path's contents in one rename, with permissions perm.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm)
}

// Session signs events for one session of one Signer: it draws session_seq
// from Seq and stamps issued_at from Now (time.Now when nil) in
// RFC3339-ms UTC (spec §2).
type Session struct {
	Signer *Signer
	Seq    Sequencer
	Now    func() time.Time
}

// NewSession returns a Session for s with sequence seq.
func NewSession(s *Signer, seq Sequencer) *Session { return &Session{Signer: s, Seq: seq} }

// Sign builds, signs and returns the event of draft d at a: parents are
// at.Parents followed by d.Refs not already present (spec §5); scope is
// d.Scope when set, else at.Scope. Errors: d.Err, the Sequencer's error,
// or a signing error. The event is not validated: the relay judges it.
func (s *Session) Sign(at At, d Draft) (*correspondence.Event, error) {
	if d.Err != nil {
		return nil, fmt.Errorf("build %s: %w", d.Kind, d.Err)
	}
	seq, err := s.Seq.Next()
	if err != nil {
		return nil, err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	parents := make([]string, 0, len(at.Parents)+len(d.Refs))
	for _, p := range append(slices.Clip(at.Parents), d.Refs...) {
		if !slices.Contains(parents, p) {
			parents = append(parents, p)
		}
	}
	scope := at.Scope
	if d.Scope != nil {
		scope = *d.Scope
	}
	scope.Paths = slices.Clone(scope.Paths)
	ev := &correspondence.Event{
		RepositoryID: at.RepositoryID,
		ThreadID:     at.ThreadID,
		Kind:         d.Kind,
		Parents:      parents,
		SessionSeq:   seq,
		IssuedAt:     correspondence.FormatTimestamp(now()),
		Scope:        scope,
		Body:         d.Body,
	}
	if err := s.Signer.Sign(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

func member(name string, v canonicaljson.Value) canonicaljson.Member {
	return canonicaljson.Member{Name: name, Value: v}
}

func str(s string) canonicaljson.Value { return canonicaljson.StringValue(s) }

// body builds an object from name/value pairs, leaving out members whose
// value is an empty string (the builders' spelling of "absent").
func body(ms ...canonicaljson.Member) canonicaljson.Value {
	out := make([]canonicaljson.Member, 0, len(ms))
	for _, m := range ms {
		if m.Value.Kind == canonicaljson.String && m.Value.Str == "" {
			continue
		}
		out = append(out, m)
	}
	return canonicaljson.Value{Kind: canonicaljson.Object, Members: out}
}

func ids(ss []string) canonicaljson.Value {
	v := canonicaljson.Value{Kind: canonicaljson.Array, Elems: make([]canonicaljson.Value, len(ss))}
	for i, s := range ss {
		v.Elems[i] = str(s)
	}
	return v
}

func summaryDraft(k correspondence.Kind, summary string) Draft {
	return Draft{Kind: k, Body: body(member("summary", str(summary)))}
}

// Intent says what the sender means to do (spec §5; summary 1–1000 scalars).
func Intent(summary string) Draft { return summaryDraft(correspondence.KindIntent, summary) }

// Progress reports work done (spec §5; summary 1–1000 scalars).
func Progress(summary string) Draft { return summaryDraft(correspondence.KindProgress, summary) }

// Observation reports something noticed (spec §5; summary 1–1000 scalars).
func Observation(summary string) Draft {
	return summaryDraft(correspondence.KindObservation, summary)
}

// ClaimOpen roots a claim lineage at generation 1 (spec §5, §8). claimID
// is a UUID the caller picks (uuid.NewString()); expiresAt is rendered in
// RFC3339-ms UTC and compared by the relay against its database clock.
func ClaimOpen(claimID string, expiresAt time.Time) Draft {
	return Draft{Kind: correspondence.KindClaimOpen, Body: body(
		member("claim_id", str(claimID)),
		member("generation", canonicaljson.IntValue(1)),
		member("expires_at", str(correspondence.FormatTimestamp(expiresAt))),
	)}
}

// claimOf reads claim_id and generation from a signed claim.open or
// claim.renew body.
func claimOf(pred *correspondence.Event) (claimID string, gen int64, err error) {
	if pred == nil || (pred.Kind != correspondence.KindClaimOpen && pred.Kind != correspondence.KindClaimRenew) {
		return "", 0, ErrNotClaim
	}
	if pred.ID == "" {
		return "", 0, ErrNoPredecessorID
	}
	c, ok1 := pred.Body.Get("claim_id")
	g, ok2 := pred.Body.Get("generation")
	if !ok1 || !ok2 || c.Kind != canonicaljson.String || g.Kind != canonicaljson.Int || g.Int < 1 {
		return "", 0, ErrNotClaim
	}
	return c.Str, g.Int, nil
}

func successor(k correspondence.Kind, pred *correspondence.Event, extra ...canonicaljson.Member) Draft {
	claimID, gen, err := claimOf(pred)
	if err != nil {
		return Draft{Kind: k, Err: err}
	}
	ms := append([]canonicaljson.Member{
		member("claim_id", str(claimID)),
		member("generation", canonicaljson.IntValue(gen+1)),
		member("predecessor_event_id", str(pred.ID)),
	}, extra...)
	scope := pred.Scope
	scope.Paths = slices.Clone(pred.Scope.Paths)
	return Draft{Kind: k, Body: body(ms...), Refs: []string{pred.ID}, Scope: &scope}
}

// ClaimRenew extends the claim of pred (a signed claim.open or
// claim.renew) until expiresAt: same claim_id, generation+1,
// predecessor_event_id = pred's event id (also added to parents) and pred's
// scope (spec §8). Err: ErrNotClaim, ErrNoPredecessorID.
func ClaimRenew(pred *correspondence.Event, expiresAt time.Time) Draft {
	return successor(correspondence.KindClaimRenew, pred,
		member("expires_at", str(correspondence.FormatTimestamp(expiresAt))))
}

// ClaimRelease ends the branch of pred's claim (spec §8), like ClaimRenew
// without expiry; detail is optional ("" leaves it out).
func ClaimRelease(pred *correspondence.Event, detail string) Draft {
	return successor(correspondence.KindClaimRelease, pred, member("detail", str(detail)))
}

// Artifact is the artifact object of an artifact.offer (spec §5).
type Artifact struct {
	v canonicaljson.Value
}

// GitCommit names a commit by its 40 or 64 lowercase hex revision.
func GitCommit(revision string) Artifact {
	return Artifact{body(member("kind", str("git_commit")), member("revision", str(revision)))}
}

// GitPatch names a patch by "sha256:<hex>" digest and an optional
// locator (spec §4; "" leaves it out).
func GitPatch(digest, locator string) Artifact {
	return Artifact{body(member("kind", str("git_patch")), member("digest", str(digest)), member("locator", str(locator)))}
}

// ContentDigest names other content by "sha256:<hex>" digest and an
// optional locator.
func ContentDigest(digest, locator string) Artifact {
	return Artifact{body(member("kind", str("content_digest")), member("digest", str(digest)), member("locator", str(locator)))}
}

// ArtifactOffer offers an artifact for review (spec §5); summary is
// optional.
func ArtifactOffer(a Artifact, summary string) Draft {
	return Draft{Kind: correspondence.KindArtifactOffer, Body: body(member("artifact", a.v), member("summary", str(summary)))}
}

func targetDraft(k correspondence.Kind, target string, extra ...canonicaljson.Member) Draft {
	ms := append([]canonicaljson.Member{member("target_event_id", str(target))}, extra...)
	return Draft{Kind: k, Body: body(ms...), Refs: []string{target}}
}

// AckSeen declares that the target event's bytes were seen (spec §5);
// target is added to parents; detail is optional.
func AckSeen(target, detail string) Draft {
	return targetDraft(correspondence.KindAckSeen, target, member("detail", str(detail)))
}

// AckUnderstood declares an interpretation sufficient to continue.
func AckUnderstood(target, detail string) Draft {
	return targetDraft(correspondence.KindAckUnderstood, target, member("detail", str(detail)))
}

// AckAccepted accepts the target proposal for coordination (no authority).
func AckAccepted(target, detail string) Draft {
	return targetDraft(correspondence.KindAckAccepted, target, member("detail", str(detail)))
}

// AckApplied reports that the target was applied, resulting in Git
// revision resultRevision (40/64 lowercase hex).
func AckApplied(target, resultRevision, detail string) Draft {
	return targetDraft(correspondence.KindAckApplied, target,
		member("result_revision", str(resultRevision)), member("detail", str(detail)))
}

// AckRejected declines the target proposal; no reason is required.
func AckRejected(target, detail string) Draft {
	return targetDraft(correspondence.KindAckRejected, target, member("detail", str(detail)))
}

// Resume ends a pause or rest named by target (spec §5).
func Resume(target, detail string) Draft {
	return targetDraft(correspondence.KindResume, target, member("detail", str(detail)))
}

// ConflictRaise exposes a conflict among 2–16 unique target events; all
// are added to parents; summary is optional.
func ConflictRaise(targets []string, summary string) Draft {
	return Draft{Kind: correspondence.KindConflictRaise,
		Body: body(member("target_event_ids", ids(targets)), member("summary", str(summary))),
		Refs: slices.Clone(targets)}
}

// ConflictResolve records a resolution of 1–16 target events with a
// required summary and optional result revision.
func ConflictResolve(targets []string, summary, resultRevision string) Draft {
	return Draft{Kind: correspondence.KindConflictResolve,
		Body: body(member("target_event_ids", ids(targets)), member("summary", str(summary)), member("result_revision", str(resultRevision))),
		Refs: slices.Clone(targets)}
}

// Repair appends a correction of 1–16 target events (nothing is edited).
func Repair(targets []string, summary, resultRevision string) Draft {
	return Draft{Kind: correspondence.KindRepair,
		Body: body(member("target_event_ids", ids(targets)), member("summary", str(summary)), member("result_revision", str(resultRevision))),
		Refs: slices.Clone(targets)}
}

func untilDraft(k correspondence.Kind, until time.Time, detail string) Draft {
	ms := []canonicaljson.Member{}
	if !until.IsZero() {
		ms = append(ms, member("until", str(correspondence.FormatTimestamp(until))))
	}
	ms = append(ms, member("detail", str(detail)))
	return Draft{Kind: k, Body: body(ms...)}
}

// Pause says the sender pauses, optionally until a time (zero leaves
// until out) and with an optional detail. No reason is required (spec §5).
func Pause(until time.Time, detail string) Draft {
	return untilDraft(correspondence.KindPause, until, detail)
}

// Rest is Pause's sibling for rest (spec §5).
func Rest(until time.Time, detail string) Draft {
	return untilDraft(correspondence.KindRest, until, detail)
}

// Refusal declines, optionally naming a target event (added to parents)
// and a detail; both may be "".
func Refusal(target, detail string) Draft {
	d := Draft{Kind: correspondence.KindRefusal, Body: body(member("target_event_id", str(target)), member("detail", str(detail)))}
	if target != "" {
		d.Refs = []string{target}
	}
	return d
}

// Handoff passes work on: summary (≤2000 scalars), the next safe action,
// and an optional handoff contract UUID (handoff-contract-1.md).
func Handoff(summary, nextSafeAction, handoffID string) Draft {
	return Draft{Kind: correspondence.KindHandoff, Body: body(
		member("summary", str(summary)), member("next_safe_action", str(nextSafeAction)), member("handoff_id", str(handoffID)))}
}

// Close ends the sender's part in a thread; summary is optional.
func Close(summary string) Draft {
	return summaryDraft(correspondence.KindClose, summary)
}
