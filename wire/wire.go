package wire

import (
	"github.com/go-json-experiment/json/jsontext"
)

// Receipt is the relay's unsigned receipt of an event (spec §7):
// received_seq a decimal string (strictly increasing per project),
// received_at RFC 3339 with milliseconds, UTC, the database clock.
type Receipt struct {
	ReceivedSeq string `json:"received_seq"`
	ReceivedAt  string `json:"received_at"`
}

// Record is one stored event as served (spec §9): {event, receipt,
// missing_parents, lineage_status}. Event is the RFC 8785 bytes of the
// signed event as stored; it is left out only when nil, which the relay
// never serves (MarshalAppend relies on it). MissingParents is [] when
// none.
type Record struct {
	Event          jsontext.Value `json:"event,omitzero"`
	Receipt        Receipt        `json:"receipt"`
	MissingParents []string       `json:"missing_parents"`
	LineageStatus  string         `json:"lineage_status"`
}

// Warning is one warning of the append answer (spec §9): code
// "session_fork" or "claim_lineage_pending", a detail, and the event ids
// or paths concerned (left out when empty).
type Warning struct {
	Code     string   `json:"code"`
	Detail   string   `json:"detail"`
	EventIDs []string `json:"event_ids,omitempty"`
	Paths    []string `json:"paths,omitempty"`
}

// MaxWarnings bounds the warnings of one append answer (spec §9).
const MaxWarnings = 16

// AppendAnswer is the body of a POST of an event (spec §9): the stored
// record (the original receipt for an exact retry) and at most MaxWarnings
// warnings ([] when none). The status, 201 or 200, says whether this POST
// stored it.
type AppendAnswer struct {
	Record
	Warnings []Warning `json:"warnings"`
}

// MarshalAppend returns the bytes of a: {"event": a.Event exactly as
// given, then the other members}. The event is written as stored, not
// re-encoded or re-validated: it is valid JSON by construction, and
// re-validating ~1 KB on every append cost more than the rest of the
// answer. The other members are written directly, in the order and with
// the escaping json.Marshal gives AppendAnswer (strings with RFC 8785's
// minimal escapes, nil slices as [], empty event_ids and paths left out):
// the answer of every append is built in one allocation, without
// reflection (TestMarshalAppendMatchesJSON, FuzzMarshalAppend). Error:
// a string that is not UTF-8.
func MarshalAppend(a AppendAnswer) ([]byte, error) {
	n := len(`{"event":,"receipt":{"received_seq":"","received_at":""},"missing_parents":[],"lineage_status":"","warnings":[]}`) +
		len(a.Event) + len(a.Receipt.ReceivedSeq) + len(a.Receipt.ReceivedAt) + len(a.LineageStatus) + 8
	for _, p := range a.MissingParents {
		n += len(p) + 3
	}
	for _, w := range a.Warnings {
		n += len(w.Code) + len(w.Detail) + 64
		for _, id := range w.EventIDs {
			n += len(id) + 3
		}
		for _, p := range w.Paths {
			n += len(p) + 3
		}
	}
	b := make([]byte, 0, n)
	b = append(b, `{"event":`...)
	b = append(b, a.Event...)
	b = append(b, `,"receipt":{"received_seq":`...)
	var err error
	if b, err = jsontext.AppendQuote(b, a.Receipt.ReceivedSeq); err != nil {
		return nil, err
	}
	b = append(b, `,"received_at":`...)
	if b, err = jsontext.AppendQuote(b, a.Receipt.ReceivedAt); err != nil {
		return nil, err
	}
	b = append(b, `},"missing_parents":`...)
	if b, err = appendStrings(b, a.MissingParents); err != nil {
		return nil, err
	}
	b = append(b, `,"lineage_status":`...)
	if b, err = jsontext.AppendQuote(b, a.LineageStatus); err != nil {
		return nil, err
	}
	b = append(b, `,"warnings":[`...)
	for i, w := range a.Warnings {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"code":`...)
		if b, err = jsontext.AppendQuote(b, w.Code); err != nil {
			return nil, err
		}
		b = append(b, `,"detail":`...)
		if b, err = jsontext.AppendQuote(b, w.Detail); err != nil {
			return nil, err
		}
		if len(w.EventIDs) > 0 {
			b = append(b, `,"event_ids":`...)
			if b, err = appendStrings(b, w.EventIDs); err != nil {
				return nil, err
			}
		}
		if len(w.Paths) > 0 {
			b = append(b, `,"paths":`...)
			if b, err = appendStrings(b, w.Paths); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// appendStrings appends ss as a JSON array of strings ([] when empty).
func appendStrings(b []byte, ss []string) ([]byte, error) {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = jsontext.AppendQuote(b, s); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// Page is the paging member of an events answer (spec §9): after echoes
// the request's cursor (null when absent); next_after is the cursor of the
// next page (the last record's received_seq, else after).
type Page struct {
	After     *string `json:"after"`
	NextAfter *string `json:"next_after"`
	HasMore   bool    `json:"has_more"`
}

// Events is the JSON body of GET /v1/correspondence/events (spec §9).
type Events struct {
	Protocol string   `json:"protocol"`
	Scope    string   `json:"scope"`
	Events   []Record `json:"events"`
	Page     Page     `json:"page"`
}

// Values of projection_status (spec §9).
const (
	ProjectionComplete    = "complete"
	ProjectionTruncated   = "truncated"
	ProjectionUnavailable = "unavailable"
)

// ClaimScope is a claim event's scope object as JSON (spec §3): the
// decoded form of ActiveClaim's scope that the client SDK reads.
type ClaimScope struct {
	BaseRevision *string  `json:"base_revision"`
	Branch       *string  `json:"branch"`
	Paths        []string `json:"paths"`
}

// ActiveClaim is one active row of the claims projection (spec §8).
// Scope is the claim event's scope object {base_revision, branch, paths}:
// the relay writes the RFC 8785 bytes as signed (S = jsontext.Value), the
// client decodes it (S = ClaimScope). ExpiresAt is RFC 3339 with
// milliseconds; CompetingEventIDs ([] when none) are the other tips of the
// claim, and Conflicted says there are any.
type ActiveClaim[S any] struct {
	ClaimID           string   `json:"claim_id"`
	Generation        int64    `json:"generation"`
	EventID           string   `json:"event_id"`
	OwnerIdentityID   string   `json:"owner_identity_id"`
	DeviceID          string   `json:"device_id"`
	SessionID         string   `json:"session_id"`
	ThreadID          string   `json:"thread_id"`
	Scope             S        `json:"scope"`
	ExpiresAt         string   `json:"expires_at"`
	Conflicted        bool     `json:"conflicted"`
	CompetingEventIDs []string `json:"competing_event_ids"`
}

// Claims is the body of GET /v1/correspondence/claims (spec §8, §9), S as
// for ActiveClaim. EvaluatedAt is RFC 3339 with milliseconds; Cursor the
// project's newest received_seq (null for an empty stream);
// ProjectionStatus one of Projection*.
type Claims[S any] struct {
	Protocol         string           `json:"protocol"`
	Scope            string           `json:"scope"`
	EvaluatedAt      string           `json:"evaluated_at"`
	Cursor           *string          `json:"cursor"`
	ProjectionStatus string           `json:"projection_status"`
	Truncated        bool             `json:"truncated"`
	Claims           []ActiveClaim[S] `json:"claims"`
}

// MissingParents names an event whose parents are not yet stored.
type MissingParents struct {
	EventID          string   `json:"event_id"`
	MissingParentIDs []string `json:"missing_parent_ids"`
}

// SessionFork is two or more events sharing one (identity, device,
// session, session_seq) (spec §7); EventIDs sorted.
type SessionFork struct {
	IdentityID string   `json:"identity_id"`
	DeviceID   string   `json:"device_id"`
	SessionID  string   `json:"session_id"`
	SessionSeq int64    `json:"session_seq"`
	EventIDs   []string `json:"event_ids"`
}

// Overlap is a pair of active claims whose paths overlap, left_event_id <
// right_event_id, with the shorter prefix of each overlapping pair of
// paths (spec §4, §9).
type Overlap struct {
	LeftEventID  string   `json:"left_event_id"`
	RightEventID string   `json:"right_event_id"`
	Paths        []string `json:"paths"`
}

// Conflicts are the conflict lists of the voice snapshot ([] when empty).
type Conflicts struct {
	MissingParents    []MissingParents `json:"missing_parents"`
	SessionForks      []SessionFork    `json:"session_forks"`
	OverlappingClaims []Overlap        `json:"overlapping_claims"`
}

// Voice is the body of GET /v1/correspondence/voice (spec §9): the newest
// records newest first, the active claims (S as for ActiveClaim) and the
// conflicts.
type Voice[S any] struct {
	Protocol         string           `json:"protocol"`
	Scope            string           `json:"scope"`
	EvaluatedAt      string           `json:"evaluated_at"`
	Cursor           *string          `json:"cursor"`
	ProjectionStatus string           `json:"projection_status"`
	Truncated        bool             `json:"truncated"`
	RecentEvents     []Record         `json:"recent_events"`
	ActiveClaims     []ActiveClaim[S] `json:"active_claims"`
	Conflicts        Conflicts        `json:"conflicts"`
}

// Error is the body of every error answer (spec §9): {"error": a stable
// code (Code*), "message": fixed English text that never quotes input,
// "hint"?, "issues"?}. Issues, when present, is a non-empty JSON array of
// objects with "pointer" and "message" and, for an event's violations,
// "code" (the shapes of correspondence.Issue and handoff.Issue); it is
// left out when nil.
type Error struct {
	Error   string         `json:"error"`
	Message string         `json:"message"`
	Hint    string         `json:"hint,omitempty"`
	Issues  jsontext.Value `json:"issues,omitzero"`
}
