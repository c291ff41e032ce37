// Package handoff validates agent handoff contracts v1 and drives their
// lifecycle (spec/handoff-contract-1.md, seed 003_6b25a20b26b0cd55).
//
// A handoff contract says who hands what to whom, in which scope, under
// which constraints, with which acceptance criteria, permissions, budget
// and escalation route, and in which state the work is. Validate checks a
// document against the strict JSON profile of correspondence-0.1 §2 first
// (through canonicaljson) and then against the seed's JSON Schema (draft
// 2020-12, embedded as contract.schema.json) with format assertions on, so
// a handoffId that is not a UUID or a createdAt that is not an RFC 3339
// date-time is a violation, not an annotation. Transition applies the
// project's state machine (spec "Lifecycle"); ChangedTerms, Deadline and
// Overdue are the other rules of that section.
//
// A contract is a declaration, not a grant: this package never acts on
// permissions or escalation. It is pure (no I/O, no clock of its own:
// callers pass now); storage, HTTP and ETags belong to the relay.
package handoff
