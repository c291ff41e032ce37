// Package canonicaljson implements the strict JSON data profile of
// agent-correspondence/v0.1 (spec/correspondence-0.1.md §2) and RFC 8785
// (JCS) canonical serialization.
//
// Parse reads a whole document into a Value that keeps every string exactly
// as decoded (no Unicode normalization, no whitespace or newline rewriting)
// and refuses anything outside the profile with a *ProfileError naming one of
// the spec's reason codes. Canonical writes a Value's RFC 8785 bytes: members
// sorted by their names as UTF-16 code units, minimal string escapes, no
// insignificant whitespace. Only safe integers are admitted, so number
// serialization is plain decimal digits.
//
// Tokenizing is done by github.com/go-json-experiment/json/jsontext; this
// package adds only the profile's own checks. It does no I/O and imports
// nothing from storage, HTTP or couriers.
package canonicaljson
