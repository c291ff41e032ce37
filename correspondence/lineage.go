package correspondence

import "time"

// TODO(helper): implement.

// LineageStatus is a record's claim-lineage status (spec §8).
type LineageStatus string

// The lineage statuses of spec §8.
const (
	LineageNotApplicable LineageStatus = "not_applicable"
	LineagePending       LineageStatus = "pending"
	LineageValid         LineageStatus = "valid"
	LineageInvalid       LineageStatus = "invalid"
)

// LineageNode is what the lineage rules need of one claim event.
type LineageNode struct {
	EventID            string
	RepositoryID       string
	ClaimID            string
	IdentityID         string // the sender's identity
	Kind               Kind
	Generation         int64
	PredecessorEventID string    // "" for claim.open
	Paths              []string  // scope.paths
	ExpiresAt          time.Time // zero for claim.release
	ThreadID           string
}

// NodeOf returns the lineage node of a claim event; ok is false for other kinds.
func NodeOf(e *Event) (n LineageNode, ok bool) { return }

// Successor decides a renew/release child's status once its predecessor
// pred is stored and is not pending (spec §8): LineageValid when pred is
// valid and is generation n-1 of the same repository, claim and root
// identity with the same set of paths; LineageInvalid otherwise.
// predRootIdentity is the identity of pred's lineage root.
func Successor(pred LineageNode, predStatus LineageStatus, predRootIdentity string, child LineageNode) LineageStatus {
	return LineageInvalid
}

// LineageResult is the projection of a set of claim events at one instant.
type LineageResult struct {
	Status     map[string]LineageStatus // by event id
	Tips       []string                 // valid events with no valid direct child, sorted
	Active     []string                 // tips that are open/renew with ExpiresAt > now, sorted
	Conflicted []string                 // tips of a (repository, claim) with more than one tip, sorted
}

// ProjectLineage computes the claim-lineage projection (spec §8) of nodes
// at instant now. The result does not depend on the order of nodes.
func ProjectLineage(nodes []LineageNode, now time.Time) LineageResult { return LineageResult{} }
