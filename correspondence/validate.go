package correspondence

import (
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
)

// TODO(helper): implement; signatures are the contract other packages use.

// Error codes of whole-event refusals (spec §3, §6).
const (
	CodeEventInvalid             = "event_invalid"
	CodeSignatureEncodingInvalid = "signature_encoding_invalid"
)

// Issue is one validation violation: an RFC 6901 JSON pointer into the
// event, a stable snake_case code and a fixed English message that never
// quotes the input.
type Issue struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ValidationError carries every violation found in one event. Code is
// CodeSignatureEncodingInvalid when the only problems are in the signature
// encoding, else CodeEventInvalid.
type ValidationError struct {
	Code   string
	Issues []Issue
}

func (e *ValidationError) Error() string { return e.Code }

// Validate returns every violation of spec §2–§5 and the schema in the
// parsed event v (not just the first); nil when v is a valid signed event.
func Validate(v canonicaljson.Value) []Issue { return nil }

// ParseEvent parses raw under the strict profile, validates it and returns
// the typed event. Errors: *canonicaljson.ProfileError, *ValidationError.
// It does not verify the signature or the event id.
func ParseEvent(raw []byte) (*Event, error) { return nil, nil }

// ClaimFields are the lineage members of a claim event's body.
type ClaimFields struct {
	ClaimID            string
	Generation         int64
	PredecessorEventID string // empty for claim.open
	ExpiresAt          string // empty for claim.release
}

// Claim returns the claim fields of a claim.* event; ok is false otherwise.
func (e *Event) Claim() (c ClaimFields, ok bool) { return }

// ReferencedEventIDs returns the event ids the body references
// (predecessor_event_id, target_event_id, target_event_ids).
func (e *Event) ReferencedEventIDs() []string { return nil }

// HandoffID returns body.handoff_id of a handoff event, or "".
func (e *Event) HandoffID() string { return "" }

// ValidPath reports whether p is a valid path prefix (spec §4).
func ValidPath(p string) bool { return false }

// PathsOverlap reports whether prefixes a and b overlap (spec §4).
func PathsOverlap(a, b string) bool { return false }

// ValidOpaqueID reports whether s is a valid repository_id/thread_id.
func ValidOpaqueID(s string) bool { return false }

// ValidLocator reports whether s is a valid artifact locator (spec §4).
func ValidLocator(s string) bool { return false }

// ValidUUID reports whether s is a canonical lowercase hyphenated UUID.
func ValidUUID(s string) bool { return false }

// ParseTimestamp parses an RFC3339-ms timestamp (spec §2). On failure code
// is the issue code (e.g. timestamp_requires_milliseconds).
func ParseTimestamp(s string) (t time.Time, code string) { return }

// FormatTimestamp renders t in UTC as YYYY-MM-DDTHH:mm:ss.sssZ.
func FormatTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
