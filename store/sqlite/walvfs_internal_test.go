//go:build linux

package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/acrelay/acrelay/store/storetest"
)

// Tests of the gathering VFS (walvfs.go). They read its process-wide
// counters, so none of them runs in parallel.

// TestGatheredCommitIsOneWrite: each commit's WAL frames (two writes a
// frame: header and page) reach the file in one pwrite(2); with
// DirectWALWrites the VFS is not used at all.
func TestGatheredCommitIsOneWrite(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			db, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "a.db"), nil, Options{DirectWALWrites: direct})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			g0, w0 := gathered.Load(), written.Load()
			const commits = 20
			for range commits {
				if _, err := db.CreateProject(context.Background(), storetest.NewUUID()); err != nil {
					t.Fatal(err)
				}
			}
			g, w := gathered.Load()-g0, written.Load()-w0
			if direct {
				if g != 0 || w != 0 {
					t.Fatalf("direct: the VFS gathered %d writes into %d; want none", g, w)
				}
				return
			}
			// A project row dirties at least its table's and its primary
			// key's leaf: ≥ 2 frames, ≥ 4 writes a commit.
			if w != commits || g < 4*commits {
				t.Fatalf("%d commits: SQLite issued %d WAL writes, the VFS made %d pwrite(2)s; want ≥ %d in exactly %d",
					commits, g, w, 4*commits, commits)
			}
		})
	}
}

// openGathered opens a plain connection pool on path through the
// gathering VFS, as the writer's; the cache is small so that a large
// transaction spills frames into the WAL before it commits.
func openGathered(t *testing.T, path string) *sql.DB {
	t.Helper()
	name, err := gatherVFSRegistered()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?vfs="+name+"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=cache_size(-256)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func openPlain(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func integrityOK(t *testing.T, db *sql.DB) {
	t.Helper()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q, %v", res, err)
	}
}

// TestGatheredLargeTransaction: a transaction of several times what one
// WAL file gathers (written in pieces, and spilled before its commit) is
// read back whole by its own connection, by another one, and after the
// files are reopened.
func TestGatheredLargeTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.db")
	g := openGathered(t, path)
	if _, err := g.Exec("CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	blob := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 3000+i) }
	const rows = 1500 // ~5 MiB
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if _, err := tx.Exec("INSERT INTO blobs (id, b) VALUES (?, ?)", i, blob(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	check := func(db *sql.DB) {
		t.Helper()
		for _, i := range []int{0, 1, rows / 2, rows - 1} {
			var b []byte
			if err := db.QueryRow("SELECT b FROM blobs WHERE id = ?", i).Scan(&b); err != nil || !bytes.Equal(b, blob(i)) {
				t.Fatalf("row %d: %d bytes, %v", i, len(b), err)
			}
		}
		var n int
		if err := db.QueryRow("SELECT count(*) FROM blobs").Scan(&n); err != nil || n != rows {
			t.Fatalf("count: %d, %v", n, err)
		}
		integrityOK(t, db)
	}
	check(g)
	check(openPlain(t, path))
	g.Close()
	check(openPlain(t, path))
}

// TestGatheredRollbackBeforeAnotherWriter: a transaction large enough to
// spill frames into the WAL is rolled back with some of them still
// gathered; another writer (a plain connection, as another process's
// admin command) then commits. The gathered bytes must have been written
// before the write lock passed on, never later over the other writer's
// frames: the other writer's rows survive the first connection's next
// use, and the database checks out.
func TestGatheredRollbackBeforeAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rb.db")
	g := openGathered(t, path)
	p := openPlain(t, path)
	if _, err := g.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 800 { // ~2.4 MiB against a 256 KiB cache: it spills
		if _, err := tx.Exec("INSERT INTO t (id, b) VALUES (?, ?)", i, bytes.Repeat([]byte{'g'}, 3000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := p.Exec("INSERT INTO t (id, b) VALUES (?, ?)", i, bytes.Repeat([]byte{'p'}, 3000)); err != nil {
			t.Fatal(err)
		}
	}
	// The gathered connection's next statements read and write the WAL.
	if _, err := g.Exec("INSERT INTO t (id, b) VALUES (1000, x'00')"); err != nil {
		t.Fatal(err)
	}
	fresh := openPlain(t, path)
	var n int
	if err := fresh.QueryRow("SELECT count(*) FROM t WHERE b = ?", bytes.Repeat([]byte{'p'}, 3000)).Scan(&n); err != nil || n != 200 {
		t.Fatalf("the other writer's rows: %d of 200, %v", n, err)
	}
	integrityOK(t, fresh)
	integrityOK(t, g)
}

// TestGatheredWriteFailureFailsTheCommit: when the gathered bytes cannot
// be written, the commit fails with SQLite's error and nothing of it is
// stored; the connection works again once the file does.
func TestGatheredWriteFailureFailsTheCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fail.db")
	g := openGathered(t, path)
	if _, err := g.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Exec("INSERT INTO t VALUES (1, 'kept')"); err != nil {
		t.Fatal(err)
	}
	var w *walFile
	gatherMu.Lock()
	for _, f := range walFiles {
		if f.name == path+"-wal" {
			w = f
		}
	}
	gatherMu.Unlock()
	if w == nil {
		t.Fatal("the WAL file is not open through the gathering VFS")
	}
	// A descriptor open read-only: pwrite(2) fails with EBADF.
	ro, err := os.Open(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	good := w.fd
	w.fd = int(ro.Fd())
	_, err = g.Exec("INSERT INTO t VALUES (2, 'lost')")
	w.fd = good
	if err == nil {
		t.Fatal("commit succeeded although its WAL bytes could not be written")
	}
	if _, err := g.Exec("INSERT INTO t VALUES (3, 'after')"); err != nil {
		t.Fatal(err)
	}
	fresh := openPlain(t, path)
	var got []string
	rows, err := fresh.Query("SELECT v FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v string
		rows.Scan(&v)
		got = append(got, v)
	}
	rows.Close()
	if fmt.Sprint(got) != "[kept after]" {
		t.Fatalf("rows %v, want [kept after]", got)
	}
	integrityOK(t, fresh)
}

// TestGatheredBytesWrittenAtLockChange: bytes still gathered when the
// connection next changes a shared-memory lock (as at the end of a
// rolled-back transaction whose last frames were spilled but never read
// back) are written first, so they can never land after another writer's
// frames. The pending bytes are staged by hand, past the WAL's end.
func TestGatheredBytesWrittenAtLockChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock.db")
	g := openGathered(t, path)
	if _, err := g.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var w *walFile
	gatherMu.Lock()
	for _, f := range walFiles {
		if f.name == path+"-wal" {
			w = f
		}
	}
	linked := w != nil && w.db != nil && w.db.wal == w
	gatherMu.Unlock()
	if !linked {
		t.Fatal("the WAL file is not open through the gathering VFS, or not linked to its database file")
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	w.off, w.buf = fi.Size(), append(w.buf[:0], bytes.Repeat([]byte{0}, 4120)...)
	var n int
	if err := g.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if len(w.buf) != 0 {
		t.Fatalf("%d gathered bytes outlived a read transaction's locks", len(w.buf))
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() != w.off+4120 {
		t.Fatalf("WAL size after the flush: %v, %v; want %d", fi.Size(), err, w.off+4120)
	}
}
