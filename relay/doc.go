// Package relay is acrelay's HTTP surface (spec/correspondence-0.1.md §9–§11):
// routes, bearer authentication with independent scopes, content
// negotiation, strong ETags and conditional requests, RFC 8288 Link and
// RFC 9652 Link-Template headers, the registry's admin routes, and the one
// table that turns errors into (status, stable code).
//
// Reads come from the store alone; a POST never waits for a projection or a
// courier. Handlers are plain methods registered in routes.go.
package relay
