// Package envelope canonicalizes and hashes predicate envelopes v1
// (spec/predicate-envelope-1.md, seed 001_eade5896d07b0a7c).
//
// A predicate envelope describes one intended tool action and the
// constraints it is taken under (amount, counterparty, data class, region,
// record count, model provenance). Canonicalize checks the input against the
// strict JSON profile of correspondence-0.1 §2 (through canonicaljson), then
// against the envelope rules, and returns the RFC 8785 bytes of the
// canonical form together with their SHA-256 as uppercase hex. The hash is a
// stable name for "this action with these constraints": the evidence fields
// (tenantId, intentId, requestedAt) are validated and then left out, and
// predicate order in the input does not matter.
//
// Every refusal is either a *canonicaljson.ProfileError (the strict profile
// saw it first) or a *RefusalError naming one of the Reason* codes below.
// Refusal messages never quote the input.
//
// The package is pure: it does no I/O, evaluates no predicate and grants
// nothing. HTTP (POST /v1/envelopes/canonicalize) and the CLI
// (acrelay envelope hash) are thin callers of Canonicalize.
package envelope
