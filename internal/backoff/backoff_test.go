package backoff

import (
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 10 * time.Second}
	for n, want := range map[int]time.Duration{-1: time.Second, 0: time.Second, 1: time.Second, 2: 2 * time.Second,
		3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 1 << 20: 10 * time.Second} {
		if got := p.Ceiling(n); got != want {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, want)
		}
	}
	if got := (Policy{Initial: time.Hour, Max: time.Minute}).Ceiling(1); got != time.Minute {
		t.Errorf("Max below Initial: Ceiling(1) = %v, want 1m", got)
	}
	if got := (Policy{Initial: time.Hour, Max: 1 << 62}).Ceiling(200); got != 1<<62 {
		t.Errorf("a large n overflowed: %v", got)
	}
}

func TestJitterBounds(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	for n := 1; n <= 6; n++ {
		c := p.Ceiling(n)
		lowE, highE, lowF := c, time.Duration(0), c
		for range 2000 {
			e, f := p.Equal(n), p.Full(n)
			if e < c/2 || e > c {
				t.Fatalf("Equal(%d) = %v outside [%v, %v]", n, e, c/2, c)
			}
			if f < 0 || f >= c {
				t.Fatalf("Full(%d) = %v outside [0, %v)", n, f, c)
			}
			lowE, highE, lowF = min(lowE, e), max(highE, e), min(lowF, f)
		}
		// 2,000 draws cover both ends of each range (not a constant).
		if lowE > c/2+c/10 || highE < c-c/10 || lowF > c/10 {
			t.Fatalf("n=%d: Equal spans [%v, %v], Full from %v: not spread over the range", n, lowE, highE, lowF)
		}
	}
	if got := (Policy{}).Equal(3); got != 0 {
		t.Errorf("zero policy Equal = %v", got)
	}
	if got := (Policy{}).Full(3); got != 0 {
		t.Errorf("zero policy Full = %v", got)
	}
}
