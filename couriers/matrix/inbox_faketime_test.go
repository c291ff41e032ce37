package matrix_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/ingest"
)

// homeserver answers the Matrix client's requests in-process (an edge the
// relay does not own), so that the inbox runs on synctest's fake clock.
type homeserver func(r *http.Request) (*http.Response, error)

func (h homeserver) RoundTrip(r *http.Request) (*http.Response, error) { return h(r) }

func answer(r *http.Request, status int, body string) (*http.Response, error) {
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Request: r, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body))}, nil
}

// TestSyncBackoffFakeTime: the bot's /sync after errors waits, on fake
// time, exactly what a 429 asks (retry_after_ms 7000 → 7 s, above the
// backoff's first waits), then the backoff's equal-jitter waits ([c/2, c]
// of c = 1 s·2^(n-1)) for the n-th error in a row; a success resets the
// count (the next sync at once, the next error waits [0.5 s, 1 s] again).
func TestSyncBackoffFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t, t.TempDir())
		defer st.Close()
		var mu sync.Mutex
		var at []time.Time
		reached := make(chan struct{})
		hs := homeserver(func(r *http.Request) (*http.Response, error) {
			if !strings.HasSuffix(r.URL.Path, "/sync") {
				return answer(r, 404, `{"errcode":"M_UNRECOGNIZED","error":"not here"}`)
			}
			mu.Lock()
			at = append(at, time.Now())
			n := len(at)
			mu.Unlock()
			switch {
			case n <= 2:
				return answer(r, 429, `{"errcode":"M_LIMIT_EXCEEDED","error":"slow down","retry_after_ms":7000}`)
			case n <= 5, n == 7:
				return answer(r, 502, `{"errcode":"M_UNKNOWN","error":"bad gateway"}`)
			case n == 6:
				return answer(r, 200, `{"next_batch":"s6"}`)
			}
			if n == 8 {
				close(reached)
			}
			<-r.Context().Done()
			return nil, r.Context().Err()
		})
		cli, err := matrix.NewClient("http://hs.test", "@bot:hs.test", "token")
		if err != nil {
			t.Fatal(err)
		}
		cli.Client.Transport = hs
		in := &matrix.Inbox{Store: st, Ingest: ingest.New(st, ingest.Options{}), Client: cli}
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- in.Sync(sctx) }()
		<-reached
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if tok, err := st.MatrixSyncToken(context.Background(), "sync:@bot:hs.test"); err != nil || tok != "s6" {
			t.Fatalf("stored since token %q, %v; want s6", tok, err)
		}
		for i, want := range []struct{ low, top time.Duration }{
			{7 * time.Second, 7 * time.Second},        // 429: what it asked
			{7 * time.Second, 7 * time.Second},        // 429 again
			{2 * time.Second, 4 * time.Second},        // third error in a row
			{4 * time.Second, 8 * time.Second},        // fourth
			{8 * time.Second, 16 * time.Second},       // fifth
			{0, 0},                                    // after the success: at once
			{500 * time.Millisecond, 1 * time.Second}, // the count starts again
		} {
			if gap := at[i+1].Sub(at[i]); gap < want.low || gap > want.top {
				t.Errorf("wait before sync %d: %v, want within [%v, %v]", i+2, gap, want.low, want.top)
			}
		}
	})
}
