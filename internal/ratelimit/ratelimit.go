// Package ratelimit keeps one token bucket (golang.org/x/time/rate) per
// key — a client address, a token id — in bounded memory. It is the
// relay's per-client-address and per-token rate (docs/operating.md
// "Limits").
//
// Memory: buckets live in two generations. The current generation takes
// every new or used key; it is retired (becomes the previous one, whose
// keys are dropped at the next retirement) when it holds MaxKeys/2 keys
// or when Idle has passed since the last retirement. A key is thus kept
// at most 2·Idle after its last use, and at most MaxKeys keys are kept.
// Idle is the time an empty bucket takes to fill, so a bucket dropped for
// being idle was full: dropping it changes no answer. Only a churn of more
// than MaxKeys/2 keys within Idle drops buckets early (each then starts
// full again), the price of the bound.
//
// It does not decide what a key is (the relay derives client addresses,
// honouring its trusted proxies) nor answer HTTP.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxKeys is the default bound of keys kept per Keyed.
const DefaultMaxKeys = 100_000

// Keyed is a set of token buckets, one per key, each refilling at Rate
// per second up to Burst. Its methods are safe for concurrent use.
type Keyed struct {
	limit   rate.Limit
	burst   int
	maxKeys int
	idle    time.Duration

	mu      sync.Mutex
	cur     map[string]*rate.Limiter
	prev    map[string]*rate.Limiter
	retired time.Time
}

// New returns a Keyed of perSecond tokens a second, burst at most, for at
// most maxKeys keys (DefaultMaxKeys when ≤ 0; at least 2). perSecond must
// be > 0 and burst ≥ 1 (a burst under 1 is taken as 1).
func New(perSecond float64, burst, maxKeys int) *Keyed {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	burst = max(burst, 1)
	idle := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &Keyed{limit: rate.Limit(perSecond), burst: burst, maxKeys: max(maxKeys, 2), idle: max(idle, time.Second),
		cur: map[string]*rate.Limiter{}, prev: map[string]*rate.Limiter{}}
}

// Allow takes one token of key's bucket at now. When the bucket is empty
// it takes none and returns false and the wait until a token is there
// (always > 0).
func (k *Keyed) Allow(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	k.mu.Lock()
	l := k.bucket(key, now)
	r := l.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	k.mu.Unlock()
	if d > 0 {
		return false, d
	}
	return true, 0
}

// bucket returns key's bucket, creating or promoting it; k.mu is held.
func (k *Keyed) bucket(key string, now time.Time) *rate.Limiter {
	if now.Sub(k.retired) >= k.idle || len(k.cur) >= k.maxKeys/2 {
		k.prev, k.cur, k.retired = k.cur, make(map[string]*rate.Limiter, len(k.cur)), now
	}
	if l, ok := k.cur[key]; ok {
		return l
	}
	l, ok := k.prev[key]
	if ok {
		delete(k.prev, key)
	} else {
		l = rate.NewLimiter(k.limit, k.burst)
	}
	k.cur[key] = l
	return l
}

// Len is the number of keys kept (both generations), ≤ MaxKeys.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.cur) + len(k.prev)
}

// RetryAfterSeconds is d as a Retry-After value: whole seconds, rounded
// up, at least 1 (RFC 9110 §10.2.3).
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
