// Package backoff is the relay's one exponential backoff: the waits of a
// run of failures double from Initial up to Max. Its users: the courier
// runner's delivery retries (couriers.Backoff, equal jitter), the SDK's
// request retries (client.RetryPolicy, full jitter), federation's backfill
// and registry-sync retries and PostgreSQL's LISTEN reconnects (no
// jitter).
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff from Initial, doubling per failure, up
// to Max. A Max below Initial caps every wait at Max.
type Policy struct {
	Initial, Max time.Duration
}

// Ceiling is the n-th wait (n ≥ 1; n < 1 counts as 1) without jitter:
// min(Max, Initial·2^(n-1)). It doubles step by step and stops at Max, so
// it never overflows.
func (p Policy) Ceiling(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// Equal is the n-th wait with equal jitter: drawn uniformly from the
// upper half of Ceiling(n), [c/2, c]. Several clients failing at once
// spread out, and none waits less than half its ceiling.
func (p Policy) Equal(n int) time.Duration {
	c := p.Ceiling(n)
	if c <= 1 {
		return c
	}
	return c/2 + rand.N(c/2+1)
}

// Full is the n-th wait with full jitter: drawn uniformly from [0, c) for
// c = Ceiling(n) (0 when c ≤ 0).
func (p Policy) Full(n int) time.Duration {
	c := p.Ceiling(n)
	if c <= 0 {
		return 0
	}
	return rand.N(c)
}
