package relay

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Bounds of the voice conflict lists (spec §9).
const (
	maxOverlaps     = 128 // overlapping_claims rows
	maxOverlapPaths = 16  // paths per overlapping_claims row
)

// epochEvaluatedAt is evaluated_at for an empty stream (spec §8).
const epochEvaluatedAt = "1970-01-01T00:00:00.000Z"

// handleClaims serves the active-claims projection (spec §8, §9).
func (s *Server) handleClaims(w http.ResponseWriter, r *http.Request) {
	pid, _, err := s.readProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := readQuery(r, "project_id", "repository_id", "thread_id", "path")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	repo, thread, err := repoSelection(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	path, hasPath := q["path"]
	if hasPath && !correspondence.ValidPath(path) {
		s.writeError(w, r, errPathInvalid)
		return
	}
	media, ok := negotiate(r, offersJSON)
	if !ok {
		s.writeError(w, r, errNotAcceptable)
		return
	}
	s.reconcileForRead(r.Context(), pid)
	snap, err := s.st.ClaimsSnapshot(r.Context(), store.ClaimsQuery{ProjectID: pid, RepositoryID: repo, ThreadID: thread, Path: path})
	if err != nil {
		s.writeError(w, r, projectionErr(err))
		return
	}
	truncated := snap.Truncated || snap.LineageIncomplete
	out := wire.Claims[jsontext.Value]{
		Protocol: correspondence.Protocol, Scope: "project_private",
		EvaluatedAt: evaluatedAt(snap), Cursor: cursorOf(snap.Head),
		ProjectionStatus: statusOf(truncated, false), Truncated: truncated,
		Claims: activeRows(snap.Claims),
	}
	s.writeProjection(w, r, media, store.Selection{ProjectID: pid, RepositoryID: repo, ThreadID: thread}, out)
}

// handleVoice serves the bounded coordination snapshot (spec §9).
func (s *Server) handleVoice(w http.ResponseWriter, r *http.Request) {
	pid, _, err := s.readProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := readQuery(r, "project_id", "repository_id", "thread_id")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	repo, thread, err := repoSelection(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	media, ok := negotiate(r, offersJSON)
	if !ok {
		s.writeError(w, r, errNotAcceptable)
		return
	}
	s.reconcileForRead(r.Context(), pid)
	snap, err := s.st.VoiceSnapshot(r.Context(), store.VoiceQuery{ProjectID: pid, RepositoryID: repo, ThreadID: thread})
	if err != nil {
		s.writeError(w, r, projectionErr(err))
		return
	}
	out := wire.Voice[jsontext.Value]{
		Protocol: correspondence.Protocol, Scope: "project_private",
		EvaluatedAt: evaluatedAt(snap.ClaimsSnapshot), Cursor: cursorOf(snap.Head),
		RecentEvents: make([]wire.Record, 0, len(snap.Recent)),
		ActiveClaims: activeRows(snap.Claims),
		Conflicts: wire.Conflicts{
			MissingParents: []wire.MissingParents{}, SessionForks: []wire.SessionFork{}, OverlappingClaims: []wire.Overlap{},
		},
	}
	truncated := snap.RecentTruncated || snap.Truncated || snap.LineageIncomplete
	for _, rec := range snap.Recent {
		out.RecentEvents = append(out.RecentEvents, recordOf(rec))
		if len(rec.MissingParents) > 0 {
			out.Conflicts.MissingParents = append(out.Conflicts.MissingParents,
				wire.MissingParents{EventID: rec.EventID, MissingParentIDs: rec.MissingParents})
		}
	}
	for _, f := range snap.SessionForks {
		out.Conflicts.SessionForks = append(out.Conflicts.SessionForks, wire.SessionFork{IdentityID: f.IdentityID,
			DeviceID: f.DeviceID, SessionID: f.SessionID, SessionSeq: f.SessionSeq, EventIDs: f.EventIDs})
		truncated = truncated || f.Truncated
	}
	overlaps, more := overlappingClaims(snap.Claims)
	out.Conflicts.OverlappingClaims = overlaps
	unavailable := len(snap.Unavailable) > 0
	// A failed part is never presented as an empty complete one.
	out.Truncated = truncated || more || unavailable
	out.ProjectionStatus = statusOf(out.Truncated, unavailable)
	s.writeProjection(w, r, media, store.Selection{ProjectID: pid, RepositoryID: repo, ThreadID: thread}, out)
}

// reconcileForRead does the read's bounded lineage work (spec §8) in its
// own short write transaction, when the persisted incomplete flag says
// frontier rows are queued (with none queued there is nothing to resolve,
// and no write transaction is spent on it). Its failure is not the read's:
// the persisted flag still tells the truth about the remaining work, and
// the snapshot read reports it.
func (s *Server) reconcileForRead(ctx context.Context, projectID string) {
	if incomplete, _, err := s.st.LineageWatermark(ctx, projectID); err == nil && !incomplete {
		return
	}
	if _, err := s.st.ReconcileLineage(ctx, projectID, store.FrontierBudget); err != nil && ctx.Err() == nil && !isNotFound(err) {
		s.log.WarnContext(ctx, "read-time lineage reconciliation failed", "project_id", projectID, "err", err)
	}
}

// projectionErr maps a snapshot failure: total failure is 503
// correspondence_projection_unavailable, never an empty 200.
func projectionErr(err error) error {
	if isNotFound(err) {
		return err
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	return errProjectionUnavailable
}

// writeProjection ends a claims or voice read with the shared headers and
// the exact JSON bytes under a strong ETag (304 on a match; HEAD without
// body).
func (s *Server) writeProjection(w http.ResponseWriter, r *http.Request, media string, sel store.Selection, out any) {
	body, err := marshalJSON(out)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	base := s.publicBase(r)
	self := selfURL(r, base)
	s.setCorrespondenceHeaders(w, r, sel, linkSet{
		self: self, selfType: media,
		alternate: base + "/v1/correspondence/events.atom?" + selectionQuery(sel), alternateType: mediaAtom,
	})
	s.writeRepresentation(w, r, media, body)
}

// evaluatedAt is the latest of the head's received_at, the lineage
// watermark and the newest already-past expiry (spec §8); the epoch when
// all are absent.
func evaluatedAt(snap store.ClaimsSnapshot) string {
	t := snap.HeadAt
	for _, c := range []time.Time{snap.LineageChangedAt, snap.LastExpiredAt} {
		if c.After(t) {
			t = c
		}
	}
	if t.IsZero() {
		return epochEvaluatedAt
	}
	return correspondence.FormatTimestamp(t)
}

func cursorOf(head int64) *string {
	if head == 0 {
		return nil
	}
	c := strconv.FormatInt(head, 10)
	return &c
}

func statusOf(truncated, unavailable bool) string {
	switch {
	case unavailable:
		return wire.ProjectionUnavailable
	case truncated:
		return wire.ProjectionTruncated
	}
	return wire.ProjectionComplete
}

func activeRows(claims []store.ActiveClaim) []wire.ActiveClaim[jsontext.Value] {
	out := make([]wire.ActiveClaim[jsontext.Value], 0, len(claims))
	for _, c := range claims {
		out = append(out, wire.ActiveClaim[jsontext.Value]{
			ClaimID: c.ClaimID, Generation: c.Generation, EventID: c.EventID, OwnerIdentityID: c.RootIdentityID,
			DeviceID: c.DeviceID, SessionID: c.SessionID, ThreadID: c.ThreadID, Scope: jsontext.Value(c.Scope),
			ExpiresAt:  correspondence.FormatTimestamp(c.ExpiresAt),
			Conflicted: len(c.CompetingEventIDs) > 0, CompetingEventIDs: nonNil(c.CompetingEventIDs),
		})
	}
	return out
}

// overlappingClaims lists the pairs of active claims with overlapping
// paths (spec §4, §9), left_event_id < right_event_id, in (left, right)
// order: for each overlapping pair of prefixes the shorter one (the one
// that contains the other), unique and sorted, at most maxOverlapPaths.
// more is true when rows or paths were cut.
func overlappingClaims(claims []store.ActiveClaim) (rows []wire.Overlap, more bool) {
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b store.ActiveClaim) int { return strings.Compare(a.EventID, b.EventID) })
	n := len(sorted)
	// Two prefixes overlap when one is "." or one equals the other or one of
	// its "/"-ancestors (spec §4). So index the claims by exact path, and for
	// each path of each claim look up the path itself and its ancestors:
	// work grows with paths × depth, not with pairs × paths², which a read
	// token could otherwise make expensive (128 claims × 64 paths).
	byPath := make(map[string][]int)
	var dots []int
	for ci, c := range sorted {
		for _, p := range c.Paths {
			if p == "." {
				dots = append(dots, ci)
			}
			if l := byPath[p]; len(l) == 0 || l[len(l)-1] != ci {
				byPath[p] = append(l, ci)
			}
		}
	}
	pairs := make(map[[2]int][]string)
	add := func(a, b int, path string) {
		if a == b {
			return
		}
		if a > b {
			a, b = b, a
		}
		key := [2]int{a, b}
		pairs[key] = append(pairs[key], path)
	}
	for ci, c := range sorted {
		for _, q := range c.Paths {
			if q == "." {
				continue // handled with dots below
			}
			for end := 0; end <= len(q); end++ {
				if end < len(q) && q[end] != '/' {
					continue
				}
				anc := q[:end]
				for _, other := range byPath[anc] {
					add(other, ci, anc)
				}
			}
		}
	}
	for _, d := range dots {
		for ci := 0; ci < n; ci++ {
			add(d, ci, ".")
		}
	}
	keys := make([][2]int, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	rows = []wire.Overlap{}
	for _, k := range keys {
		if len(rows) == maxOverlaps {
			return rows, true
		}
		paths := pairs[k]
		slices.Sort(paths)
		paths = slices.Compact(paths)
		if len(paths) > maxOverlapPaths {
			paths, more = paths[:maxOverlapPaths], true
		}
		rows = append(rows, wire.Overlap{LeftEventID: sorted[k[0]].EventID, RightEventID: sorted[k[1]].EventID, Paths: paths})
	}
	return rows, more
}
