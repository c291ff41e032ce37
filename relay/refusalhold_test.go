package relay_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/wire"
)

// TestRefusalHold: a client-rate refusal is written after the client's
// bucket would have a token again (here 2 s at 0.5/s), at most
// RefusalHold; the 429, its code and Retry-After are those of an
// immediate refusal; with every hold slot taken a refusal is answered at
// once. On fake time (testing/synctest): the store is opened outside the
// bubble and refused requests never reach it.
func TestRefusalHold(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hold     time.Duration
		holdMax  int
		want     time.Duration // how long the third (refused) request is held
		parallel int           // refused requests at once
	}{
		{"held until a token", 10 * time.Second, 4, 2 * time.Second, 1},
		{"held at most RefusalHold", 500 * time.Millisecond, 4, 500 * time.Millisecond, 1},
		{"no hold", 0, 0, 0, 1},
		{"slots taken: at once", time.Second, 1, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openTestStore(t)
			h := hub.New(st, hub.Options{PublicURL: "http://relay.test", Logger: slog.New(slog.DiscardHandler), RevokedCheck: -1})
			srv := relay.New(st, relay.Config{PublicURL: "http://relay.test", Hub: h,
				Limits: relay.RateLimits{ClientRate: 0.5, ClientBurst: 2, RefusalHold: tc.hold, RefusalHoldMax: tc.holdMax}})
			handler := srv.Handler()
			post := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest("POST", hub.HubPath, strings.NewReader("hub.mode=subscribe"))
				req.RemoteAddr = "192.0.2.7:4000"
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, req)
				return rec
			}
			synctest.Test(t, func(t *testing.T) {
				for i := range 2 {
					if rec := post(); rec.Code != http.StatusBadRequest {
						t.Fatalf("request %d: status %d, want 400 (within the burst)", i+1, rec.Code)
					}
				}
				start := time.Now()
				done := make(chan time.Duration, tc.parallel)
				recs := make(chan *httptest.ResponseRecorder, tc.parallel)
				for range tc.parallel {
					go func() {
						rec := post()
						done <- time.Since(start)
						recs <- rec
					}()
				}
				var shortest time.Duration = -1
				for range tc.parallel {
					d := <-done
					if shortest < 0 || d < shortest {
						shortest = d
					}
					rec := <-recs
					if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"error":"`+wire.CodeRateLimited+`"`) {
						t.Fatalf("refusal: status %d body %s", rec.Code, rec.Body)
					}
					if got := rec.Header().Get("Retry-After"); got != "2" {
						t.Fatalf("Retry-After %q, want 2", got)
					}
				}
				if shortest != tc.want {
					t.Fatalf("refusal answered after %v, want %v", shortest, tc.want)
				}
			})
		})
	}
}
