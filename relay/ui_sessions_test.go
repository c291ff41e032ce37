package relay_test

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/sqlite"
)

// uiEnvOn is a relay on st (one of several on one database) behind a real
// HTTP server.
func uiEnvOn(t *testing.T, st store.Store) *uiEnv {
	t.Helper()
	logs := &syncBuffer{}
	srv := httptest.NewUnstartedServer(nil)
	s := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://" + srv.Listener.Addr().String(),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	srv.Config.Handler = s.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(s.CloseStreams)
	return &uiEnv{env: &env{t: t, st: st, srv: srv, url: srv.URL}, logs: logs}
}

// TestUISessionsAcrossRelays: two relay servers, each with its own
// connection to one database (as two processes behind a load balancer):
// a browser signed in on one is signed in on the other, signs out on
// the other, and the store keeps only the session token's SHA-256; an
// expired session is refused and deleted.
func TestUISessionsAcrossRelays(t *testing.T) {
	engines := []struct {
		name string
		open func(t *testing.T) (store.Store, store.Store)
	}{
		{"sqlite", func(t *testing.T) (store.Store, store.Store) {
			path := filepath.Join(t.TempDir(), "acrelay.db")
			return openAt(t, func() (store.Store, error) {
				return sqlite.Open(context.Background(), path, slog.New(slog.DiscardHandler))
			})
		}},
		{"postgres", func(t *testing.T) (store.Store, store.Store) {
			dsn := pgtest.FreshDatabase(t)
			return openAt(t, func() (store.Store, error) {
				return postgres.Open(context.Background(), dsn, slog.New(slog.DiscardHandler))
			})
		}},
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			stA, stB := eng.open(t)
			a, b := uiEnvOn(t, stA), uiEnvOn(t, stB)
			pid, _ := a.newProject("")
			readTok := a.newToken(pid, "read")
			page := "/ui/projects/" + pid + "?repository_id=repo-1"

			sess := a.signIn(readTok, "repo-1")
			onA := a.ui("GET", page, nil, []*http.Cookie{sess})
			mustStatus(t, onA, 200)
			onB := b.ui("GET", page, nil, []*http.Cookie{sess})
			mustStatus(t, onB, 200)
			if csrfOf(t, onA) != csrfOf(t, onB) {
				t.Errorf("the sign-out CSRF value differs between the relays")
			}

			// Only the hash is stored: the cookie value is no key.
			h := sha256.Sum256([]byte(sess.Value))
			got, err := stB.UISession(context.Background(), h[:])
			if err != nil || got.ProjectID != pid || got.TokenID == "" {
				t.Fatalf("stored session by hash = %+v, %v", got, err)
			}
			if d := got.ExpiresAt.Sub(got.CreatedAt); d != 12*time.Hour {
				t.Errorf("session lifetime %v, want 12h", d)
			}
			if _, err := stB.UISession(context.Background(), []byte(sess.Value)); err == nil {
				t.Error("the session token itself is a stored key")
			}

			// Signed out on B: dead on A too.
			out := b.ui("POST", "/ui/signout", url.Values{"csrf": {csrfOf(t, onB)}}, []*http.Cookie{sess})
			mustStatus(t, out, 303)
			mustStatus(t, a.ui("GET", page, nil, []*http.Cookie{sess}), 303)
			mustStatus(t, a.ui("GET", "/ui/projects/"+pid+"/fragment?repository_id=repo-1", nil, []*http.Cookie{sess}), 401)

			// An expired session (as if signed in 13 hours ago) is refused
			// and deleted at once.
			const oldToken = "an-expired-session-token-of-forty-three-chr"
			oh := sha256.Sum256([]byte(oldToken))
			now := time.Now().UTC().Truncate(time.Millisecond)
			if err := stA.CreateUISession(context.Background(), store.UISession{Hash: oh[:], ProjectID: pid, TokenID: got.TokenID,
				CreatedAt: now.Add(-13 * time.Hour), ExpiresAt: now.Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			old := &http.Cookie{Name: "acrelay_ui_session", Value: oldToken}
			mustStatus(t, b.ui("GET", page, nil, []*http.Cookie{old}), 303)
			if _, err := stA.UISession(context.Background(), oh[:]); err == nil {
				t.Error("the expired session is still stored after it was refused")
			}
		})
	}
}

// openAt opens two stores on one database.
func openAt(t *testing.T, open func() (store.Store, error)) (store.Store, store.Store) {
	t.Helper()
	var out [2]store.Store
	for i := range out {
		st, err := open()
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		out[i] = st
	}
	return out[0], out[1]
}
