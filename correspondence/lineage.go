package correspondence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
)

// LineageStatus is a record's claim-lineage status (spec §8).
type LineageStatus string

// The lineage statuses of spec §8.
const (
	LineageNotApplicable LineageStatus = "not_applicable"
	LineagePending       LineageStatus = "pending"
	LineageValid         LineageStatus = "valid"
	LineageInvalid       LineageStatus = "invalid"
)

// LineageNode is what the lineage rules need of one claim event. Nodes of
// other kinds may also be given to ProjectLineage and Lineage: they are
// stored events that are not claims (status LineageNotApplicable), so a
// renew or release naming one as predecessor is invalid rather than
// pending. All nodes given to one projection belong to one project.
type LineageNode struct {
	EventID            string
	RepositoryID       string
	ClaimID            string
	IdentityID         string // the sender's identity
	Kind               Kind
	Generation         int64
	PredecessorEventID string    // "" for claim.open
	Paths              []string  // scope.paths
	ExpiresAt          time.Time // zero for claim.release (and for an unparsable expires_at)
	ThreadID           string
}

// timestampLayout is RFC3339-ms (spec §2).
const timestampLayout = "2006-01-02T15:04:05.000Z"

// NodeOf returns the lineage node of a claim event, read from e's envelope
// and directly from e.Body (claim_id, generation, predecessor_event_id,
// expires_at as RFC3339-ms). ok is false for other kinds; n then still
// carries EventID, RepositoryID, IdentityID, Kind and ThreadID, which is all
// a projection needs of a non-claim event. A member that is absent or of
// the wrong JSON type is left at its zero value (validation, not lineage,
// refuses such events), which makes the node invalid or never active.
func NodeOf(e *Event) (n LineageNode, ok bool) {
	n = LineageNode{
		EventID:      e.ID,
		RepositoryID: e.RepositoryID,
		IdentityID:   e.Sender.IdentityID,
		Kind:         e.Kind,
		ThreadID:     e.ThreadID,
	}
	if !e.Kind.IsClaim() {
		return n, false
	}
	n.Paths = slices.Clone(e.Scope.Paths)
	if v, ok := e.Body.Get("claim_id"); ok && v.Kind == canonicaljson.String {
		n.ClaimID = v.Str
	}
	if v, ok := e.Body.Get("generation"); ok && v.Kind == canonicaljson.Int {
		n.Generation = v.Int
	}
	if v, ok := e.Body.Get("predecessor_event_id"); ok && v.Kind == canonicaljson.String {
		n.PredecessorEventID = v.Str
	}
	if v, ok := e.Body.Get("expires_at"); ok && v.Kind == canonicaljson.String {
		if t, err := time.Parse(timestampLayout, v.Str); err == nil {
			n.ExpiresAt = t
		}
	}
	return n, true
}

// RootStatus is the status a claim.open takes on arrival (spec §8): valid
// when its generation is 1, invalid otherwise. It is valid whatever its
// expiry: an already-expired open enters history but is never active.
func RootStatus(open LineageNode) LineageStatus {
	if open.Kind == KindClaimOpen && open.Generation == 1 {
		return LineageValid
	}
	return LineageInvalid
}

// Successor decides a renew/release child's status once its predecessor
// pred is stored (spec §8). It is the single definition of the rule; the
// stores and ProjectLineage all call it.
//
// predStatus pending gives LineagePending (the child waits). Otherwise the
// child is LineageValid when all of these hold, LineageInvalid when any
// fails:
//   - child is a claim.renew or claim.release naming pred.EventID;
//   - pred is valid and is a claim.open or claim.renew (a release ends its
//     branch, so a child of a release is invalid; so is a child of a
//     non-claim event, whose status is LineageNotApplicable);
//   - child.Generation == pred.Generation+1;
//   - same repository and claim_id;
//   - child is signed by predRootIdentity, the identity of pred's lineage
//     root (device, session and key may change);
//   - the same set of scope.paths (order and repetition irrelevant).
//
// The relay checks that the predecessor is also in parents at validation
// (reference_not_in_parents), and nodes of one projection share a project.
func Successor(pred LineageNode, predStatus LineageStatus, predRootIdentity string, child LineageNode) LineageStatus {
	switch {
	case predStatus == LineagePending:
		return LineagePending
	case child.Kind != KindClaimRenew && child.Kind != KindClaimRelease,
		child.PredecessorEventID == "" || child.PredecessorEventID != pred.EventID,
		predStatus != LineageValid,
		pred.Kind != KindClaimOpen && pred.Kind != KindClaimRenew,
		child.Generation != pred.Generation+1,
		child.RepositoryID != pred.RepositoryID,
		child.ClaimID != pred.ClaimID,
		child.IdentityID != predRootIdentity,
		!samePathSet(pred.Paths, child.Paths):
		return LineageInvalid
	}
	return LineageValid
}

// samePathSet reports whether a and b hold the same set of strings.
func samePathSet(a, b []string) bool {
	sa := slices.Compact(slices.Sorted(slices.Values(a)))
	sb := slices.Compact(slices.Sorted(slices.Values(b)))
	return slices.Equal(sa, sb)
}

// ClaimKey names one claim: tips sharing a key compete (spec §8).
type ClaimKey struct {
	RepositoryID string
	ClaimID      string
}

// LineageResult is the projection of a set of claim events at one instant.
type LineageResult struct {
	Status     map[string]LineageStatus // by event id, every node given
	Tips       []string                 // valid events with no valid direct child, sorted
	Active     []string                 // tips that are open/renew with ExpiresAt > now, sorted
	Conflicted []string                 // tips of a (repository, claim) with more than one tip, sorted
	// TipsByClaim lists every tip of each claim that has one, sorted: the
	// competing_event_ids of an active row are the other tips of its key.
	TipsByClaim map[ClaimKey][]string
}

// ProjectLineage computes the claim-lineage projection (spec §8) of nodes
// at instant now. The result does not depend on the order of nodes. A node
// whose predecessor chain reaches an event id not among nodes (or loops,
// which content addressing makes impossible for real events) is pending.
// When an event id repeats, the first node with it is used.
//
// Tips are valid events without a valid direct child: a pending, invalid,
// expired or released child never hands the tip back to its ancestor, and a
// release tip ends only its own branch. Active tips are open/renew tips with
// ExpiresAt strictly after now.
func ProjectLineage(nodes []LineageNode, now time.Time) LineageResult {
	byID := make(map[string]*LineageNode, len(nodes))
	for i := range nodes {
		if _, dup := byID[nodes[i].EventID]; !dup {
			byID[nodes[i].EventID] = &nodes[i]
		}
	}
	status := make(map[string]LineageStatus, len(byID))
	root := make(map[string]string, len(byID)) // lineage root's identity, read only for valid nodes
	var stack []string
	onStack := make(map[string]bool)
	for id := range byID {
		// Walk the predecessor chain back to a decided (or missing) event,
		// then decide the links from the oldest one forward to id; iterative,
		// so that long chains cannot overflow the stack.
		cur := id
		stack = stack[:0]
		clear(onStack)
		for {
			if _, done := status[cur]; done {
				break
			}
			n, stored := byID[cur]
			if !stored {
				break // the bottom of the stack has a missing predecessor
			}
			if !n.Kind.IsClaim() {
				status[cur] = LineageNotApplicable
				break
			}
			if n.Kind == KindClaimOpen {
				status[cur] = RootStatus(*n)
				root[cur] = n.IdentityID
				break
			}
			if onStack[cur] {
				for _, s := range stack {
					status[s] = LineagePending
				}
				stack = stack[:0]
				break
			}
			stack = append(stack, cur)
			onStack[cur] = true
			cur = n.PredecessorEventID
		}
		for i := len(stack) - 1; i >= 0; i-- {
			child := byID[stack[i]]
			pred, stored := byID[child.PredecessorEventID]
			if !stored {
				status[child.EventID] = LineagePending
				continue
			}
			st := Successor(*pred, status[pred.EventID], root[pred.EventID], *child)
			status[child.EventID] = st
			if st == LineageValid {
				root[child.EventID] = root[pred.EventID]
			}
		}
	}
	hasValidChild := make(map[string]bool)
	for id, st := range status {
		if st == LineageValid && byID[id].Kind != KindClaimOpen {
			hasValidChild[byID[id].PredecessorEventID] = true
		}
	}
	return buildResult(status, hasValidChild, func(id string) *LineageNode { return byID[id] }, now)
}

// buildResult derives tips, active and conflicted sets from final statuses.
func buildResult(status map[string]LineageStatus, hasValidChild map[string]bool, node func(string) *LineageNode, now time.Time) LineageResult {
	r := LineageResult{Status: status, TipsByClaim: make(map[ClaimKey][]string)}
	for id, st := range status {
		if st != LineageValid || hasValidChild[id] {
			continue
		}
		n := node(id)
		r.Tips = append(r.Tips, id)
		if n.Kind != KindClaimRelease && n.ExpiresAt.After(now) {
			r.Active = append(r.Active, id)
		}
		k := ClaimKey{n.RepositoryID, n.ClaimID}
		r.TipsByClaim[k] = append(r.TipsByClaim[k], id)
	}
	for _, tips := range r.TipsByClaim {
		slices.Sort(tips)
		if len(tips) > 1 {
			r.Conflicted = append(r.Conflicted, tips...)
		}
	}
	slices.Sort(r.Tips)
	slices.Sort(r.Active)
	slices.Sort(r.Conflicted)
	return r
}

// LineageChange is one status transition made by Lineage: From is "" when
// the event was just stored.
type LineageChange struct {
	EventID  string
	From, To LineageStatus
}

// Lineage is the incremental, arrival-ordered form of ProjectLineage: what a
// store does (spec §8), kept in memory so that store tests can compare
// against it. An arriving event is decided at once when its predecessor is
// stored and decided; otherwise it is pending and waits on its predecessor.
// When an event leaves pending (or arrives decided), the children waiting on
// it join the ready frontier, a FIFO queue; each operation resolves at most
// a budget of frontier rows (the spec's 32), and the remainder persists until
// later operations drain it. Statuses never change once decided, so every
// state is the final projection of the arrived events with some rows still
// pending; after the frontier drains, Result equals ProjectLineage of the
// arrived events, whatever the arrival order and budget.
//
// The zero Lineage is not usable; call NewLineage. It is not safe for
// concurrent use.
type Lineage struct {
	nodes         map[string]*lineageEntry
	waiting       map[string][]string // predecessor id → pending children, arrival order
	ready         []string            // pending children whose predecessor is decided
	hasValidChild map[string]bool
	arrival       []string
}

type lineageEntry struct {
	node   LineageNode
	status LineageStatus
	root   string // root identity, set when valid
}

// NewLineage returns an empty Lineage.
func NewLineage() *Lineage {
	return &Lineage{
		nodes:         make(map[string]*lineageEntry),
		waiting:       make(map[string][]string),
		hasValidChild: make(map[string]bool),
	}
}

// Add stores n as an arrival, then resolves at most budget frontier rows
// (budget ≤ 0: no limit), and returns the changes in the order made: n's
// own arrival first. Deciding n itself does not count against the budget;
// each frontier row resolved does. An event id already stored is an exact
// retry: n is ignored and only the frontier work is done.
func (l *Lineage) Add(n LineageNode, budget int) []LineageChange {
	if _, dup := l.nodes[n.EventID]; dup {
		return l.Drain(budget)
	}
	e := &lineageEntry{node: n}
	switch {
	case !n.Kind.IsClaim():
		e.status = LineageNotApplicable
	case n.Kind == KindClaimOpen:
		e.status, e.root = RootStatus(n), n.IdentityID
	default:
		e.status = LineagePending
		if pred, stored := l.nodes[n.PredecessorEventID]; stored && pred.status != LineagePending {
			l.decide(e, pred)
		} else {
			l.waiting[n.PredecessorEventID] = append(l.waiting[n.PredecessorEventID], n.EventID)
		}
	}
	l.nodes[n.EventID] = e
	l.arrival = append(l.arrival, n.EventID)
	if e.status != LineagePending {
		l.release(n.EventID)
	}
	return append([]LineageChange{{EventID: n.EventID, To: e.status}}, l.Drain(budget)...)
}

// decide sets the status of pending e from its decided predecessor pred.
func (l *Lineage) decide(e, pred *lineageEntry) {
	e.status = Successor(pred.node, pred.status, pred.root, e.node)
	if e.status == LineageValid {
		e.root = pred.root
		l.hasValidChild[pred.node.EventID] = true
	}
}

// release moves the children waiting on id to the ready frontier.
func (l *Lineage) release(id string) {
	l.ready = append(l.ready, l.waiting[id]...)
	delete(l.waiting, id)
}

// Drain resolves at most budget frontier rows (budget ≤ 0: all of them,
// including the rows their resolution makes ready) and returns the changes:
// what a claims or voice read does before reading the projection.
func (l *Lineage) Drain(budget int) []LineageChange {
	var changes []LineageChange
	for done := 0; len(l.ready) > 0 && (budget <= 0 || done < budget); done++ {
		id := l.ready[0]
		l.ready = l.ready[1:]
		e := l.nodes[id]
		l.decide(e, l.nodes[e.node.PredecessorEventID])
		changes = append(changes, LineageChange{EventID: id, From: LineagePending, To: e.status})
		l.release(id)
	}
	return changes
}

// Incomplete reports whether frontier rows remain: the persisted incomplete
// flag that makes claims and voice report projection_status "truncated".
func (l *Lineage) Incomplete() bool { return len(l.ready) > 0 }

// Frontier returns the number of ready rows not yet resolved.
func (l *Lineage) Frontier() int { return len(l.ready) }

// Status returns the current status of event id; ok is false when it has
// not arrived.
func (l *Lineage) Status(id string) (st LineageStatus, ok bool) {
	e, ok := l.nodes[id]
	if !ok {
		return "", false
	}
	return e.status, true
}

// Arrived returns the stored event ids in arrival order.
func (l *Lineage) Arrived() []string { return slices.Clone(l.arrival) }

// Result returns the projection of the current state at instant now. Rows
// still on the frontier count as pending.
func (l *Lineage) Result(now time.Time) LineageResult {
	status := make(map[string]LineageStatus, len(l.nodes))
	for id, e := range l.nodes {
		status[id] = e.status
	}
	return buildResult(status, l.hasValidChild, func(id string) *LineageNode { return &l.nodes[id].node }, now)
}

// LineageVector is one scenario of the vector file's lineage_vectors (the
// executable definition of spec §8): claim nodes named by symbols, an
// arrival order, and expectations in symbols. An expectation the vector
// omits is nil; one it gives as [] is empty and non-nil.
type LineageVector struct {
	Name    string              `json:"name"`
	Nodes   []LineageVectorNode `json:"nodes"`
	Arrival []string            `json:"arrival"`
	// Per arrival: the active tips after the first i+1 arrivals, and the
	// status of the last node of Nodes (the scenario's subject).
	ActiveAfterEachArrival        [][]string      `json:"active_after_each_arrival"`
	LineageStatusAfterEachArrival []LineageStatus `json:"lineage_status_after_each_arrival"`
	// After the last arrival. History is every stored event, any status.
	ActiveTips     []string `json:"active_tips"`
	AllTips        []string `json:"all_tips"`
	ConflictedTips []string `json:"conflicted_tips"`
	History        []string `json:"history"`
	Rule           string   `json:"rule"`
}

// LineageVectorNode is one claim event of a LineageVector. All nodes of a
// vector share one repository, claim_id and signing identity.
type LineageVectorNode struct {
	Symbol      string   `json:"symbol"`
	Kind        Kind     `json:"kind"`
	Generation  int64    `json:"generation"`
	Predecessor *string  `json:"predecessor"` // symbol; nil for claim.open
	Paths       []string `json:"paths"`
	Expires     *string  `json:"expires"` // "future", "past", or nil for claim.release
}

// ExpiresAt turns the node's symbolic expiry into an instant relative to
// now: "future" is now+1h, "past" is now-1h, null is the zero time.
func (n LineageVectorNode) ExpiresAt(now time.Time) time.Time {
	switch {
	case n.Expires == nil:
		return time.Time{}
	case *n.Expires == "future":
		return now.Add(time.Hour)
	default:
		return now.Add(-time.Hour)
	}
}

// LoadLineageVectors reads the lineage_vectors member of a vector file (the
// public agent-correspondence-0.1-vectors.json or seed 000, which carry the
// same five). Members the runner does not know are an error, so that a new
// kind of expectation cannot pass unchecked; so are symbols that do not
// resolve, an expiry other than future/past/null, and per-arrival lists
// whose length differs from the arrival list's.
func LoadLineageVectors(data []byte) ([]LineageVector, error) {
	var file struct {
		LineageVectors json.RawMessage `json:"lineage_vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("lineage vectors: %w", err)
	}
	if file.LineageVectors == nil {
		return nil, errors.New("lineage vectors: no lineage_vectors member")
	}
	dec := json.NewDecoder(bytes.NewReader(file.LineageVectors))
	dec.DisallowUnknownFields()
	var vs []LineageVector
	if err := dec.Decode(&vs); err != nil {
		return nil, fmt.Errorf("lineage vectors: %w", err)
	}
	for _, v := range vs {
		if err := v.check(); err != nil {
			return nil, fmt.Errorf("lineage vector %q: %w", v.Name, err)
		}
	}
	return vs, nil
}

func (v LineageVector) check() error {
	if len(v.Nodes) == 0 || len(v.Arrival) == 0 {
		return errors.New("no nodes or no arrivals")
	}
	syms := make(map[string]bool, len(v.Nodes))
	for _, n := range v.Nodes {
		if n.Symbol == "" || syms[n.Symbol] {
			return fmt.Errorf("empty or repeated symbol %q", n.Symbol)
		}
		syms[n.Symbol] = true
		if n.Expires != nil && *n.Expires != "future" && *n.Expires != "past" {
			return fmt.Errorf("node %q: expires %q is not future, past or null", n.Symbol, *n.Expires)
		}
	}
	for _, n := range v.Nodes {
		if n.Predecessor != nil && !syms[*n.Predecessor] {
			return fmt.Errorf("node %q: unknown predecessor %q", n.Symbol, *n.Predecessor)
		}
	}
	seen := make(map[string]bool, len(v.Arrival))
	for _, s := range v.Arrival {
		if !syms[s] || seen[s] {
			return fmt.Errorf("arrival %q unknown or repeated", s)
		}
		seen[s] = true
	}
	if v.ActiveAfterEachArrival != nil && len(v.ActiveAfterEachArrival) != len(v.Arrival) {
		return errors.New("active_after_each_arrival length differs from arrival")
	}
	if v.LineageStatusAfterEachArrival != nil && len(v.LineageStatusAfterEachArrival) != len(v.Arrival) {
		return errors.New("lineage_status_after_each_arrival length differs from arrival")
	}
	return nil
}

// The repository, claim and identity that LineageNodes gives every node.
const (
	LineageVectorRepositoryID = "lineage-vectors"
	LineageVectorClaimID      = "00000000-0000-4000-8000-00000000c1a1"
	LineageVectorIdentityID   = "00000000-0000-4000-8000-0000000001d0"
)

// LineageVectorEventID is the stand-in event id LineageNodes gives a symbol:
// "sha256:" + lowerhex(SHA-256(vector name || 0x00 || symbol)).
func LineageVectorEventID(vectorName, symbol string) string {
	sum := sha256.Sum256([]byte(vectorName + "\x00" + symbol))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// LineageNodes returns v's nodes, in the order of v.Nodes, as lineage nodes
// with stand-in event ids (LineageVectorEventID), the LineageVector*
// repository, claim and identity, and expiries relative to now.
func (v LineageVector) LineageNodes(now time.Time) []LineageNode {
	out := make([]LineageNode, len(v.Nodes))
	for i, n := range v.Nodes {
		out[i] = LineageNode{
			EventID:      LineageVectorEventID(v.Name, n.Symbol),
			RepositoryID: LineageVectorRepositoryID,
			ClaimID:      LineageVectorClaimID,
			IdentityID:   LineageVectorIdentityID,
			Kind:         n.Kind,
			Generation:   n.Generation,
			Paths:        slices.Clone(n.Paths),
			ExpiresAt:    n.ExpiresAt(now),
		}
		if n.Predecessor != nil {
			out[i].PredecessorEventID = LineageVectorEventID(v.Name, *n.Predecessor)
		}
	}
	return out
}

// LineageObservation is what a projection showed after one arrival, in a
// vector's symbols: the status of every stored event (its keys are the
// history) and the sorted active, tip and conflicted symbols.
type LineageObservation struct {
	Status     map[string]LineageStatus
	Active     []string
	Tips       []string
	Conflicted []string
}

// ObserveLineage translates r into symbols through symbolOf (event id →
// symbol); events symbolOf does not name are left out.
func ObserveLineage(r LineageResult, symbolOf map[string]string) LineageObservation {
	o := LineageObservation{Status: make(map[string]LineageStatus)}
	for id, st := range r.Status {
		if s, ok := symbolOf[id]; ok {
			o.Status[s] = st
		}
	}
	syms := func(ids []string) []string {
		out := []string{}
		for _, id := range ids {
			if s, ok := symbolOf[id]; ok {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	o.Active, o.Tips, o.Conflicted = syms(r.Active), syms(r.Tips), syms(r.Conflicted)
	return o
}

// symbolsOf maps the stand-in event ids of v back to symbols.
func (v LineageVector) symbolsOf() map[string]string {
	m := make(map[string]string, len(v.Nodes))
	for _, n := range v.Nodes {
		m[LineageVectorEventID(v.Name, n.Symbol)] = n.Symbol
	}
	return m
}

// Replay runs v against ProjectLineage at instant now: one observation per
// arrival, each the projection of the events arrived so far.
func (v LineageVector) Replay(now time.Time) []LineageObservation {
	nodes := v.LineageNodes(now)
	bySym := make(map[string]LineageNode, len(nodes))
	for i, n := range v.Nodes {
		bySym[n.Symbol] = nodes[i]
	}
	var arrived []LineageNode
	obs := make([]LineageObservation, 0, len(v.Arrival))
	for _, s := range v.Arrival {
		arrived = append(arrived, bySym[s])
		obs = append(obs, ObserveLineage(ProjectLineage(arrived, now), v.symbolsOf()))
	}
	return obs
}

// ReplayIncremental runs v through a Lineage, adding each arrival with the
// given frontier budget (≤ 0: unlimited) and observing after each. The
// per-arrival expectations assume the frontier is drained by then, which a
// budget of 32 achieves for every published vector.
func (v LineageVector) ReplayIncremental(now time.Time, budget int) []LineageObservation {
	nodes := v.LineageNodes(now)
	bySym := make(map[string]LineageNode, len(nodes))
	for i, n := range v.Nodes {
		bySym[n.Symbol] = nodes[i]
	}
	l := NewLineage()
	obs := make([]LineageObservation, 0, len(v.Arrival))
	for _, s := range v.Arrival {
		l.Add(bySym[s], budget)
		obs = append(obs, ObserveLineage(l.Result(now), v.symbolsOf()))
	}
	return obs
}

// Check compares one observation per arrival with every expectation v
// carries and returns one message per mismatch (nil when all hold). Sets
// are compared sorted, whatever order the vector lists them in.
func (v LineageVector) Check(obs []LineageObservation) []string {
	if len(obs) != len(v.Arrival) {
		return []string{fmt.Sprintf("%s: %d observations for %d arrivals", v.Name, len(obs), len(v.Arrival))}
	}
	if len(obs) == 0 {
		return nil
	}
	var bad []string
	set := func(what string, want, got []string) {
		w := slices.Sorted(slices.Values(want))
		g := slices.Sorted(slices.Values(got))
		if !slices.Equal(w, g) {
			bad = append(bad, fmt.Sprintf("%s: %s = %v, want %v", v.Name, what, g, w))
		}
	}
	for i, want := range v.ActiveAfterEachArrival {
		set(fmt.Sprintf("active after arrival %d (%s)", i+1, v.Arrival[i]), want, obs[i].Active)
	}
	target := v.Nodes[len(v.Nodes)-1].Symbol
	for i, want := range v.LineageStatusAfterEachArrival {
		if got := obs[i].Status[target]; got != want {
			bad = append(bad, fmt.Sprintf("%s: status of %s after arrival %d (%s) = %q, want %q",
				v.Name, target, i+1, v.Arrival[i], got, want))
		}
	}
	last := obs[len(obs)-1]
	if v.ActiveTips != nil {
		set("active tips", v.ActiveTips, last.Active)
	}
	if v.AllTips != nil {
		set("all tips", v.AllTips, last.Tips)
	}
	if v.ConflictedTips != nil {
		set("conflicted tips", v.ConflictedTips, last.Conflicted)
	}
	if v.History != nil {
		set("history", v.History, slices.Collect(maps.Keys(last.Status)))
	}
	return bad
}
