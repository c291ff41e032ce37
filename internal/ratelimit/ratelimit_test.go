package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestBucket: burst tokens at once, then one per 1/rate; the refusal says
// how long until the next token; keys are independent.
func TestBucket(t *testing.T) {
	k := New(2, 3, 0) // 2/s, burst 3
	for i := range 3 {
		if ok, _ := k.Allow("a", t0); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := k.Allow("a", t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th: ok %v, wait %v; want refused, 500ms", ok, wait)
	}
	// A refusal takes no token: the next is still 500 ms away.
	if ok, wait := k.Allow("a", t0.Add(100*time.Millisecond)); ok || wait != 400*time.Millisecond {
		t.Fatalf("at +100ms: ok %v, wait %v; want refused, 400ms", ok, wait)
	}
	if ok, _ := k.Allow("a", t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("at +500ms: refused; a token was due")
	}
	if ok, _ := k.Allow("b", t0); !ok {
		t.Fatal("another key refused")
	}
}

// TestBoundedKeys: however many keys arrive, at most maxKeys are kept,
// and a key idle for the fill time is forgotten.
func TestBoundedKeys(t *testing.T) {
	k := New(10, 10, 1000) // fills in 1 s
	for i := range 100_000 {
		k.Allow(strconv.Itoa(i), t0)
		if n := k.Len(); n > 1000 {
			t.Fatalf("after %d keys: %d kept, want ≤ 1000", i+1, n)
		}
	}
	k.Allow("x", t0.Add(time.Second))
	k.Allow("y", t0.Add(2*time.Second))
	if n := k.Len(); n != 2 {
		t.Fatalf("after 2 s idle: %d keys kept, want 2 (x of the previous generation, y)", n)
	}
}

// TestActiveKeySurvivesRetirement: a key used in each generation keeps
// its bucket (an empty bucket is not refilled by a retirement).
func TestActiveKeySurvivesRetirement(t *testing.T) {
	k := New(1, 2, 4) // retires every 2 keys
	k.Allow("hot", t0)
	k.Allow("hot", t0)
	for i := range 10 {
		k.Allow("cold"+strconv.Itoa(i), t0)
		if ok, _ := k.Allow("hot", t0); ok {
			t.Fatalf("round %d: hot's empty bucket was refilled by a retirement", i)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {59500 * time.Millisecond, 60}} {
		if got := RetryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
