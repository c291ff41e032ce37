// Package wire holds the JSON shapes of the relay's HTTP answers
// (spec/correspondence-0.1.md §7–§9, §11): records and receipts, the
// append answer with its warnings, pages, the claims projection, the voice
// snapshot, the error body with the stable error codes, and the media
// types with the exact Content-Type values they are served under (which a
// WebSub delivery reuses). The relay
// marshals them (github.com/go-json-experiment/json with
// json.Deterministic(true): members in the order the fields are declared)
// and the client SDK unmarshals them (encoding/json), so the two never
// drift apart.
//
// Members that carry stored signed bytes are written exactly as stored and
// read exactly as served, never re-encoded: a record's event is a
// jsontext.Value; a claim's scope is a jsontext.Value on the relay's side
// and decoded into ClaimScope on the client's (ActiveClaim's type
// parameter). received_seq and other cursors are decimal
// strings here and integers everywhere else (STYLE.md §2).
//
// wire is pure: it imports encoding packages only, no store, no net/http.
// It does not validate what it decodes; correspondence does. The black-box
// conformance suite keeps its own copy of these shapes on purpose, so a
// change here cannot hide a change of the wire from it.
package wire
