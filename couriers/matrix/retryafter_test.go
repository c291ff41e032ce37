package matrix_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
)

// TestRetryAfter: a homeserver's 429 is waited out as long as it asks,
// whether it says so in the Retry-After header (Synapse; seconds or an
// HTTP date), in retry_after_ms (Synapse, Conduit) or both (the longer).
func TestRetryAfter(t *testing.T) {
	date := time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name     string
		status   int
		header   string
		body     string
		min, max time.Duration
	}{
		{"retry_after_ms only (Dendrite, Conduit)", 429, "", `{"errcode":"M_LIMIT_EXCEEDED","error":"slow down","retry_after_ms":2500}`, 2500 * time.Millisecond, 2500 * time.Millisecond},
		{"Retry-After only", 429, "3", `{"errcode":"M_LIMIT_EXCEEDED","error":"slow down"}`, 3 * time.Second, 3 * time.Second},
		{"both, the header longer", 429, "5", `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":1000}`, 5 * time.Second, 5 * time.Second},
		{"both, the body longer (Synapse rounds the header up)", 429, "1", `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":4000}`, 4 * time.Second, 4 * time.Second},
		{"Retry-After as an HTTP date", 429, date, `{"errcode":"M_LIMIT_EXCEEDED"}`, 8 * time.Second, 10 * time.Second},
		{"neither", 429, "", `{"errcode":"M_LIMIT_EXCEEDED"}`, time.Second, time.Second},
		{"a malformed header", 429, "soon", `{"errcode":"M_LIMIT_EXCEEDED"}`, time.Second, time.Second},
		{"a negative header", 429, "-5", `{"errcode":"M_LIMIT_EXCEEDED"}`, time.Second, time.Second},
		{"an absurd header is capped at a day", 429, "999999999", `{"errcode":"M_LIMIT_EXCEEDED"}`, 24 * time.Hour, 24 * time.Hour},
		{"not a 429", 502, "30", `{"errcode":"M_UNKNOWN"}`, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer hs.Close()
			cli, err := matrix.NewClient(hs.URL, id.UserID("@bot:x"), "tok")
			if err != nil {
				t.Fatal(err)
			}
			_, err = cli.Whoami(ctx)
			if err == nil {
				t.Fatal("no error from the homeserver's refusal")
			}
			if got := matrix.RetryAfter(err); got < tc.min || got > tc.max {
				t.Errorf("RetryAfter = %v, want within [%v, %v]", got, tc.min, tc.max)
			}
		})
	}
}
