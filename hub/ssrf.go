package hub

import "github.com/acrelay/acrelay/internal/ssrf"

// The SSRF guard lives in internal/ssrf (the hub, both WebSub couriers and
// federation dial through it). These names stay for relay and cmd, which
// build the hub's guard; new code imports internal/ssrf.
type (
	// Guard is ssrf.Guard.
	Guard = ssrf.Guard
	// GuardOptions is ssrf.GuardOptions.
	GuardOptions = ssrf.GuardOptions
)

// NewGuard is ssrf.NewGuard.
func NewGuard(opts GuardOptions) (*Guard, error) { return ssrf.NewGuard(opts) }
