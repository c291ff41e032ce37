// Package hub is the relay's embedded W3C WebSub hub (spec/websub.md;
// W3C WebSub Recommendation, 23 January 2018) for this relay's own topics
// only: canonical topic URLs (Topic, ParseTopic), subscription requests
// (Hub.ServeHTTP, #subscriber-sends-subscription-request), verification of
// intent (Hub.Run, #hub-verifies-intent), leases (#subscription-lease) and
// denial (Hub.DenyRevoked, #subscription-validation).
//
// Private topics need the project's read capability, checked through the
// relay's Options.Authorize hook before any outbound request; public ones
// behave as plain WebSub. Subscriptions and pending verifications live in
// the store (store.WebSub), so a restart loses no accepted request.
//
// Caps (Options.Limits, limits.go): subscriptions per topic, per callback
// host and per project, and pending verifications per callback host, each
// refused with 409 and a stable code before anything is stored or
// requested (docs/operating.md "Limits").
//
// What it does not do: deliver content (the WebSub courier tails each
// subscription's cursor and signs deliveries), take hub.mode=publish from
// external publishers, or read bearer tokens itself (the relay owns
// authentication). Every verification and denial request goes through the
// SSRF-guarded client (internal/ssrf): redirects are never
// followed, and a callback's answer is never repeated anywhere.
//
// The SSRF guard (spec/websub.md "SSRF defence") is package
// internal/ssrf: the hub checks each callback with it at subscribe time
// (Guard.CheckCallbackResolved) and dials every verification and denial
// through its client; the WebSub couriers and federation use the same
// guard's client, built once by cmd.
//
// What it deliberately does not do: decide status codes (its answers are
// rows of wire's error table, written by internal/apierror as every relay
// route's are), log, or limit per-host concurrency (couriers does).
package hub
