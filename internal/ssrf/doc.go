// Package ssrf is the relay's one SSRF guard for outbound requests to
// addresses a client named (spec/websub.md "SSRF defence"): WebSub
// callbacks checked and dialled by the hub, deliveries of both WebSub
// couriers (couriers/websub: subscriber callbacks and publish pings to
// external hubs), and federation's requests to peer relays. cmd builds
// one Guard (--websub-allow-hosts, the relay's own addresses) and hands
// its HTTPClient to each.
//
// The guard checks a callback twice.
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
// The address ranges: the named rows of blocked4 and blocked6 (whose
// names are what a refusal says), then code.dny.dev/ssrf's IANA-generated
// special-purpose deny lists, which refuse what the rows lack (AS112, AMT,
// the rest of 2001::/23). The URL rules (scheme, userinfo, fragment, one
// canonical spelling per listener), the host-spelling rules (WHATWG and
// inet_aton IPv4 forms, reserved names) and the embedding rules (NAT64,
// 6to4, Teredo decided by the IPv4 address they carry) are ours: no
// library has them.
//
// GuardOptions.AllowHosts, the --websub-allow-hosts setting, exists for
// tests against loopback servers and is empty by default.
package ssrf
