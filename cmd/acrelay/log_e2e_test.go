package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

// logEngine is one store engine for the served relay: its serve flags,
// an opener for seeding before serve, and SQL run on it directly (the
// way an operator, or an intruder, edits the store behind the relay).
type logEngine struct {
	name string
	args []string
	open func(t *testing.T) store.Store
	exec func(t *testing.T, sqliteQuery, postgresQuery string, args ...any)
}

func logEngines(t *testing.T) []logEngine {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "acrelay.db")
	engines := []logEngine{{
		name: "sqlite",
		args: []string{"--data-dir", dir},
		open: func(t *testing.T) store.Store {
			st, err := sqlite.Open(context.Background(), db, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		exec: func(t *testing.T, q, _ string, args ...any) {
			t.Helper()
			raw, err := sql.Open("sqlite", db)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.Exec(q, args...); err != nil {
				t.Fatal(err)
			}
		},
	}}
	if admin := os.Getenv("ACRELAY_TEST_DATABASE_URL"); admin != "" && postgresOpener != nil {
		url := freshDatabase(t, admin)
		engines = append(engines, logEngine{
			name: "postgres",
			args: []string{"--database-url", url},
			open: func(t *testing.T) store.Store {
				st, err := postgresOpener(context.Background(), url, slog.New(slog.DiscardHandler), nil)
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			exec: func(t *testing.T, _, q string, args ...any) {
				t.Helper()
				conn, err := pgx.Connect(context.Background(), url)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				if _, err := conn.Exec(context.Background(), q, args...); err != nil {
					t.Fatal(err)
				}
			},
		})
	} else {
		t.Log("PostgreSQL not tested: ACRELAY_TEST_DATABASE_URL not set")
	}
	return engines
}

// waitCheckpoint polls the log until its checkpoint covers size records.
func waitCheckpoint(t *testing.T, l *client.Log, size int64, within time.Duration) *client.Checkpoint {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		cp, err := l.Checkpoint(context.Background())
		if err == nil && cp.Size >= size {
			return cp
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of size %d within %s (last: %+v, %v)", size, within, cp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLogServedRelay: `acrelay serve` on each engine logs every record;
// acrelay audit passes on the honest relay; after a record's bytes, a
// receipt and a row are edited in the store directly, audit --all fails
// naming the first, a reader checking inclusion refuses the two changed
// records and sees the deleted one missing, and the tree itself stays
// intact (a new record still audits against the old checkpoints).
func TestLogServedRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	const op = "log-operator-token"
	for _, eng := range logEngines(t) {
		t.Run(eng.name, func(t *testing.T) {
			rp := startRelay(t, bin, eng.args, "ACRELAY_OPERATOR_TOKEN="+op)
			p := registerProject(t, rp.url, op)
			for i := range 30 {
				p.post(t, rp.url, fmt.Sprintf("event %d", i))
			}
			c, err := client.New(rp.url, p.token)
			if err != nil {
				t.Fatal(err)
			}
			vkey, err := c.LogKey(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			v, _ := note.NewVerifier(vkey)
			l := c.Log(p.id, v)
			cp30 := waitCheckpoint(t, l, 30, 10*time.Second)

			state := filepath.Join(t.TempDir(), "audit.json")
			args := []string{"--url", rp.url, "--project", p.id, "--token", p.token, "--state", state, "--log-key", vkey}
			stdout, _, err := runAgent(t, newAuditCmd(), "", args...)
			if err != nil || !strings.HasSuffix(stdout, "entries      received_seq 1..30: 30 checked (leaf hash, canonical record, received_seq)\nOK\n") {
				t.Fatalf("audit of the honest relay: %v\n%s", err, stdout)
			}

			eng.exec(t, `UPDATE events SET canonical = CAST(replace(CAST(canonical AS TEXT), 'event 4', 'event X') AS BLOB) WHERE project_id = ? AND received_seq = 5`,
				`UPDATE events SET canonical = convert_to(replace(convert_from(canonical, 'UTF8'), 'event 4', 'event X'), 'UTF8') WHERE project_id = $1 AND received_seq = 5`, p.id)
			eng.exec(t, `UPDATE events SET received_at = '2020-01-02T03:04:05.678Z' WHERE project_id = ? AND received_seq = 9`,
				`UPDATE events SET received_at = '2020-01-02T03:04:05.678Z' WHERE project_id = $1 AND received_seq = 9`, p.id)
			eng.exec(t, `DELETE FROM events WHERE project_id = ? AND received_seq = 20`,
				`DELETE FROM events WHERE project_id = $1 AND received_seq = 20`, p.id)

			stdout, _, err = runAgent(t, newAuditCmd(), "", append(args, "--all")...)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 1 ||
				!strings.HasSuffix(stdout, "FAIL         record not included in the log: entry 4 (received_seq 5) of bundle tile/entries/000.p/30 does not hash to the tree's leaf\n") {
				t.Fatalf("audit --all of the edited store: %v\n%s", err, stdout)
			}

			ic := c.NewInclusionChecker(v)
			var refused []int64
			var seqs []int64
			for rec, err := range c.Events(t.Context(), client.EventsQuery{RepositoryID: "repo:mp", Limit: 200}) {
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, rec.Receipt.ReceivedSeq)
				if err := ic.Check(t.Context(), rec); err != nil {
					if !errors.Is(err, client.ErrNotIncluded) {
						t.Fatalf("record %d: %v", rec.Receipt.ReceivedSeq, err)
					}
					refused = append(refused, rec.Receipt.ReceivedSeq)
				}
			}
			if fmt.Sprint(refused) != "[5 9]" || len(seqs) != 29 || seqs[19] != 21 {
				t.Fatalf("reader refused %v of %d records read (%v)", refused, len(seqs), seqs)
			}

			// The tree was not touched: a new record is logged, the new
			// checkpoint is consistent with the old, the record included.
			p.post(t, rp.url, "after the edit")
			cp31 := waitCheckpoint(t, l, 31, 10*time.Second)
			if err := l.CheckConsistency(t.Context(), cp30, cp31); err != nil {
				t.Fatal(err)
			}
			page, err := c.EventsPage(t.Context(), client.EventsQuery{RepositoryID: "repo:mp", After: 30})
			if err != nil || len(page.Records) != 1 {
				t.Fatalf("record 31: %+v, %v", page, err)
			}
			if err := ic.Check(t.Context(), page.Records[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// seedLog stores n signed records in a new project through the store's
// page append (AppendPageAt, the path federation's backfill takes), one
// transaction per page of 200, and returns the project and a read token.
// 200 is federation's page: on PostgreSQL each record of a page rewrites
// the project's head row inside the page's transaction, so a page of
// 1000 cost about five times more per record than a page of 200 on the
// shared machine, and pages of 50 paid a commit flush per few records.
func seedLog(t *testing.T, st store.Store, n int) (projectID, token string) {
	t.Helper()
	ctx := context.Background()
	proj, err := registry.CreateProject(ctx, st, "")
	if err != nil {
		t.Fatal(err)
	}
	ident, err := registry.CreateIdentity(ctx, st, proj.ID, "", "seed")
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, err := registry.AddKey(ctx, st, ident, "", correspondence.EncodePublicKey(pub))
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := registry.CreateToken(ctx, st, proj.ID, []string{store.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	session := newTestUUID()
	at := time.Now()
	for done := 0; done < n; {
		page := make([]store.ForeignAppend, min(200, n-done))
		for i := range page {
			seq := done + i + 1
			ev := &correspondence.Event{ProjectID: proj.ID, RepositoryID: "repo:seed", ThreadID: "t" + strconv.Itoa(seq%7),
				Sender: correspondence.Sender{IdentityID: ident.ID, SigningKeyID: key.ID, DeviceID: session, SessionID: session},
				Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: int64(seq),
				IssuedAt: correspondence.FormatTimestamp(at), Scope: correspondence.Scope{Paths: []string{"."}},
				Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("record " + strconv.Itoa(seq))})}
			if err := ev.Sign(priv); err != nil {
				t.Fatal(err)
			}
			b, err := ev.CanonicalJSON()
			if err != nil {
				t.Fatal(err)
			}
			page[i] = store.ForeignAppend{Event: ev, Canonical: b, At: at}
		}
		for i, o := range st.AppendPageAt(ctx, page) {
			if o.Err != nil {
				t.Fatalf("seed record %d: %v", done+i+1, o.Err)
			}
		}
		done += len(page)
	}
	return proj.ID, tok
}

// TestLogTiles100k: a project of 100,000 records stored before serve
// starts is integrated by the served relay's sequencer, and its tiles and
// entry bundles read back to every record: each entry hashes to its leaf
// in tiles authenticated against the checkpoint and is byte for byte the
// record the events route serves. Both engines hold 100,000 records (391
// bundles, three tile levels). Time on the shared 2-core machine at load
// average 4-6 (a full CI run beside it): SQLite 43 s (seeding 29 s);
// PostgreSQL 2 min 43 s (seeding 2 min 27 s, 1.5 ms per record: the page
// append takes four round trips per record, each waiting for a core;
// integration by the sequencer 2 s; the read-back 14 s). At load average
// 7-11 PostgreSQL took 6 min 5 s (seeding 5 min 30 s). The store has no
// faster bulk path; pages of 1000 had cost over ten minutes (see seedLog).
func TestLogTiles100k(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	for _, eng := range logEngines(t) {
		const n = int64(100000)
		t.Run(eng.name, func(t *testing.T) {
			st := eng.open(t)
			start := time.Now()
			pid, tok := seedLog(t, st, int(n))
			st.Close()
			t.Logf("seeded %d records in %s", n, time.Since(start).Round(time.Second))
			rp := startRelay(t, bin, eng.args)
			c, err := client.New(rp.url, tok)
			if err != nil {
				t.Fatal(err)
			}
			vkey, err := c.LogKey(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			v, _ := note.NewVerifier(vkey)
			l := c.Log(pid, v)
			cp := waitCheckpoint(t, l, n, 3*time.Minute)
			t.Logf("integrated by %s", time.Since(start).Round(time.Second))
			if cp.Size != n {
				t.Fatalf("checkpoint size %d", cp.Size)
			}
			next := c.Events(t.Context(), client.EventsQuery{RepositoryID: "repo:seed", Limit: 200})
			pull, stop := iter.Pull2(next)
			defer stop()
			count := int64(0)
			for e, err := range l.Entries(t.Context(), cp, 0, n) {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.CheckEntry(e); err != nil {
					t.Fatal(err)
				}
				rec, err, ok := pull()
				if !ok || err != nil {
					t.Fatalf("events route ended at %d: %v", e.Index, err)
				}
				if string(client.RecordLeaf(rec)) != string(e.Data) {
					t.Fatalf("entry %d is not the record served:\n%s\n%s", e.Index, e.Data, client.RecordLeaf(rec))
				}
				count++
			}
			if count != n {
				t.Fatalf("%d entries", count)
			}
		})
	}
}
