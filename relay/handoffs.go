package relay

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/handoff"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Handoff contracts over HTTP (spec/handoff-contract-1.md "HTTP").
//
// Project decisions the spec leaves open, in one place:
//   - A PUT creates version 1 only in state proposed with attempt 0 (or
//     absent) and no result; anything else is 422 contract_invalid with
//     an issue at /state, /attempt or /result. Later states are reached
//     through transitions only, so every version has a recorded cause.
//   - An idempotent replay (200) answers with the contract's current
//     version, which may be later than the version 1 it created.
//   - The ETag is strong over the exact bytes of the representation
//     (contract, version, overdue, events). If-Match on a transition is
//     compared with the current representation computed the same way, so
//     the ETag of any GET, PUT or transition answer is the one to send;
//     if a handoff event naming the contract arrived or the deadline
//     passed since, the client re-reads (412) before moving it.
//   - overdue uses the relay's clock; nothing changes state by itself.
//   - events lists at most store.MaxHandoffEvents ids in received order;
//     "events_truncated": true is added only when more exist.
//   - The list carries contract, version and overdue per row, not events.

// MaxContractBytes caps a PUT or transition body (413 body_too_large).
const MaxContractBytes = 262144

// maxVersionsPageBytes bounds the contract bytes of one versions page.
const maxVersionsPageBytes = 4 << 20

// MaxHandoffVersions bounds a contract's history: every move stores a full
// version, and blocked ⇄ running could otherwise grow it without end.
const MaxHandoffVersions = 1000

// handoffJSON is the representation of one contract version (spec
// "HTTP"): the stored RFC 8785 contract bytes, the version number, the
// deadline flag and the ids of handoff events naming it.
type handoffJSON struct {
	Contract        jsontext.Value `json:"contract"`
	Version         int64          `json:"version"`
	Overdue         bool           `json:"overdue"`
	Events          []string       `json:"events"`
	EventsTruncated bool           `json:"events_truncated,omitzero"`
}

// handoffRowJSON is one row of the list.
type handoffRowJSON struct {
	Contract jsontext.Value `json:"contract"`
	Version  int64          `json:"version"`
	Overdue  bool           `json:"overdue"`
}

type handoffListJSON struct {
	Handoffs []handoffRowJSON `json:"handoffs"`
	Page     wire.Page        `json:"page"`
}

type handoffVersionJSON struct {
	Version   int64          `json:"version"`
	CreatedAt string         `json:"created_at"`
	Contract  jsontext.Value `json:"contract"`
}

type handoffVersionsJSON struct {
	HandoffID string               `json:"handoff_id"`
	Versions  []handoffVersionJSON `json:"versions"`
	Page      wire.Page            `json:"page"`
}

// handoffID reads and checks the {handoff_id} path variable.
func handoffID(r *http.Request) (string, error) {
	id := mux.Vars(r)["handoff_id"]
	if !handoff.ValidHandoffID(id) {
		return "", errHandoffIDInvalid
	}
	return id, nil
}

// handoffStart is the project's route prologue: the scope, the JSON
// answer media type, and the path id when the route has one.
func (s *Server) handoffStart(w http.ResponseWriter, r *http.Request, scope string, withID bool) (principal, string, bool) {
	p := principalFrom(r.Context())
	if err := requireProject(p, scope); err != nil {
		s.writeError(w, r, err)
		return p, "", false
	}
	if _, ok := negotiate(r, []string{mediaJSON}); !ok {
		s.writeError(w, r, errNotAcceptable)
		return p, "", false
	}
	if !withID {
		return p, "", true
	}
	id, err := handoffID(r)
	if err != nil {
		s.writeError(w, r, err)
		return p, "", false
	}
	return p, id, true
}

// representation renders v as handoffJSON at now.
func (s *Server) representation(r *http.Request, v store.HandoffVersion, now time.Time) ([]byte, error) {
	var c handoff.Contract
	if err := json.Unmarshal(v.Contract, &c); err != nil {
		return nil, err
	}
	ids, truncated, err := s.st.HandoffEvents(r.Context(), v.ProjectID, v.HandoffID)
	if err != nil {
		return nil, err
	}
	return marshalJSON(handoffJSON{Contract: jsontext.Value(v.Contract), Version: v.Version, Overdue: c.Overdue(now), Events: nonNil(ids), EventsTruncated: truncated})
}

func (s *Server) writeHandoff(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Set("ETag", etagOf(body))
	w.Header().Set("Cache-Control", "private")
	w.Header().Set("Vary", "Accept, Authorization")
	s.writeBytes(w, r, status, mediaJSON, body)
}

// handleHandoffPut creates a contract (201) or replays its creation (200);
// with If-None-Match: * (or the current ETag) a replay is 412 instead,
// and with If-Match (RFC 9110 §13.1.1) anything but a replay whose
// current ETag it names (or *) is 412: nothing is created when no
// contract exists.
func (s *Server) handleHandoffPut(w http.ResponseWriter, r *http.Request) {
	p, id, ok := s.handoffStart(w, r, store.ScopeAppend, true)
	if !ok {
		return
	}
	if !acceptableBody(r) {
		s.writeError(w, r, errUnsupportedType)
		return
	}
	raw, err := readBody(w, r, MaxContractBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, issues, err := handoff.Validate(raw)
	if err != nil {
		s.writeError(w, r, err) // strict profile: 400 with its reason code
		return
	}
	if len(issues) > 0 {
		s.writeError(w, r, contractInvalid(issues))
		return
	}
	if c.HandoffID != id {
		s.writeError(w, r, errHandoffIDMismatch)
		return
	}
	if issues := newContractIssues(c); len(issues) > 0 {
		s.writeError(w, r, contractInvalid(issues))
		return
	}
	canonical, err := c.Canonical()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ifMatch := r.Header.Values("If-Match")
	if len(ifMatch) > 0 {
		// If-Match is false without a current representation. Contracts
		// are never deleted, so one found here still exists below.
		if _, err := s.st.Handoff(r.Context(), p.ProjectID, id); errors.Is(err, store.ErrNotFound) {
			s.writeError(w, r, errHandoffAbsent)
			return
		} else if err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	v, created, err := s.st.CreateHandoff(r.Context(), store.HandoffVersion{
		ProjectID: p.ProjectID, HandoffID: id, Version: 1, Contract: canonical,
		State: string(c.State), AssigneeID: c.Assignee.ID, IdempotencyKey: c.IdempotencyKey,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := s.representation(r, v, time.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(ifMatch) > 0 && (created || !ifMatchStrong(ifMatch, etagOf(body))) {
		s.writeError(w, r, errPreconditionFailed)
		return
	}
	if !created && ifNoneMatch(r, etagOf(body)) {
		// RFC 9110 §13.1.2: If-None-Match: * (or the current ETag) asks
		// for a create only; the replay is refused and nothing changed.
		s.writeError(w, r, errHandoffPresent)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", s.publicBase(r)+"/v1/handoffs/"+v.HandoffID)
	}
	s.writeHandoff(w, r, status, body)
}

// newContractIssues are the project's rules for version 1 (see the top of
// this file).
func newContractIssues(c handoff.Contract) []handoff.Issue {
	var issues []handoff.Issue
	if c.State != handoff.Proposed {
		issues = append(issues, handoff.Issue{Pointer: "/state", Message: "a new contract must be in state proposed; later states are reached through transitions"})
	}
	if c.Attempt != 0 {
		issues = append(issues, handoff.Issue{Pointer: "/attempt", Message: "a new contract has attempt 0 (or none)"})
	}
	if c.Result != nil {
		issues = append(issues, handoff.Issue{Pointer: "/result", Message: "a new contract has no result; it is given with a transition"})
	}
	return issues
}

// handleHandoffGet serves the current version under its ETag (304 on a
// matching If-None-Match).
func (s *Server) handleHandoffGet(w http.ResponseWriter, r *http.Request) {
	p, id, ok := s.handoffStart(w, r, store.ScopeRead, true)
	if !ok {
		return
	}
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.st.Handoff(r.Context(), p.ProjectID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := s.representation(r, v, time.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "private")
	w.Header().Set("Vary", "Accept, Authorization")
	s.writeRepresentation(w, r, mediaJSON, body)
}

// handleHandoffTransition moves a contract to another state under
// If-Match and stores the result as the next version.
func (s *Server) handleHandoffTransition(w http.ResponseWriter, r *http.Request) {
	p, id, ok := s.handoffStart(w, r, store.ScopeAppend, true)
	if !ok {
		return
	}
	ifMatch := r.Header.Values("If-Match")
	if len(ifMatch) == 0 || strings.TrimSpace(strings.Join(ifMatch, "")) == "" {
		s.writeError(w, r, errPreconditionRequired) // an empty If-Match names no version
		return
	}
	if !acceptableBody(r) {
		s.writeError(w, r, errUnsupportedType)
		return
	}
	raw, err := readBody(w, r, MaxContractBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	to, result, err := parseTransition(raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !slices.Contains(handoff.States, handoff.State(to)) {
		s.writeError(w, r, errToStateInvalid)
		return
	}
	cur, err := s.st.Handoff(r.Context(), p.ProjectID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := time.Now()
	body, err := s.representation(r, cur, now)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !ifMatchStrong(ifMatch, etagOf(body)) {
		s.writeError(w, r, errPreconditionFailed)
		return
	}
	next, err := nextVersion(cur, to, result)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.st.AppendHandoffVersion(r.Context(), next)
	if err != nil {
		s.writeError(w, r, err) // store.ErrVersionConflict: another writer won, 412
		return
	}
	body, err = s.representation(r, v, now)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeHandoff(w, r, http.StatusOK, body)
}

// parseTransition reads {"to": state, "result"?: object} under the strict
// profile; result is returned as a value so the schema can judge it in
// place (/result/... pointers).
func parseTransition(raw []byte) (string, *canonicaljson.Value, error) {
	doc, err := canonicaljson.ParseObject(raw)
	if err != nil {
		return "", nil, err
	}
	var to string
	var result *canonicaljson.Value
	seenTo := false
	for i := range doc.Members {
		m := &doc.Members[i]
		switch {
		case m.Name == "to" && m.Value.Kind == canonicaljson.String:
			to, seenTo = m.Value.Str, true
		case m.Name == "result" && m.Value.Kind == canonicaljson.Object:
			result = &m.Value
		default:
			return "", nil, errTransitionBody
		}
	}
	if !seenTo {
		return "", nil, errTransitionBody
	}
	return to, result, nil
}

// nextVersion applies the move to the stored contract (spec "Lifecycle").
// A given result is validated in place in the contract (422
// contract_invalid with /result pointers) before the move is judged (409
// with the lifecycle's code).
func nextVersion(cur store.HandoffVersion, to string, result *canonicaljson.Value) (store.HandoffVersion, error) {
	if cur.Version >= MaxHandoffVersions {
		return store.HandoffVersion{}, errVersionLimit
	}
	doc, err := canonicaljson.ParseObject(cur.Contract)
	if err != nil {
		return store.HandoffVersion{}, err
	}
	var res *handoff.Result
	if result != nil {
		withResult := canonicaljson.ObjectValue()
		for _, m := range doc.Members {
			if m.Name != "result" {
				withResult.Members = append(withResult.Members, m)
			}
		}
		withResult.Members = append(withResult.Members, canonicaljson.Member{Name: "result", Value: *result})
		b, err := canonicaljson.Canonical(withResult)
		if err != nil {
			return store.HandoffVersion{}, err
		}
		c, issues, err := handoff.Validate(b)
		if err != nil {
			return store.HandoffVersion{}, err
		}
		if len(issues) > 0 {
			return store.HandoffVersion{}, contractInvalid(issues)
		}
		res = c.Result
		if res == nil { // {} is a valid, empty result
			res = &handoff.Result{}
		}
	}
	b, err := canonicaljson.Canonical(doc)
	if err != nil {
		return store.HandoffVersion{}, err
	}
	current, issues, err := handoff.Validate(b)
	if err != nil || len(issues) > 0 {
		return store.HandoffVersion{}, errors.New("stored contract no longer validates")
	}
	next, err := handoff.Transition(current, to, res)
	if err != nil {
		return store.HandoffVersion{}, err
	}
	if changed := handoff.ChangedTerms(current, next); len(changed) > 0 {
		return store.HandoffVersion{}, errors.New("transition changed contract terms")
	}
	if issues, err := handoff.Check(next); err != nil || len(issues) > 0 {
		if len(issues) > 0 {
			return store.HandoffVersion{}, contractInvalid(issues)
		}
		return store.HandoffVersion{}, err
	}
	canonical, err := next.Canonical()
	if err != nil {
		return store.HandoffVersion{}, err
	}
	return store.HandoffVersion{ProjectID: cur.ProjectID, HandoffID: cur.HandoffID, Version: cur.Version + 1,
		Contract: canonical, State: string(next.State), AssigneeID: next.Assignee.ID}, nil
}

// handleHandoffList pages the project's contracts newest first.
func (s *Server) handleHandoffList(w http.ResponseWriter, r *http.Request) {
	p, _, ok := s.handoffStart(w, r, store.ScopeRead, false)
	if !ok {
		return
	}
	q, err := readQuery(r, "state", "assignee", "after", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	hq := store.HandoffQuery{ProjectID: p.ProjectID, Limit: 50}
	if st, ok := q["state"]; ok {
		if !validState(st) {
			s.writeError(w, r, errStateInvalid)
			return
		}
		hq.State = st
	}
	if a, ok := q["assignee"]; ok {
		if a == "" {
			s.writeError(w, r, errAssigneeInvalid)
			return
		}
		hq.AssigneeID = a
	}
	var afterStr *string
	if a, ok := q["after"]; ok {
		if !handoff.ValidHandoffID(a) {
			s.writeError(w, r, errAfterNotHandoffID)
			return
		}
		hq.After, afterStr = a, &a
	}
	if hq.Limit, err = pageLimit(q); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.st.Handoffs(r.Context(), hq)
	if errors.Is(err, store.ErrNotFound) {
		err = errAfterNotHandoffID
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := time.Now()
	out := handoffListJSON{Handoffs: make([]handoffRowJSON, 0, len(page.Versions)), Page: wire.Page{After: afterStr, NextAfter: afterStr, HasMore: page.HasMore}}
	for _, v := range page.Versions {
		var c handoff.Contract
		if err := json.Unmarshal(v.Contract, &c); err != nil {
			s.writeError(w, r, err)
			return
		}
		out.Handoffs = append(out.Handoffs, handoffRowJSON{Contract: jsontext.Value(v.Contract), Version: v.Version, Overdue: c.Overdue(now)})
	}
	if n := len(page.Versions); n > 0 {
		last := page.Versions[n-1].HandoffID
		out.Page.NextAfter = &last
	}
	if page.HasMore && out.Page.NextAfter != nil {
		s.setNextLink(w, r, q, *out.Page.NextAfter)
	}
	s.writeListing(w, r, out)
}

func validState(s string) bool {
	for _, st := range handoff.States {
		if string(st) == s {
			return true
		}
	}
	return false
}

// handleHandoffVersions pages the append-only history of one contract.
func (s *Server) handleHandoffVersions(w http.ResponseWriter, r *http.Request) {
	p, id, ok := s.handoffStart(w, r, store.ScopeRead, true)
	if !ok {
		return
	}
	q, err := readQuery(r, "after", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	after, afterStr, err := seqCursor(q, errAfterNotVersion)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := pageLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	vs, more, err := s.st.HandoffVersions(r.Context(), p.ProjectID, id, after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := handoffVersionsJSON{HandoffID: id, Versions: make([]handoffVersionJSON, 0, len(vs)), Page: wire.Page{After: afterStr, NextAfter: afterStr, HasMore: more}}
	size := 0
	for i, v := range vs {
		// A page stops early at maxVersionsPageBytes of contracts (each may
		// be 256 KiB), so one read never builds a huge body; has_more says so.
		if i > 0 && size+len(v.Contract) > maxVersionsPageBytes {
			out.Page.HasMore = true
			break
		}
		size += len(v.Contract)
		out.Versions = append(out.Versions, handoffVersionJSON{Version: v.Version, CreatedAt: correspondence.FormatTimestamp(v.CreatedAt), Contract: jsontext.Value(v.Contract)})
	}
	if n := len(out.Versions); n > 0 {
		last := strconv.FormatInt(out.Versions[n-1].Version, 10)
		out.Page.NextAfter = &last
	}
	s.writeListing(w, r, out)
}

func (s *Server) writeListing(w http.ResponseWriter, r *http.Request, out any) {
	body, err := marshalJSON(out)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "private")
	w.Header().Set("Vary", "Accept, Authorization")
	s.writeRepresentation(w, r, mediaJSON, body)
}
