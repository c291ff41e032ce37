package matrix

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"maunium.net/go/mautrix"

	"github.com/acrelay/acrelay/internal/backoff"
)

// TestRetryWait: a failed submission waits retryBackoff's n-th wait
// (equal jitter: [c/2, c] of c = min(1 s·2^(n-1), 10 min)), at least
// what a 429 asked; an undecryptable one waits KeyRetry's (default 1 s
// doubling to 30 s), whatever a 429 said.
func TestRetryWait(t *testing.T) {
	throttled := fmt.Errorf("%w: send: %w", errReply, mautrix.HTTPError{Response: &http.Response{StatusCode: 429},
		RespError: &mautrix.RespError{ErrCode: "M_LIMIT_EXCEEDED", ExtraData: map[string]any{"retry_after_ms": float64(90000)}}})
	undecryptable := fmt.Errorf("no_session: %w: no session", ErrUndecryptable)
	long := backoff.Policy{Initial: 10 * time.Minute, Max: 10 * time.Minute}
	for _, tc := range []struct {
		name     string
		keyRetry backoff.Policy
		attempts int
		err      error
		low, top time.Duration
	}{
		{"first failure", backoff.Policy{}, 1, errors.New("store unavailable"), 500 * time.Millisecond, time.Second},
		{"third failure", backoff.Policy{}, 3, errors.New("store unavailable"), 2 * time.Second, 4 * time.Second},
		{"tenth failure: capped at 10 min", backoff.Policy{}, 30, errors.New("store unavailable"), 5 * time.Minute, 10 * time.Minute},
		{"a 429 asking 90 s", backoff.Policy{}, 1, throttled, 90 * time.Second, 90 * time.Second},
		{"undecryptable, first", backoff.Policy{}, 1, undecryptable, 500 * time.Millisecond, time.Second},
		{"undecryptable, capped at 30 s", backoff.Policy{}, 12, undecryptable, 15 * time.Second, 30 * time.Second},
		{"undecryptable, KeyRetry set", long, 1, undecryptable, 5 * time.Minute, 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Inbox{KeyRetry: tc.keyRetry}
			for range 200 {
				if w := in.retryWait(tc.attempts, tc.err); w < tc.low || w > tc.top {
					t.Fatalf("retryWait(%d) = %v, want within [%v, %v]", tc.attempts, w, tc.low, tc.top)
				}
			}
		})
	}
}

// FuzzRetryAfterHeader: any Retry-After value gives a wait within
// [0, 24 h], and exact delay-seconds give exactly that many seconds.
func FuzzRetryAfterHeader(f *testing.F) {
	for _, s := range []string{"", "0", "1", "120", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "1e9", " 7 ", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d := retryAfterHeader(v, now)
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("retryAfterHeader(%q) = %v, want within [0, 24h]", v, d)
		}
	})
}

// TestRetryAfterHeader: the forms of RFC 9110 §10.2.3.
func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "0": 0, "7": 7 * time.Second, " 7 ": 7 * time.Second, "-1": 0, "soon": 0, "1.5": 0,
		"Fri, 02 Jan 2026 03:04:35 GMT": 30 * time.Second, // 30 s after now
		"Fri, 02 Jan 2026 03:04:00 GMT": 0,                // in the past
		"86401":                         24 * time.Hour,
	} {
		if got := retryAfterHeader(v, now); got != want {
			t.Errorf("retryAfterHeader(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestRefused: only the homeserver's 4xx refusals of the reply path
// (not a 429) count toward giving a submission up.
func TestRefused(t *testing.T) {
	he := func(status int, code string) error {
		return mautrix.HTTPError{Response: &http.Response{StatusCode: status}, RespError: &mautrix.RespError{ErrCode: code}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"not in the room", fmt.Errorf("%w: send: %w", errReply, he(403, "M_FORBIDDEN")), true},
		{"room gone", fmt.Errorf("%w: reconcile: %w", errReply, he(404, "M_NOT_FOUND")), true},
		{"throttled", fmt.Errorf("%w: send: %w", errReply, he(429, "M_LIMIT_EXCEEDED")), false},
		{"homeserver down", fmt.Errorf("%w: send: %w", errReply, he(502, "M_UNKNOWN")), false},
		{"no answer", fmt.Errorf("%w: send: %w", errReply, mautrix.HTTPError{Message: "request error", WrappedError: errors.New("connection refused")}), false},
		{"a 403 outside the reply path", he(403, "M_FORBIDDEN"), false},
		{"log unavailable", fmt.Errorf("%w: store unavailable", errTransient), false},
	} {
		if got := refused(tc.err); got != tc.want {
			t.Errorf("%s: refused = %v, want %v", tc.name, got, tc.want)
		}
	}
}
