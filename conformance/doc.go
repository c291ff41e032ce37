// Package conformance checks an implementation of agent-correspondence/v0.1
// against the published vectors and, over HTTP, checks a running relay.
//
// The vector runner (RunVectors) executes every vector group of seed 000
// (embedded in the binary), of the public vector file
// agent-correspondence-0.1-vectors.json (read from the shared folder when
// present) and of seed 001 (predicate envelopes v1) through this module's
// protocol core: canonicaljson, correspondence and envelope. It counts
// passes and failures per group and reports the seed's two known damaged
// entries as errata (spec/correspondence-0.1.md §4 "Erratum in seed 000")
// instead of passing or failing them silently; each erratum is recognised
// by its content and the rule it was meant to test is still checked. The
// file's bounds member is checked too: each bound is admitted at the bound
// and refused one past it.
//
// The HTTP suite (RunHTTP) is black-box: it speaks HTTP to a relay URL with
// a project token that has admin scope, and imports no server package.
// http.go holds RunHTTP, the run's state and the request helpers; each
// group of the suite has its file: http_setup.go (setup), http_append.go
// (body_matrix, retry), http_refusals.go (refusals), http_replay.go
// (events_read, validators, paging, negotiation), http_claims.go (claims),
// http_voice.go (voice) and http_lifecycle.go (lifecycle). http_headers.go
// checks the Content-Type charset, Vary, Cache-Control, Link and
// Link-Template headers the read groups share.
//
// The package never prints or logs event bodies or tokens; failure lines
// name the vector and what differed.
package conformance
