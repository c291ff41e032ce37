package handoff_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/handoff"
)

func validContract(t *testing.T) handoff.Contract {
	t.Helper()
	c, issues, err := handoff.Validate(readFile(t, "testdata/valid.json"))
	if err != nil || issues != nil {
		t.Fatalf("valid.json: %v %v", issues, err)
	}
	return c
}

var evidence = &handoff.Result{Summary: "renewed", EvidenceURIs: []string{"https://example.org/receipts/1"}}

// allowed is the spec's diagram written out by hand (not derived from the
// package's table), for a contract with attempts left.
var allowed = map[handoff.State][]handoff.State{
	handoff.Proposed:  {handoff.Accepted, handoff.Cancelled},
	handoff.Accepted:  {handoff.Running, handoff.Cancelled},
	handoff.Running:   {handoff.Blocked, handoff.Verifying, handoff.Failed, handoff.Cancelled},
	handoff.Blocked:   {handoff.Running, handoff.Failed, handoff.Cancelled},
	handoff.Verifying: {handoff.Succeeded, handoff.Failed, handoff.Cancelled},
	handoff.Failed:    {handoff.Running, handoff.Cancelled},
	handoff.Succeeded: {},
	handoff.Cancelled: {},
}

func TestTransitionTable(t *testing.T) {
	base := validContract(t)
	base.Attempt = 1 // budget 3: failed is not terminal
	for _, from := range handoff.States {
		for _, to := range handoff.States {
			want := false
			for _, s := range allowed[from] {
				want = want || s == to
			}
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				c := base
				c.State = from
				next, err := handoff.Transition(c, string(to), evidence)
				if !want {
					var te *handoff.TransitionError
					if !errors.As(err, &te) || te.Code != handoff.CodeTransitionNotAllowed || te.From != from || !errors.Is(err, handoff.ErrTransitionNotAllowed) {
						t.Fatalf("err %v, want transition_not_allowed from %s", err, from)
					}
					wantMsg := fmt.Sprintf("transition_not_allowed: the contract is %s and cannot move to %s", from, to)
					if err.Error() != wantMsg {
						t.Fatalf("message %q, want %q", err, wantMsg)
					}
					if !reflect.DeepEqual(next, c) {
						t.Fatal("a refused move changed the contract")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if next.State != to {
					t.Fatalf("state %s, want %s", next.State, to)
				}
				wantAttempt := 1
				if from == handoff.Failed && to == handoff.Running {
					wantAttempt = 2
				}
				if next.Attempt != wantAttempt {
					t.Fatalf("attempt %d, want %d", next.Attempt, wantAttempt)
				}
				if changed := handoff.ChangedTerms(c, next); changed != nil {
					t.Fatalf("terms changed: %v", changed)
				}
			})
		}
	}
}

func TestNextAndTerminal(t *testing.T) {
	c := validContract(t)
	tests := []struct {
		state    handoff.State
		attempt  int
		next     []handoff.State
		terminal bool
	}{
		{handoff.Proposed, 0, []handoff.State{handoff.Accepted, handoff.Cancelled}, false},
		{handoff.Running, 1, []handoff.State{handoff.Blocked, handoff.Verifying, handoff.Failed, handoff.Cancelled}, false},
		{handoff.Failed, 2, []handoff.State{handoff.Running, handoff.Cancelled}, false},
		{handoff.Failed, 3, nil, true},
		{handoff.Failed, 4, nil, true},
		{handoff.Succeeded, 1, nil, true},
		{handoff.Cancelled, 0, nil, true},
		{handoff.State("done"), 0, nil, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s attempt %d", tc.state, tc.attempt), func(t *testing.T) {
			c.State, c.Attempt = tc.state, tc.attempt
			if got := c.Next(); !reflect.DeepEqual(got, tc.next) {
				t.Fatalf("Next = %v, want %v", got, tc.next)
			}
			if got := c.Terminal(); got != tc.terminal {
				t.Fatalf("Terminal = %v", got)
			}
		})
	}
}

// TestRetriesUpToMaxAttempts walks a contract with budget.maxAttempts 3
// through every attempt and checks that the fourth run is refused and that
// failed is then terminal.
func TestRetriesUpToMaxAttempts(t *testing.T) {
	c := validContract(t)
	step := func(to handoff.State, wantAttempt int) {
		t.Helper()
		next, err := handoff.Transition(c, string(to), nil)
		if err != nil {
			t.Fatalf("%s to %s: %v", c.State, to, err)
		}
		if next.Attempt != wantAttempt {
			t.Fatalf("%s to %s: attempt %d, want %d", c.State, to, next.Attempt, wantAttempt)
		}
		c = next
	}
	step(handoff.Accepted, 0)
	step(handoff.Running, 1)
	step(handoff.Blocked, 1)
	step(handoff.Running, 1) // unblocking is not a new attempt
	step(handoff.Failed, 1)
	step(handoff.Running, 2)
	step(handoff.Verifying, 2)
	step(handoff.Failed, 2)
	step(handoff.Running, 3)
	step(handoff.Failed, 3)
	if !c.Terminal() {
		t.Fatal("failed at attempt 3 of 3 is not terminal")
	}
	for _, to := range handoff.States {
		_, err := handoff.Transition(c, string(to), evidence)
		if !errors.Is(err, handoff.ErrTransitionNotAllowed) {
			t.Fatalf("failed (3 of 3) to %s: %v, want transition_not_allowed", to, err)
		}
	}
	_, err := handoff.Transition(c, "running", nil)
	if err == nil || err.Error() != "transition_not_allowed: the contract is failed and cannot move to running" {
		t.Fatalf("retry beyond budget: %v", err)
	}
}

func TestMaxAttemptsOne(t *testing.T) {
	c := validContract(t)
	c.Budget.MaxAttempts = 1
	c.State = handoff.Accepted
	c, err := handoff.Transition(c, "running", nil)
	if err != nil || c.Attempt != 1 {
		t.Fatalf("first run: %v attempt %d", err, c.Attempt)
	}
	c, err = handoff.Transition(c, "failed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handoff.Transition(c, "running", nil); !errors.Is(err, handoff.ErrTransitionNotAllowed) {
		t.Fatalf("retry with maxAttempts 1: %v", err)
	}
}

func TestSucceedNeedsResultAndEvidence(t *testing.T) {
	c := validContract(t) // AC-1 requires evidence
	c.State, c.Attempt = handoff.Verifying, 1

	_, err := handoff.Transition(c, "succeeded", nil)
	var te *handoff.TransitionError
	if !errors.As(err, &te) || te.Code != handoff.CodeResultRequired || !errors.Is(err, handoff.ErrResultRequired) {
		t.Fatalf("no result: %v, want result_required", err)
	}
	if err.Error() != "result_required: moving from verifying to succeeded needs a result" {
		t.Fatalf("message %q", err)
	}
	_, err = handoff.Transition(c, "succeeded", &handoff.Result{Summary: "done"})
	if !errors.As(err, &te) || te.Code != handoff.CodeEvidenceRequired || !errors.Is(err, handoff.ErrEvidenceRequired) {
		t.Fatalf("no evidence: %v, want evidence_required", err)
	}
	// A result the contract already holds counts: succeeded needs the
	// contract's result, whichever move brought it.
	c.Result = evidence
	if held, err := handoff.Transition(c, "succeeded", nil); err != nil || held.State != handoff.Succeeded || held.Result == nil {
		t.Fatalf("stored result with evidence: %v, want succeeded", err)
	}
	c.Result = &handoff.Result{Summary: "held, no evidence"}
	if _, err := handoff.Transition(c, "succeeded", nil); !errors.Is(err, handoff.ErrEvidenceRequired) {
		t.Fatalf("stored result without evidence: %v, want evidence_required", err)
	}
	c.Result = nil

	result := &handoff.Result{Summary: "renewed", EvidenceURIs: []string{"https://example.org/r/1"}, UnresolvedRisks: []string{"price rises in 2027"}}
	done, err := handoff.Transition(c, "succeeded", result)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != handoff.Succeeded || done.Attempt != 1 || !reflect.DeepEqual(done.Result, result) {
		t.Fatalf("succeeded: %+v", done)
	}
	result.EvidenceURIs[0] = "changed after the move"
	if done.Result.EvidenceURIs[0] != "https://example.org/r/1" {
		t.Fatal("the new version shares the caller's result slices")
	}
	if issues, err := handoff.Check(done); err != nil || issues != nil {
		t.Fatalf("succeeded contract does not validate: %v %v", issues, err)
	}

	// Without an evidence requirement, a result with no evidence succeeds.
	for i := range c.Acceptance {
		c.Acceptance[i].EvidenceRequired = false
	}
	if _, err := handoff.Transition(c, "succeeded", &handoff.Result{}); err != nil {
		t.Fatalf("no evidence required: %v", err)
	}
}

func TestTransitionResultAndUnknownState(t *testing.T) {
	c := validContract(t)
	c.State, c.Attempt = handoff.Running, 1
	failed, err := handoff.Transition(c, "failed", &handoff.Result{Summary: "vendor unreachable", UnresolvedRisks: []string{"r"}})
	if err != nil || failed.Result == nil || failed.Result.Summary != "vendor unreachable" {
		t.Fatalf("failed with result: %v %+v", err, failed.Result)
	}
	again, err := handoff.Transition(failed, "running", nil)
	if err != nil || again.Result == nil || again.Result.Summary != "vendor unreachable" {
		t.Fatalf("nil result must keep the stored one: %v %+v", err, again.Result)
	}
	if c.State != handoff.Running || c.Result != nil {
		t.Fatal("Transition modified its argument")
	}

	for _, to := range []string{"", "done", "Running", "running\n<script>"} {
		_, err := handoff.Transition(c, to, nil)
		if !errors.Is(err, handoff.ErrTransitionNotAllowed) {
			t.Fatalf("to %q: %v", to, err)
		}
		if got := err.Error(); got != "transition_not_allowed: the contract is running; the requested state is not a contract state" {
			t.Fatalf("to %q: message %q", to, got)
		}
	}
}

func TestChangedTerms(t *testing.T) {
	a := validContract(t)
	tests := []struct {
		name   string
		change func(c *handoff.Contract)
		want   []string
	}{
		{"state, attempt and result only", func(c *handoff.Contract) {
			c.State, c.Attempt, c.Result = handoff.Failed, 2, &handoff.Result{Summary: "x"}
		}, nil},
		{"nil and empty list are the same term", func(c *handoff.Contract) { c.Permissions.Secrets = nil }, nil},
		{"objective", func(c *handoff.Contract) { c.Objective += "!" }, []string{"objective"}},
		{"budget and escalation", func(c *handoff.Contract) {
			c.Budget.MaxAttempts = 20
			c.Escalation.Route = "elsewhere"
		}, []string{"budget", "escalation"}},
		{"acceptance evidence flag", func(c *handoff.Contract) { c.Acceptance = []handoff.Acceptance{{ID: "AC-1", Assertion: "a"}} }, []string{"acceptance"}},
		{"inputs dropped", func(c *handoff.Contract) { c.Inputs = nil }, []string{"inputs"}},
		{"handoffId and createdAt", func(c *handoff.Contract) {
			c.HandoffID = strings.ToUpper(c.HandoffID)
			c.CreatedAt = "2026-07-27T10:00:00.000Z"
		}, []string{"handoffId", "createdAt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := validContract(t)
			tc.change(&b)
			if got := handoff.ChangedTerms(a, b); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ChangedTerms = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeadlineAndOverdue(t *testing.T) {
	mustTime := func(s string) time.Time {
		t.Helper()
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		createdAt string
		seconds   int64
		deadline  string
	}{
		{"2026-07-27T10:00:00Z", 3600, "2026-07-27T11:00:00Z"},
		{"2026-07-27T10:00:00.250+02:00", 1, "2026-07-27T08:00:01.25Z"},
		{"2026-07-27t10:00:00z", 60, "2026-07-27T10:01:00Z"},
		{"2016-12-31T23:59:60Z", 1, "2017-01-01T00:00:01Z"},
	}
	for _, tc := range tests {
		t.Run(tc.createdAt, func(t *testing.T) {
			c := validContract(t)
			c.CreatedAt, c.Budget.WallClockSeconds = tc.createdAt, tc.seconds
			if issues, err := handoff.Check(c); err != nil || issues != nil {
				t.Fatalf("createdAt not valid for the schema: %v %v", issues, err)
			}
			d, err := c.Deadline()
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Format(time.RFC3339Nano); got != tc.deadline {
				t.Fatalf("deadline %s, want %s", got, tc.deadline)
			}
			if c.Overdue(d) || !c.Overdue(d.Add(time.Nanosecond)) || c.Overdue(d.Add(-time.Hour)) {
				t.Fatal("overdue must be true strictly after the deadline")
			}
		})
	}
	// wallClockSeconds up to 2^53-1 is beyond time.Duration; no overflow.
	c := validContract(t)
	c.Budget.WallClockSeconds = 1<<53 - 1
	d, err := c.Deadline()
	if err != nil || d.Unix()-mustTime(c.CreatedAt).Unix() != 1<<53-1 {
		t.Fatalf("huge budget: deadline %v %v", d, err)
	}
	if c.Overdue(mustTime("9999-12-31T23:59:59Z")) {
		t.Fatal("overdue before a far deadline")
	}
	c.CreatedAt = "not a time"
	if _, err := c.Deadline(); !errors.Is(err, handoff.ErrCreatedAt) {
		t.Fatalf("bad createdAt: %v", err)
	}
	if c.Overdue(mustTime("2100-01-01T00:00:00Z")) {
		t.Fatal("Overdue without a deadline must be false")
	}
}
