// Package correspondence is the pure protocol core of
// agent-correspondence/v0.1 (spec/correspondence-0.1.md): the signed event
// model, every validation rule of §2–§5, canonicalization, Ed25519 signing
// and the content-addressed event id of §6, the path-prefix overlap rule of
// §4, and the claim-lineage projection of §8 as a pure function of
// (events, clock).
//
// It imports only the standard library, crypto and canonicaljson: no
// storage, HTTP or courier code. Callers do all I/O; the stores persist the
// materialized lineage state that ProjectLineage defines.
package correspondence
