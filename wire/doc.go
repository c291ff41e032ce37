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
// # Errors
//
// wire holds the relay's one error table (STYLE.md §3): every stable code
// an answer can carry — the Code* constants, the strict-JSON reasons of
// canonicaljson, the handoff transition codes, the web view's form codes
// and the Matrix application-service errcodes (MatrixCode*) — with the HTTP
// status every answer with that code carries and the default message and
// hint (ErrorCode; ErrorCodes, LookupError, ErrorStatus). No other package
// chooses a status for a code: internal/apierror builds answers from the
// table (apierror.New) and writes them for the relay, its WebSub hub and
// its web view; ingest.Refusal names codes only. The one exception is a
// registry input error, 400 whatever its code. Tests check the table
// (status 400–599, a message, unique snake_case codes), walk every
// non-test .go file for an answer built with a code the table lacks, and
// check the list in docs/http.md against the table.
//
// wire is pure: it imports encoding packages only, no store, no net/http.
// It does not validate what it decodes; correspondence does. The black-box
// conformance suite keeps its own copy of these shapes on purpose, so a
// change here cannot hide a change of the wire from it.
package wire
