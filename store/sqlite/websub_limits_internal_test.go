package sqlite

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/store"
)

// TestCountWebSubPlan: every count of CountWebSub is an index search
// (migration 0014), never a scan of the subscriptions or verifications.
func TestCountWebSubPlan(t *testing.T) {
	db := openInternal(t, filepath.Join(t.TempDir(), "plan.db"))
	rows, err := db.w.Query("EXPLAIN QUERY PLAN "+countWebSub, "p", "t", "c", "h")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	rows.Close()
	joined := strings.Join(plan, "\n")
	for _, step := range plan {
		if strings.HasPrefix(step, "SCAN") && step != "SCAN CONSTANT ROW" {
			t.Errorf("scans: %q\n%s", step, joined)
		}
	}
	for _, idx := range []string{"websub_subscriptions_key", "websub_subscriptions_live", "websub_subscriptions_host",
		"websub_verifications_topic", "websub_verifications_host"} {
		if !strings.Contains(joined, idx) {
			t.Errorf("plan does not use %s:\n%s", idx, joined)
		}
	}
}

// FuzzCallbackHost: the callback_host column SQLite computes (migration
// 0014) is store.CallbackHost of the callback, for any valid UTF-8 string
// (the hub stores only parsed URLs; SQLite counts characters where Go
// counts bytes, which agree on valid UTF-8).
func FuzzCallbackHost(f *testing.F) {
	for _, s := range []string{"https://CB.example:8443/a?b=c", "http://h?x=/y", "http://h", "https://[::1]:9/x",
		"no scheme", "://", "a://b://c/d", "HTTP://ÉX.example/é", "http://h/?", ""} {
		f.Add(s)
	}
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(f.TempDir(), "fuzz.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	p, err := db.CreateProject(ctx, uuid.NewString())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, callback string) {
		if !utf8.ValidString(callback) || strings.ContainsRune(callback, 0) {
			t.Skip()
		}
		v := store.Verification{ID: uuid.NewString(), ProjectID: p.ID, Mode: "subscribe", Topic: "t", RepositoryID: "r",
			Format: "atom", Callback: callback}
		if err := db.AddVerification(ctx, v); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.rd.QueryRowContext(ctx, `SELECT callback_host FROM websub_verifications WHERE id = ?`, v.ID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := store.CallbackHost(callback); got != want {
			t.Fatalf("callback %q: SQLite callback_host %q, store.CallbackHost %q", callback, got, want)
		}
	})
}
