package handoff_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/handoff"
)

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// variant returns testdata/valid.json with old replaced by new exactly once.
func variant(t *testing.T, old, new string) []byte {
	t.Helper()
	s := string(readFile(t, "testdata/valid.json"))
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q occurs %d times in valid.json", old, strings.Count(s, old))
	}
	return []byte(strings.Replace(s, old, new, 1))
}

func TestEmbeddedSchemaIsTheSeed(t *testing.T) {
	seed := readFile(t, "../conformance/testdata/seeds/003_6b25a20b26b0cd55.txt")
	if !bytes.Equal(seed, handoff.SchemaJSON) {
		t.Fatal("contract.schema.json differs from seed 003")
	}
}

func TestValidateValid(t *testing.T) {
	c, issues, err := handoff.Validate(readFile(t, "testdata/valid.json"))
	if err != nil || issues != nil {
		t.Fatalf("valid contract: %v %v", issues, err)
	}
	want := handoff.Contract{
		ContractVersion: "1.0",
		HandoffID:       "7c9e6679-7425-40de-944b-e07fc1f90ae7",
		IdempotencyKey:  "renew-datadog-2026-07",
		CreatedAt:       "2026-07-27T10:00:00Z",
		Issuer:          handoff.Party{ID: "agent-planner", Role: "planner"},
		Assignee:        handoff.Party{ID: "agent-billing", Role: "executor"},
		Objective:       "Renew the Datadog billing contract at or below 1200.00 USD.",
		Scope:           handoff.Scope{Include: []string{"billing/datadog"}, Exclude: []string{"billing/other-vendors"}},
		Inputs: []handoff.Input{
			{Name: "quote", URI: "https://example.org/quotes/42", Digest: "sha256:098304e939a91d114bfabefac667045cf512f2367b3c95b0912168ef75717ddc"},
			{Name: "policy", URI: "https://example.org/policy"},
		},
		Constraints: []string{"amount <= 1200.00 USD", "no multi-year term"},
		Acceptance: []handoff.Acceptance{
			{ID: "AC-1", Assertion: "renewal confirmed by vendor", VerificationCommand: "check-renewal datadog", EvidenceRequired: true},
			{ID: "AC_2", Assertion: "no other contract touched"},
		},
		Permissions: handoff.Permissions{Read: []string{"billing/*"}, Write: []string{"billing/datadog"}, Network: []string{"api.datadoghq.com"}, Secrets: []string{}},
		Budget:      handoff.Budget{WallClockSeconds: 3600, MaxAttempts: 3},
		Escalation:  handoff.Escalation{On: []string{"amount_exceeded", "vendor_unreachable"}, Route: "human:finance-oncall"},
		State:       handoff.Proposed,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", c, want)
	}
}

func TestCanonicalNormalizedForm(t *testing.T) {
	c, issues, err := handoff.Validate(readFile(t, "testdata/minimal.json"))
	if err != nil || issues != nil {
		t.Fatalf("minimal contract: %v %v", issues, err)
	}
	got, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	// attempt appears (0), inputs and result stay absent, createdAt is kept
	// as written, members are in RFC 8785 order.
	const want = `{"acceptance":[{"assertion":"x","evidenceRequired":false,"id":"AC"}],"assignee":{"id":"b","role":"r"},` +
		`"attempt":0,"budget":{"maxAttempts":1,"wallClockSeconds":1},"constraints":[],"contractVersion":"1.0",` +
		`"createdAt":"2026-07-27T10:00:00.5+02:00","escalation":{"on":[],"route":"r"},` +
		`"handoffId":"00000000-0000-0000-0000-000000000000","idempotencyKey":"12345678","issuer":{"id":"a","role":"r"},` +
		`"objective":"o","permissions":{"network":[],"read":[],"secrets":[],"write":[]},` +
		`"scope":{"exclude":[],"include":[]},"state":"running"}`
	if string(got) != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	again, issues, err := handoff.Validate(got)
	if err != nil || issues != nil || !reflect.DeepEqual(again, c) {
		t.Fatalf("canonical form does not round-trip: %v %v", issues, err)
	}
	// A hand-built contract with nil lists still marshals [] and validates.
	c.Constraints, c.Scope.Include, c.Permissions.Secrets = nil, nil, nil
	if issues, err := handoff.Check(c); err != nil || issues != nil {
		t.Fatalf("Check with nil lists: %v %v", issues, err)
	}
}

func TestValidateIssues(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		issues   []string
	}{
		{"handoffId not a UUID (format assertion)", `"7c9e6679-7425-40de-944b-e07fc1f90ae7"`, `"not-a-uuid"`,
			[]string{"/handoffId: 'not-a-uuid' is not valid uuid: must have 5 elements"}},
		{"handoffId with a non-hex digit", `"7c9e6679-7425-40de-944b-e07fc1f90ae7"`, `"7c9e6679-7425-40de-944b-e07fc1f90aeg"`,
			[]string{"/handoffId: '7c9e6679-7425-40de-944b-e07fc1f90aeg' is not valid uuid: non-hex character 'g'"}},
		{"createdAt month 13 (format assertion)", `"2026-07-27T10:00:00Z"`, `"2026-13-01T00:00:00Z"`,
			[]string{`/createdAt: '2026-13-01T00:00:00Z' is not valid date-time: invalid date element: parsing time "2026-13-01": month out of range`}},
		{"createdAt not a date", `"2026-07-27T10:00:00Z"`, `"yesterday"`,
			[]string{"/createdAt: 'yesterday' is not valid date-time: less than 20 characters long"}},
		{"createdAt without offset", `"2026-07-27T10:00:00Z"`, `"2026-07-27T10:00:00.000"`,
			[]string{"/createdAt: '2026-07-27T10:00:00.000' is not valid date-time: invalid time element: offset must be 6 characters long"}},
		{"contractVersion 2.0", `"contractVersion": "1.0"`, `"contractVersion": "2.0"`,
			[]string{"/contractVersion: value must be '1.0'"}},
		{"missing contractVersion", `"contractVersion": "1.0",`, ``,
			[]string{": missing property 'contractVersion'"}},
		{"unknown state and extra member", `"state": "proposed"`, `"state": "done", "extra": 1`,
			[]string{": additional properties 'extra' not allowed",
				"/state: value must be one of 'proposed', 'accepted', 'running', 'blocked', 'verifying', 'succeeded', 'failed', 'cancelled'"}},
		{"negative attempt", `"attempt": 0`, `"attempt": -1`,
			[]string{"/attempt: minimum: got -1, want 0"}},
		{"maxAttempts 21", `"maxAttempts": 3`, `"maxAttempts": 21`,
			[]string{"/budget/maxAttempts: maximum: got 21, want 20"}},
		{"maxAttempts as a string", `"maxAttempts": 3`, `"maxAttempts": "3"`,
			[]string{"/budget/maxAttempts: got string, want integer"}},
		{"wallClockSeconds 0", `"wallClockSeconds": 3600`, `"wallClockSeconds": 0`,
			[]string{"/budget/wallClockSeconds: minimum: got 0, want 1"}},
		{"lowercase acceptance id", `"id": "AC-1"`, `"id": "ac-1"`,
			[]string{"/acceptance/0/id: 'ac-1' does not match pattern '^[A-Z][A-Z0-9_-]{1,31}$'"}},
		{"repeated secret", `"secrets": []`, `"secrets": ["a", "a"]`,
			[]string{"/permissions/secrets: items at 0 and 1 are equal"}},
		{"uppercase digest", `"sha256:098304e9`, `"sha256:098304E9`,
			[]string{"/inputs/0/digest: 'sha256:098304E939a91d114bfabefac667045cf512f2367b3c95b0912168ef75717ddc' does not match pattern '^sha256:[a-f0-9]{64}$'"}},
		{"short idempotencyKey", `"idempotencyKey": "renew-datadog-2026-07"`, `"idempotencyKey": "k"`,
			[]string{"/idempotencyKey: minLength: got 1, want 8"}},
		{"empty acceptance", `"acceptance": [`, `"acceptance": [], "x": [`,
			[]string{": additional properties 'x' not allowed", "/acceptance: minItems: got 0, want 1"}},
		{"result member unknown", `"attempt": 0`, `"attempt": 0, "result": {"summary": "s", "evidence": []}`,
			[]string{"/result: additional properties 'evidence' not allowed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, issues, err := handoff.Validate(variant(t, tc.old, tc.new))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range issues {
				got = append(got, i.String())
			}
			if !reflect.DeepEqual(got, tc.issues) {
				t.Fatalf("issues\n got %q\nwant %q", got, tc.issues)
			}
			if !reflect.DeepEqual(c, handoff.Contract{}) {
				t.Fatal("an invalid contract was returned")
			}
		})
	}
}

func reasonOf(err error) string {
	var pe *canonicaljson.ProfileError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "-"
}

// TestStrictProfileFirst: documents outside the profile are refused with the
// profile's reason and never reach the schema, even when they are also
// schema-invalid.
func TestStrictProfileFirst(t *testing.T) {
	tests := []struct {
		name, old, new, reason string
	}{
		{"duplicate member", `"state": "proposed"`, `"state": "proposed", "state": "running"`, canonicaljson.ReasonDuplicateObjectName},
		{"duplicate member in a nested object", `"role": "planner"`, `"role": "planner", "id": "x"`, canonicaljson.ReasonDuplicateObjectName},
		{"duplicate of an unknown member", `"state": "proposed"`, `"state": "proposed", "x": 1, "x": 1`, canonicaljson.ReasonDuplicateObjectName},
		{"fractional wallClockSeconds", `"wallClockSeconds": 3600`, `"wallClockSeconds": 3600.0`, canonicaljson.ReasonFractionalNumber},
		{"exponent attempt", `"attempt": 0`, `"attempt": 1e0`, canonicaljson.ReasonFractionalNumber},
		{"unsafe integer", `"wallClockSeconds": 3600`, `"wallClockSeconds": 9007199254740992`, canonicaljson.ReasonUnsafeInteger},
		{"NUL in a string", `"objective": "Renew`, `"objective": "\u0000Renew`, canonicaljson.ReasonNULNotAdmitted},
		{"lone surrogate", `"objective": "Renew`, `"objective": "\ud800Renew`, canonicaljson.ReasonNonScalarUnicode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, issues, err := handoff.Validate(variant(t, tc.old, tc.new))
			if got := reasonOf(err); got != tc.reason || issues != nil {
				t.Fatalf("reason %s issues %v, want %s", got, issues, tc.reason)
			}
		})
	}
	for _, doc := range []string{`[]`, `"contract"`, ``, `{"contractVersion":"1.0"} {}`} {
		if _, _, err := handoff.Validate([]byte(doc)); reasonOf(err) != canonicaljson.ReasonInvalidJSON {
			t.Fatalf("%q: %v, want invalid_json", doc, err)
		}
	}
}

func TestValidHandoffID(t *testing.T) {
	for s, want := range map[string]bool{
		"7c9e6679-7425-40de-944b-e07fc1f90ae7":   true,
		"00000000-0000-0000-0000-000000000000":   true,
		"7C9E6679-7425-40DE-944B-E07FC1F90AE7":   false,
		"7c9e6679742540de944be07fc1f90ae7":       false,
		"{7c9e6679-7425-40de-944b-e07fc1f90ae7}": false,
		"7c9e6679-7425-40de-944b-e07fc1f90ae":    false,
		"":                                       false,
	} {
		if got := handoff.ValidHandoffID(s); got != want {
			t.Errorf("ValidHandoffID(%q) = %v", s, got)
		}
	}
}
