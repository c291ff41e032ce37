package relay_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// TestReadyz: 200 with each courier's status while the store answers and
// is migrated; 503 naming what failed when a migration is missing from
// the database or the store is closed; the cause never in the body.
func TestReadyz(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acrelay.db")
	st, err := sqlite.Open(context.Background(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	status := func() []couriers.Status {
		return []couriers.Status{{Courier: "matrix", Projects: 1, Targets: 1, Behind: 7, Failing: 1, LastError: "homeserver answered 502"}}
	}
	srv := httptest.NewServer(relay.New(st, relay.Config{OperatorToken: operatorToken, Couriers: status}).Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, url: srv.URL}

	type body struct {
		Ready    bool              `json:"ready"`
		Store    string            `json:"store"`
		Couriers []couriers.Status `json:"couriers"`
	}
	get := func(want int) body {
		t.Helper()
		r := e.do("GET", "/readyz", "", nil)
		mustStatus(t, r, want)
		var b body
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("readyz body %s: %v", r.Body, err)
		}
		return b
	}
	b := get(http.StatusOK)
	if !b.Ready || b.Store != "ok" || len(b.Couriers) != 1 || b.Couriers[0] != status()[0] {
		t.Fatalf("ready body %+v", b)
	}

	// The newest migration's row gone: the schema is behind the binary.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var v int64
	if err := raw.QueryRow(`SELECT MAX(version_id) FROM goose_db_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM goose_db_version WHERE version_id = ?`, v); err != nil {
		t.Fatal(err)
	}
	if b := get(http.StatusServiceUnavailable); b.Ready || b.Store != "migrations_pending" {
		t.Fatalf("pending body %+v", b)
	}
	if _, err := raw.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)`, v); err != nil {
		t.Fatal(err)
	}
	get(http.StatusOK)

	st.Close()
	if b := get(http.StatusServiceUnavailable); b.Ready || b.Store != "unreachable" {
		t.Fatalf("closed body %+v", b)
	}
	// /healthz stays the liveness probe.
	mustStatus(t, e.do("GET", "/healthz", "", nil), http.StatusServiceUnavailable)
}
