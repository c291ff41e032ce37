package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
)

// ContractVersion is the only contractVersion the schema admits.
const ContractVersion = "1.0"

// State is a contract's lifecycle state (schema property "state").
type State string

// The eight states of the schema's enum.
const (
	Proposed  State = "proposed"
	Accepted  State = "accepted"
	Running   State = "running"
	Blocked   State = "blocked"
	Verifying State = "verifying"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// States lists every state in the schema's order.
var States = []State{Proposed, Accepted, Running, Blocked, Verifying, Succeeded, Failed, Cancelled}

// Contract is a handoff contract that passed Validate. Field names and
// JSON names are the schema's. Strings are kept exactly as given (createdAt
// is not reformatted). Marshalled with encoding/json or Canonical, the
// contract is in normalized form: attempt is always present (0 when the
// input omitted it), and empty optional members (inputs, result members,
// input digest, verificationCommand) are left out.
type Contract struct {
	ContractVersion string       `json:"contractVersion"`
	HandoffID       string       `json:"handoffId"`
	IdempotencyKey  string       `json:"idempotencyKey"`
	CreatedAt       string       `json:"createdAt"`
	Issuer          Party        `json:"issuer"`
	Assignee        Party        `json:"assignee"`
	Objective       string       `json:"objective"`
	Scope           Scope        `json:"scope"`
	Inputs          []Input      `json:"inputs,omitempty"`
	Constraints     []string     `json:"constraints"`
	Acceptance      []Acceptance `json:"acceptance"`
	Permissions     Permissions  `json:"permissions"`
	Budget          Budget       `json:"budget"`
	Escalation      Escalation   `json:"escalation"`
	State           State        `json:"state"`
	Attempt         int          `json:"attempt"`
	Result          *Result      `json:"result,omitempty"`
}

// Party is an issuer or assignee.
type Party struct {
	ID   string `json:"id"`
	Role string `json:"role"`
}

// Scope lists what the work includes and excludes.
type Scope struct {
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
}

// Input is one input artifact; Digest, when present, is sha256:<64 hex>.
type Input struct {
	Name   string `json:"name"`
	URI    string `json:"uri"`
	Digest string `json:"digest,omitempty"`
}

// Acceptance is one acceptance criterion; ID matches ^[A-Z][A-Z0-9_-]{1,31}$.
type Acceptance struct {
	ID                  string `json:"id"`
	Assertion           string `json:"assertion"`
	VerificationCommand string `json:"verificationCommand,omitempty"`
	EvidenceRequired    bool   `json:"evidenceRequired"`
}

// Permissions are declared, never granted, by the relay.
type Permissions struct {
	Read    []string `json:"read"`
	Write   []string `json:"write"`
	Network []string `json:"network"`
	Secrets []string `json:"secrets"`
}

// Budget bounds the work: WallClockSeconds (≥ 1) from createdAt, and
// MaxAttempts (1–20) runs.
type Budget struct {
	WallClockSeconds int64 `json:"wallClockSeconds"`
	MaxAttempts      int   `json:"maxAttempts"`
}

// Escalation names the conditions and route for escalating.
type Escalation struct {
	On    []string `json:"on"`
	Route string   `json:"route"`
}

// Result is what the assignee reports; EvidenceURIs must be non-empty to
// succeed when any acceptance criterion requires evidence.
type Result struct {
	Summary          string   `json:"summary,omitempty"`
	ChangedArtifacts []string `json:"changedArtifacts,omitempty"`
	EvidenceURIs     []string `json:"evidenceUris,omitempty"`
	UnresolvedRisks  []string `json:"unresolvedRisks,omitempty"`
}

// normalized returns c with nil required lists made empty, so that they
// marshal as [] rather than null.
func (c Contract) normalized() Contract {
	for _, l := range []*[]string{&c.Scope.Include, &c.Scope.Exclude, &c.Constraints,
		&c.Permissions.Read, &c.Permissions.Write, &c.Permissions.Network, &c.Permissions.Secrets, &c.Escalation.On} {
		if *l == nil {
			*l = []string{}
		}
	}
	if c.Acceptance == nil {
		c.Acceptance = []Acceptance{}
	}
	return c
}

// MarshalJSON writes the normalized form (see Contract).
func (c Contract) MarshalJSON() ([]byte, error) {
	type plain Contract // no methods, so no recursion
	return json.Marshal(plain(c.normalized()))
}

// Canonical returns the RFC 8785 bytes of the contract's normalized form:
// the bytes to compare for idempotent replays and to store. Errors are
// *canonicaljson.ProfileError for a hand-built contract holding something
// outside the strict profile (U+0000 in a string, for example).
func (c Contract) Canonical() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("marshal contract: %w", err)
	}
	return canonicaljson.CanonicalizeBytes(b)
}

// termFields are the members that never change after creation (spec
// "Lifecycle": everything but state, attempt and result).
var termFields = []string{
	"contractVersion", "handoffId", "idempotencyKey", "createdAt", "issuer", "assignee",
	"objective", "scope", "inputs", "constraints", "acceptance", "permissions", "budget", "escalation",
}

// ChangedTerms returns the JSON names of the contract terms in which next
// differs from prev, in schema order; an empty result means the two
// versions differ at most in state, attempt and result, as a new version of
// the same contract must.
func ChangedTerms(prev, next Contract) []string {
	a, b := termMap(prev), termMap(next)
	var changed []string
	for _, name := range termFields {
		if string(a[name]) != string(b[name]) {
			changed = append(changed, name)
		}
	}
	return changed
}

func termMap(c Contract) map[string]json.RawMessage {
	// Marshalling a struct of strings, ints, bools and slices cannot fail,
	// and encoding/json writes struct fields in declaration order, so the
	// per-member bytes compare exactly.
	b, _ := json.Marshal(c)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return m
}

// ErrCreatedAt is returned by Deadline for a createdAt that is not an
// RFC 3339 date-time; Validate never admits such a contract.
var ErrCreatedAt = errors.New("createdAt is not an RFC 3339 date-time")

// Deadline is createdAt + budget.wallClockSeconds (spec "Lifecycle"). A
// leap second (…:60) is read as the first instant of the next minute.
func (c Contract) Deadline() (time.Time, error) {
	created, err := parseDateTime(c.CreatedAt)
	if err != nil {
		return time.Time{}, err
	}
	// Adding seconds to the Unix time avoids time.Duration's ±292-year
	// limit: wallClockSeconds may be as large as 2^53-1.
	return time.Unix(created.Unix()+c.Budget.WallClockSeconds, int64(created.Nanosecond())).UTC(), nil
}

// Overdue reports whether now is past the deadline (reads report
// overdue: true; nothing changes state by itself). It is false when the
// deadline cannot be computed, which Validate rules out. Terminal contracts
// are not exempted: the spec ties overdue to the clock alone.
func (c Contract) Overdue(now time.Time) bool {
	d, err := c.Deadline()
	return err == nil && now.After(d)
}

// parseDateTime reads RFC 3339 as the schema's date-time format admits it:
// t/z in either case and a leap second.
func parseDateTime(s string) (time.Time, error) {
	s = strings.ToUpper(s)
	leap := len(s) > 19 && s[17:19] == "60"
	if leap {
		s = s[:17] + "59" + s[19:]
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, ErrCreatedAt
	}
	if leap {
		t = t.Add(time.Second)
	}
	return t, nil
}

// ValidHandoffID reports whether s is a canonical lowercase hyphenated
// UUID, the only form a handoffId takes in a URL (spec "Validation": any
// other is handoff_id_invalid). The schema's uuid format alone also admits
// uppercase hex.
func ValidHandoffID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
