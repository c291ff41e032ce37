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
//
// # Where each rule lives
//
// The files follow the sections of spec/correspondence-0.1.md:
//
//	§2 JSON data profile      canonicaljson (the strict parser, JCS);
//	                          validate_profile.go (RFC3339-ms timestamps,
//	                          canonical UUIDs)
//	§3 the signed event       validate.go (issue codes and messages,
//	                          Validate, the top-level members in table
//	                          order, closed objects, event id arrays);
//	                          validate_envelope.go (sender, scope,
//	                          authority, event ids, git revisions, opaque
//	                          ids, branch);
//	                          validate_signature.go (the signature member
//	                          and the one spelling of its value that §6
//	                          admits)
//	§4 paths, locators        validate_paths.go (path prefixes,
//	                          PathsOverlap, locators)
//	§5 kinds and bodies       validate_bodies.go (the closed body of each
//	                          kind, artifacts, text bounds,
//	                          reference_not_in_parents)
//	§3, §5 typed view         parse.go (ParseEvent, EventFromValue and the
//	                          body accessors Claim, ReferencedEventIDs,
//	                          HandoffID)
//	§3, §6 event model        event.go (Event, kinds, canonical core,
//	                          signing digest, Sign and Verify, the
//	                          canonical base64url signature encoding)
//	§8 claim lineage          lineage.go (ProjectLineage)
package correspondence
