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
// SSRF-guarded client (CheckCallback, NewHTTPClient): redirects are never
// followed, and a callback's answer is never repeated anywhere.
//
// The SSRF guard (spec/websub.md "SSRF defence") checks a callback twice.
//
//   - At subscribe time, CheckCallback (and Guard.CheckCallbackResolved,
//     which also resolves the name and checks every address) refuses a
//     callback that is not http/https, carries userinfo or a fragment,
//     names a local-use host (localhost, *.localhost, *.internal, …), the
//     relay itself, or an address in a blocked range — in any spelling a
//     resolver might accept (127.1, 0x7f.1, 2130706433, [::ffff:127.0.0.1]).
//     The hub answers 400 and makes no request.
//   - At dial time, Guard.DialContext resolves the name itself, refuses the
//     host if any address is blocked, and dials only the checked addresses;
//     Guard.Control checks the address each socket actually connects to,
//     so a DNS answer that changes between the two checks (DNS rebinding)
//     gains nothing.
//
// NewHTTPClient wires the guard into an *http.Client that never follows a
// redirect, never uses a proxy from the environment (a proxy would dial
// for us, past the check), and bounds connect and total time; ReadLimited
// bounds what is read of a response.
//
// What it deliberately does not do: decide status codes or wire error
// codes (relay owns that table and maps every Err* here to 400), log, or
// limit per-host concurrency (couriers does). GuardOptions.AllowHosts, the
// --websub-allow-hosts setting, exists for tests against loopback servers
// and is empty by default.
package hub
