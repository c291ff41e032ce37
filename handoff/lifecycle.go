package handoff

import (
	"errors"
	"fmt"
	"slices"
)

// Transition refusal codes (spec "HTTP": 409 with these codes).
const (
	CodeTransitionNotAllowed = "transition_not_allowed"
	CodeResultRequired       = "result_required"
	CodeEvidenceRequired     = "evidence_required"
)

// Sentinels matched by *TransitionError through errors.Is, one per code.
var (
	ErrTransitionNotAllowed = errors.New("transition not allowed")
	ErrResultRequired       = errors.New("result required to succeed")
	ErrEvidenceRequired     = errors.New("evidence required to succeed")
)

// TransitionError is a refused move. Code is one of the Code* constants;
// From is the contract's current state and To the requested one (To is
// omitted from the message when it is not a known state, so arbitrary
// input is never echoed).
type TransitionError struct {
	Code string
	From State
	To   string
}

func (e *TransitionError) Error() string {
	switch e.Code {
	case CodeResultRequired:
		return fmt.Sprintf("%s: moving from %s to succeeded needs a result", e.Code, e.From)
	case CodeEvidenceRequired:
		return fmt.Sprintf("%s: an acceptance criterion requires evidence; the result has no evidenceUris", e.Code)
	}
	if !slices.Contains(States, State(e.To)) {
		return fmt.Sprintf("%s: the contract is %s; the requested state is not a contract state", e.Code, e.From)
	}
	return fmt.Sprintf("%s: the contract is %s and cannot move to %s", e.Code, e.From, e.To)
}

// Is matches the sentinel of e's code.
func (e *TransitionError) Is(target error) bool {
	switch e.Code {
	case CodeTransitionNotAllowed:
		return target == ErrTransitionNotAllowed
	case CodeResultRequired:
		return target == ErrResultRequired
	case CodeEvidenceRequired:
		return target == ErrEvidenceRequired
	}
	return false
}

// moves is the project's state machine (spec "Lifecycle"), apart from the
// attempt budget, which Allowed applies on top.
var moves = map[State][]State{
	Proposed:  {Accepted, Cancelled},
	Accepted:  {Running, Cancelled},
	Running:   {Blocked, Verifying, Failed, Cancelled},
	Blocked:   {Running, Failed, Cancelled},
	Verifying: {Succeeded, Failed, Cancelled},
	Failed:    {Running, Cancelled},
	Succeeded: nil,
	Cancelled: nil,
}

// Terminal reports whether no move leaves the contract's state: succeeded
// and cancelled always, failed once attempt has reached budget.maxAttempts.
func (c Contract) Terminal() bool {
	switch c.State {
	case Succeeded, Cancelled:
		return true
	case Failed:
		return c.Attempt >= c.Budget.MaxAttempts
	}
	return false
}

// Allowed reports whether the state machine lets c move to the state to,
// counting the attempt budget: a retry (failed → running) needs
// attempt+1 ≤ budget.maxAttempts. It does not check result or evidence.
func (c Contract) Allowed(to State) bool {
	if c.Terminal() || !slices.Contains(moves[c.State], to) {
		return false
	}
	if c.State == Failed && to == Running {
		return c.Attempt+1 <= c.Budget.MaxAttempts
	}
	return true
}

// Next lists the states c may move to, in schema order.
func (c Contract) Next() []State {
	var next []State
	for _, s := range States {
		if c.Allowed(s) {
			next = append(next, s)
		}
	}
	return next
}

// Transition returns the next version of current after a move to the state
// to (spec "Lifecycle"). Only State, Attempt and Result change:
//
//   - entering running for the first time (attempt 0) sets attempt to 1; a
//     retry from failed increments it, and is refused once the new value
//     would exceed budget.maxAttempts; running after blocked keeps it;
//   - succeeded requires a result — the one given with this move, or else
//     the one the contract already holds — and when any acceptance
//     criterion has evidenceRequired, a non-empty result.EvidenceURIs;
//   - a non-nil result replaces the stored one on any allowed move; nil
//     keeps it.
//
// Errors are *TransitionError: CodeTransitionNotAllowed (naming the
// current state) for a move the machine does not have, from a terminal
// state or beyond the attempt budget; CodeResultRequired;
// CodeEvidenceRequired. current is not modified. Callers that accept a
// result from outside should run Check on the returned contract.
func Transition(current Contract, to string, result *Result) (Contract, error) {
	next := State(to)
	if !current.Allowed(next) {
		return current, &TransitionError{Code: CodeTransitionNotAllowed, From: current.State, To: to}
	}
	if next == Succeeded {
		effective := result
		if effective == nil {
			effective = current.Result
		}
		if effective == nil {
			return current, &TransitionError{Code: CodeResultRequired, From: current.State, To: to}
		}
		needsEvidence := slices.ContainsFunc(current.Acceptance, func(a Acceptance) bool { return a.EvidenceRequired })
		if needsEvidence && len(effective.EvidenceURIs) == 0 {
			return current, &TransitionError{Code: CodeEvidenceRequired, From: current.State, To: to}
		}
	}
	out := current
	out.State = next
	if next == Running {
		switch {
		case current.State == Failed:
			out.Attempt = current.Attempt + 1
		case current.Attempt == 0:
			out.Attempt = 1
		}
	}
	if result != nil {
		out.Result = &Result{
			Summary:          result.Summary,
			ChangedArtifacts: slices.Clone(result.ChangedArtifacts),
			EvidenceURIs:     slices.Clone(result.EvidenceURIs),
			UnresolvedRisks:  slices.Clone(result.UnresolvedRisks),
		}
	}
	return out, nil
}
