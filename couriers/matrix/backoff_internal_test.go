package matrix

import (
	"testing"
	"time"
)

// TestBackoffJitter: the n-th wait is drawn from the upper half of
// min(initial·2^(n-1), max), and draws differ (jitter: clients that failed
// together do not retry together).
func TestBackoffJitter(t *testing.T) {
	for n, d := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 7: time.Minute, 30: time.Minute} {
		seen := map[time.Duration]bool{}
		for range 200 {
			w := backoff(n, time.Second, time.Minute)
			if w < d/2 || w > d {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, w, d/2, d)
			}
			seen[w] = true
		}
		if len(seen) < 100 {
			t.Errorf("backoff(%d): %d distinct waits in 200 draws, want jitter", n, len(seen))
		}
	}
}
