// Package relay is acrelay's HTTP surface (spec/correspondence-0.1.md §9–§11):
// signed appends and paged replay (vendor JSON, JSON, Atom), the claims
// projection and the finite voice snapshot (§8, §9), the wake SSE stream,
// predicate envelopes (spec/predicate-envelope-1.md), handoff contracts
// (spec/handoff-contract-1.md), and the registry's admin routes. Across
// all of them: bearer authentication with independent scopes and project
// scoping, content negotiation, strong ETags and conditional requests,
// RFC 8288 Link and RFC 9652 Link-Template headers, and the mapping from
// errors to answers in errors.go (toAPIError), whose statuses, codes and
// messages are wire's one error table, written by internal/apierror.
//
// Appends go through package ingest, the one append path (parse, project,
// sender key, signature and event id, store.Append), which Matrix
// submissions and federation share; this package only adds what is HTTP
// (body size and media type) and answers the code ingest.Refusal names. The
// JSON shapes of the answers and the error codes are in package wire,
// which the client SDK reads with.
//
// Reads come from the store alone; a POST never waits for a projection or
// a courier, and wake frames are invalidations only. Every route is listed
// in routes.go; handlers are plain methods. It does not run couriers or
// own any goroutine beyond a request's (the wake fan-out runs after a
// response and ends by itself).
package relay
