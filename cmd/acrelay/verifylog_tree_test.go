package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store/storetest"
)

// treeStore is a store on one engine holding a project of 300 records
// whose tree the sequencer integrated, with the arguments verify-log and
// log-key show take to open it, and a way to run SQL on it directly.
type treeStore struct {
	args    []string
	project string
	exec    func(t *testing.T, q string, args ...any)
}

func newTreeStore(t *testing.T, engine string) treeStore {
	t.Helper()
	ctx := context.Background()
	var ts treeStore
	sc := storeConfig{SQLiteSync: "fdatasync", SQLiteMaxBatch: 128, Create: true}
	switch engine {
	case "sqlite":
		sc.DataDir = t.TempDir()
		ts.args = []string{"--data-dir", sc.DataDir}
		path := filepath.Join(sc.DataDir, "acrelay.db")
		ts.exec = func(t *testing.T, q string, args ...any) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(q, args...); err != nil {
				t.Fatal(err)
			}
		}
	case "postgres":
		sc.DatabaseURL = pgtest.FreshDatabase(t)
		ts.args = []string{"--database-url", sc.DatabaseURL}
		ts.exec = func(t *testing.T, q string, args ...any) {
			c, err := pgx.Connect(ctx, sc.DatabaseURL)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			// As a tamperer with the database's owner role would: no
			// foreign-key triggers.
			if _, err := c.Exec(ctx, "SET session_replication_role = replica"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := openStore(ctx, sc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	ts.project = p.ID
	sg := storetest.NewSigner(t, p.ID).Register(t, st)
	for i := range 300 {
		ev, c := sg.Event(t, storetest.Spec{Summary: fmt.Sprintf("event %d", i)})
		if _, err := st.Append(ctx, ev, c); err != nil {
			t.Fatal(err)
		}
	}
	key, err := openLogKey(ctx, st, "https://relay.test/")
	if err != nil {
		t.Fatal(err)
	}
	head, err := sequencer.New(st, sequencer.Options{PublicURL: "https://relay.test/", Key: key}).Integrate(ctx, p.ID)
	if err != nil || head.Size != 300 {
		t.Fatalf("integrate: %d, %v", head.Size, err)
	}
	// Records appended after the last integration are not the tree's yet.
	ev, c := sg.Event(t, storetest.Spec{Summary: "after"})
	if _, err := st.Append(ctx, ev, c); err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestVerifyLogTree: verify-log checks the tree against the records on
// both engines, and names the first bad leaf after a record's bytes, a
// receipt or a row were changed in the database directly.
func TestVerifyLogTree(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			if engine == "postgres" && os.Getenv(pgtest.EnvVar) == "" {
				t.Skip(pgtest.SkipReason)
			}
			ts := newTreeStore(t, engine)
			stdout, _, err := runAgent(t, newVerifyLogCmd(), "", ts.args...)
			if err != nil || stdout != "acrelay: verify-log: 301 event(s) verified, 300 tree leaf/leaves checked against them, no problem\n" {
				t.Fatalf("verify-log on an intact store: %v\n%s", err, stdout)
			}
			show, _, err := runAgent(t, newLogKeyCmd(), "", append([]string{"show"}, ts.args...)...)
			if err != nil || !strings.HasPrefix(show, "relay.test+") || strings.Count(show, "+") < 2 || strings.Contains(show, "PRIVATE") {
				t.Fatalf("log-key show: %v %q", err, show)
			}

			receipt, bytesSQL, deleteSQL := `UPDATE events SET received_at = '2000-01-01T00:00:00.000Z' WHERE project_id = ? AND received_seq = ?`,
				`UPDATE events SET canonical = CAST(replace(CAST(canonical AS TEXT), 'event 6', 'Event 6') AS BLOB) WHERE project_id = ? AND received_seq = ?`,
				`DELETE FROM events WHERE project_id = ? AND received_seq = ?`
			if engine == "postgres" {
				receipt = `UPDATE events SET received_at = received_at + interval '1 millisecond' WHERE project_id = $1 AND received_seq = $2`
				bytesSQL = `UPDATE events SET canonical = convert_to(replace(convert_from(canonical, 'UTF8'), 'event 6', 'Event 6'), 'UTF8') WHERE project_id = $1 AND received_seq = $2`
				deleteSQL = `DELETE FROM events WHERE project_id = $1 AND received_seq = $2`
			}
			cases := []struct {
				name  string
				q     string
				seq   int
				first string // the first line naming the tree
			}{
				{"receipt", receipt, 200, "received_seq 200: leaf 199: the record's bytes (event and receipt) hash to "},
				{"record_bytes", bytesSQL, 7, "received_seq 7: leaf 6: the record's bytes (event and receipt) hash to "},
				{"deleted_row", deleteSQL, 150, "received_seq 150: leaf 149: no stored record with received_seq 150 (1 leaf/leaves of the tree without a record here): a record was deleted after integration"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ts := newTreeStore(t, engine)
					ts.exec(t, tc.q, ts.project, tc.seq)
					stdout, _, err := runAgent(t, newVerifyLogCmd(), "", ts.args...)
					var ee *exitError
					if !errors.As(err, &ee) || ee.code != 1 {
						t.Fatalf("verify-log: %v, want exit 1\n%s", err, stdout)
					}
					t.Logf("verify-log reports:\n%s", stdout)
					var first string
					for _, l := range strings.Split(stdout, "\n") {
						if strings.Contains(l, "leaf") {
							first = l
							break
						}
					}
					if want := "project " + ts.project + " " + tc.first; !strings.HasPrefix(first, want) {
						t.Fatalf("first tree line %q, want prefix %q; output:\n%s", first, want, stdout)
					}
					if strings.Contains(stdout, "tree of 300 leaves:") {
						t.Errorf("a whole-tree problem besides the leaf's (tiles and checkpoint are intact):\n%s", stdout)
					}
				})
			}
		})
	}
}

// TestBackupCarriesLogKey: `acrelay backup` of a SQLite store carries the
// log key and the trees: the restored store shows the same verifier key
// and verify-log checks its tree against its records.
func TestBackupCarriesLogKey(t *testing.T) {
	ts := newTreeStore(t, "sqlite")
	out := filepath.Join(t.TempDir(), "snapshot.db")
	if _, _, err := runAgent(t, newBackupCmd(), "", append(ts.args, "--out", out)...); err != nil {
		t.Fatalf("backup: %v", err)
	}
	restored := t.TempDir()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "acrelay.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	src, _, err1 := runAgent(t, newLogKeyCmd(), "", append([]string{"show"}, ts.args...)...)
	dst, _, err2 := runAgent(t, newLogKeyCmd(), "", "show", "--data-dir", restored)
	if err1 != nil || err2 != nil || src != dst || !strings.HasPrefix(dst, "relay.test+") {
		t.Fatalf("log key %q (%v) restored as %q (%v)", src, err1, dst, err2)
	}
	stdout, _, err := runAgent(t, newVerifyLogCmd(), "", "--data-dir", restored)
	if err != nil || !strings.Contains(stdout, "301 event(s) verified, 300 tree leaf/leaves checked") {
		t.Fatalf("verify-log on the restore: %v\n%s", err, stdout)
	}
	// A store no relay has served has no log key to show.
	_, _, err = runAgent(t, newLogKeyCmd(), "", "show", "--data-dir", servedStore(t))
	if !errors.Is(err, errNoLogKey) {
		t.Fatalf("log-key show without a key: %v, want errNoLogKey", err)
	}
}
