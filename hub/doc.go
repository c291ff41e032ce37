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
// What it does not do: deliver content (the WebSub courier tails each
// subscription's cursor and signs deliveries), take hub.mode=publish from
// external publishers, or read bearer tokens itself (the relay owns
// authentication). Every verification and denial request goes through the
// SSRF-guarded client (CheckCallback, NewHTTPClient): redirects are never
// followed, and a callback's answer is never repeated anywhere.
package hub
