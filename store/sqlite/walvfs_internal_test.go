//go:build linux

package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"modernc.org/libc"
	lib "modernc.org/sqlite/lib"

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
	db, err := sql.Open("sqlite", path+"?vfs="+name+"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=cache_size(-256)&_pragma=busy_timeout(500)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func openPlain(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(500)")
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
// or dropped before the write lock passed on, never written later over
// the other writer's frames: the other writer's rows survive the first connection's next
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
	w := gatheredWAL(t, path)
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
// connection next takes a shared-memory lock (here a read transaction's)
// are written first, so nothing gathered outlives a lock change (giving
// up the write lock drops them instead:
// TestGatheredUnlockAfterFailureReleasesLock). The pending bytes are
// staged by hand, past the WAL's end.
func TestGatheredBytesWrittenAtLockChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock.db")
	g := openGathered(t, path)
	if _, err := g.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	w := gatheredWAL(t, path)
	gatherMu.Lock()
	linked := w.db != nil && w.db.wal == w
	gatherMu.Unlock()
	if !linked {
		t.Fatal("the WAL file is not linked to its database file")
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

// gatheredWAL is the gathering VFS's state of path's WAL file.
func gatheredWAL(t *testing.T, path string) *walFile {
	t.Helper()
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
	return w
}

// diskFull swaps w's descriptor for one on /dev/full (every write fails
// with ENOSPC) until the returned function restores it.
func diskFull(t *testing.T, w *walFile) (restore func()) {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	good := w.fd
	w.fd = int(full.Fd())
	return func() { w.fd = good; full.Close() }
}

// TestGatheredLateWriteFailureRollsBack: frames spilled by an open
// transaction are still gathered when a later read finds the disk full.
// SQLite already counts them as written, so the transaction must not
// commit without them: the failure is an I/O error (which rolls the whole
// transaction back), not SQLITE_FULL (which would roll back only the
// statement, and writer.go's replay would then commit the rest).
func TestGatheredLateWriteFailureRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "enospc.db")
	g := openGathered(t, path)
	for _, q := range []string{
		"CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)",
		"CREATE TABLE u (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)",
	} {
		if _, err := g.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	blob := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 0x5a}, 1000) }
	const rows = 600 // ~1.8 MiB against a 256 KiB cache
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range rows {
		if _, err := tx.Exec("INSERT INTO t VALUES (?, ?)", i, blob(i)); err != nil {
			t.Fatal(err)
		}
	}
	w := gatheredWAL(t, path)
	if len(w.buf) == 0 {
		t.Fatal("no spilled frames are gathered: the test does not reach its case")
	}
	restore := diskFull(t, w)
	if _, err := tx.Exec("SAVEPOINT a"); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec("INSERT INTO u SELECT id, length(b) FROM t") // reads the spilled pages back
	restore()
	if err == nil {
		t.Fatal("a statement succeeded although the transaction's frames could not be written")
	}
	// What writer.go does with a failed job in a replayed batch.
	committed := false
	if _, err := tx.Exec("ROLLBACK TO a"); err == nil {
		if _, err := tx.Exec("RELEASE a"); err == nil {
			committed = tx.Commit() == nil
		}
	}
	if committed {
		t.Fatal("the transaction committed after its gathered bytes were lost")
	}
	tx.Rollback() // hands the connection back to the pool
	fresh := openPlain(t, path)
	integrityOK(t, fresh)
	var n int
	if err := fresh.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows of the failed transaction: %d, %v", n, err)
	}
	// The disk has room again: the connection writes.
	if _, err := g.Exec("INSERT INTO t VALUES (1, x'01')"); err != nil {
		t.Fatalf("after the failure: %v", err)
	}
	integrityOK(t, g)
}

// TestGatheredUnlockAfterFailureReleasesLock: a transaction rolls back
// with spilled frames gathered while the disk is full. Giving up the write
// lock drops those bytes (they belong to the rolled-back transaction) and
// always releases the lock: both this connection and another writer can
// write afterwards.
func TestGatheredUnlockAfterFailureReleasesLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unlock.db")
	g := openGathered(t, path)
	p := openPlain(t, path)
	if _, err := g.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if _, err := g.Exec("INSERT INTO t VALUES (?, ?)", i, bytes.Repeat([]byte{'x'}, 3000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	// Same-size rewrites: no page-count change, so the rollback reads
	// nothing back before it gives up the write lock.
	if _, err := tx.Exec("UPDATE t SET b = zeroblob(3000)"); err != nil {
		t.Fatal(err)
	}
	w := gatheredWAL(t, path)
	if len(w.buf) == 0 {
		t.Fatal("no spilled frames are gathered: the test does not reach its case")
	}
	restore := diskFull(t, w)
	rbErr := tx.Rollback()
	restore()
	if rbErr != nil {
		t.Logf("rollback with the disk full: %v", rbErr)
	}
	if _, err := p.Exec("INSERT INTO t VALUES (1001, x'00')"); err != nil {
		t.Fatalf("another writer after the rollback: %v", err)
	}
	if _, err := g.Exec("INSERT INTO t VALUES (1002, x'00')"); err != nil {
		t.Fatalf("the gathered connection after the rollback: %v", err)
	}
	var n int
	if err := p.QueryRow("SELECT count(*) FROM t WHERE b = zeroblob(3000)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows of the rolled-back update: %d, %v", n, err)
	}
	integrityOK(t, p)
}

// openPool opens a pool of n connections on dsn, closed in Cleanup.
func openPool(t *testing.T, dsn string, n int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(n)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestGatheredStress: a gathered writer committing and rolling back large
// transactions (with spills and in-place frame rewrites), concurrent
// readers checking contents inside their snapshots, checkpoints of every
// mode from the writer and from another connection, a writer on the
// default VFS (another process), closing and reopening; then integrity and
// content checks. ACRELAY_GATHER_STRESS sets how long (default 2s).
func TestGatheredStress(t *testing.T) {
	if _, err := gatherVFSRegistered(); err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Skip("a timed stress run; skipped with -short")
	}
	dur := 2 * time.Second
	if s := os.Getenv("ACRELAY_GATHER_STRESS"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("ACRELAY_GATHER_STRESS: %v", err)
		}
		dur = d
	}
	path := filepath.Join(t.TempDir(), "stress.db")
	vfsParam := "vfs=" + gatherVFSName + "&"
	gdsn := path + "?" + vfsParam + "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(262144)&_pragma=cache_size(-300)&_txlock=immediate"
	pdsn := path + "?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)"
	openW := func() *sql.DB {
		db, err := sql.Open("sqlite", gdsn)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		return db
	}
	w := openW()
	if _, err := w.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, ver INTEGER NOT NULL, b BLOB NOT NULL); CREATE TABLE meta (k INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO meta VALUES (0, 0)"); err != nil {
		t.Fatal(err)
	}
	blob := func(id, ver int64) []byte {
		n := 500 + int((id*7919+ver*104729)%3500)
		b := make([]byte, n)
		x := uint32(id*2654435761 + ver*40503 + 1)
		for i := range b {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b[i] = byte(x)
		}
		return b
	}
	r := openPool(t, pdsn+"&_pragma=query_only(1)", 3)
	ck := openPool(t, pdsn, 1)
	fw := openPool(t, pdsn+"&_txlock=immediate", 1) // a foreign writer, default VFS

	var stop atomic.Bool
	var failures atomic.Int64
	var wg sync.WaitGroup
	fail := func(format string, args ...any) {
		failures.Add(1)
		t.Errorf(format, args...)
	}
	var nextID atomic.Int64
	nextID.Store(1)
	// commit adds rows and bumps meta.n by the count; rolled-back ones don't.
	work := func(db *sql.DB, rnd *rand.Rand, big bool) error {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		k := 1 + rnd.Intn(20)
		if big {
			k = 100 + rnd.Intn(500)
		}
		start := nextID.Add(int64(k)) - int64(k)
		for i := int64(0); i < int64(k); i++ {
			id := start + i
			if _, err := tx.Exec("INSERT INTO t VALUES (?, 0, ?)", id, blob(id, 0)); err != nil {
				return err
			}
		}
		// Rewrite some rows of this tx (frames already spilled are overwritten in place).
		for i := 0; i < k/3; i++ {
			id := start + int64(rnd.Intn(k))
			var ver int64
			if err := tx.QueryRow("SELECT ver FROM t WHERE id = ?", id).Scan(&ver); err != nil {
				return err
			}
			if _, err := tx.Exec("UPDATE t SET ver = ?, b = ? WHERE id = ?", ver+1, blob(id, ver+1), id); err != nil {
				return err
			}
		}
		// Update some older rows too.
		for i := 0; i < 3; i++ {
			id := 1 + rnd.Int63n(start)
			if _, err := tx.Exec("UPDATE t SET ver = ver + 1 WHERE id = ?", id); err != nil {
				return err
			}
			var ver int64
			if err := tx.QueryRow("SELECT ver FROM t WHERE id = ?", id).Scan(&ver); err != nil {
				if err == sql.ErrNoRows {
					continue
				}
				return err
			}
			if _, err := tx.Exec("UPDATE t SET b = ? WHERE id = ?", blob(id, ver), id); err != nil {
				return err
			}
		}
		if _, err := tx.Exec("UPDATE meta SET n = (SELECT count(*) FROM t) WHERE k = 0"); err != nil {
			return err
		}
		if rnd.Intn(4) == 0 {
			return tx.Rollback()
		}
		return tx.Commit()
	}
	var wmu sync.Mutex // guards w (reopen)
	wg.Add(1)
	go func() { // the gathered writer
		defer wg.Done()
		rnd := rand.New(rand.NewSource(1))
		for i := 0; !stop.Load(); i++ {
			wmu.Lock()
			err := work(w, rnd, rnd.Intn(5) == 0)
			if err != nil {
				fail("gathered writer: %v", err)
			}
			switch rnd.Intn(12) {
			case 0:
				_, err = w.Exec("PRAGMA wal_checkpoint(PASSIVE)")
			case 1:
				_, err = w.Exec("PRAGMA wal_checkpoint(FULL)")
			case 2:
				_, err = w.Exec("PRAGMA wal_checkpoint(RESTART)")
			case 3:
				_, err = w.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
			case 4:
				t0 := time.Now()
				w.Close()
				w = openW()
				if d := time.Since(t0); d > time.Second {
					t.Logf("slow reopen %v at %s", d, time.Now().Format("15:04:05.000"))
				}
			}
			if err != nil {
				fail("writer checkpoint: %v", err)
			}
			wmu.Unlock()
		}
	}()
	wg.Add(1)
	go func() { // foreign writer
		defer wg.Done()
		rnd := rand.New(rand.NewSource(2))
		for !stop.Load() {
			if err := work(fw, rnd, rnd.Intn(8) == 0); err != nil && !strings.Contains(err.Error(), "SQLITE_BUSY") {
				fail("foreign writer: %v at %s", err, time.Now().Format("15:04:05.000"))
			}
			time.Sleep(time.Duration(rnd.Intn(20)) * time.Millisecond)
		}
	}()
	wg.Add(1)
	go func() { // checkpointer
		defer wg.Done()
		modes := []string{"PASSIVE", "FULL", "RESTART", "TRUNCATE"}
		rnd := rand.New(rand.NewSource(3))
		for !stop.Load() {
			if _, err := ck.Exec("PRAGMA wal_checkpoint(" + modes[rnd.Intn(4)] + ")"); err != nil {
				fail("checkpointer: %v", err)
			}
			time.Sleep(time.Duration(rnd.Intn(30)) * time.Millisecond)
		}
	}()
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(seed int64) { // readers
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			for !stop.Load() {
				ctx := context.Background()
				tx, err := r.BeginTx(ctx, nil)
				if err != nil {
					fail("reader begin: %v", err)
					return
				}
				var n, cnt, maxID int64
				if err := tx.QueryRow("SELECT n FROM meta WHERE k = 0").Scan(&n); err != nil {
					fail("reader: %v", err)
				}
				if err := tx.QueryRow("SELECT count(*), coalesce(max(id), 0) FROM t").Scan(&cnt, &maxID); err != nil {
					fail("reader: %v", err)
				}
				if n != cnt {
					fail("reader: meta.n %d != count %d", n, cnt)
				}
				if maxID > 0 {
					lo := 1 + rnd.Int63n(maxID)
					rows, err := tx.Query("SELECT id, ver, b FROM t WHERE id BETWEEN ? AND ?", lo, lo+200)
					if err != nil {
						fail("reader: %v", err)
					} else {
						for rows.Next() {
							var id, ver int64
							var b []byte
							rows.Scan(&id, &ver, &b)
							if !bytes.Equal(b, blob(id, ver)) {
								fail("reader: row %d ver %d: wrong blob (%d bytes)", id, ver, len(b))
							}
						}
						if err := rows.Err(); err != nil {
							fail("reader rows: %v", err)
						}
						rows.Close()
					}
				}
				tx.Rollback()
			}
		}(int64(10 + g))
	}
	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	wmu.Lock()
	w.Close()
	wmu.Unlock()
	fresh := openPlain(t, path)
	integrityOK(t, fresh)
	rows, err := fresh.Query("SELECT id, ver, b FROM t")
	if err != nil {
		t.Fatal(err)
	}
	var n, bad int
	for rows.Next() {
		var id, ver int64
		var b []byte
		rows.Scan(&id, &ver, &b)
		n++
		if !bytes.Equal(b, blob(id, ver)) {
			bad++
		}
	}
	rows.Close()
	var metaN int
	fresh.QueryRow("SELECT n FROM meta").Scan(&metaN)
	t.Logf("%d rows (meta %d), %d bad, %d WAL writes gathered into %d pwrites, %d failures", n, metaN, bad, gathered.Load(), written.Load(), failures.Load())
	if bad > 0 || n != metaN {
		t.Fatalf("%d bad rows; %d rows vs meta %d", bad, n, metaN)
	}
}

// ckptStore opens a store without background checkpoints and commits n
// projects, so that the WAL holds frames for a checkpoint to copy.
func ckptStore(t *testing.T, path string, direct bool, n int) *DB {
	t.Helper()
	db, err := OpenWith(context.Background(), path, nil, Options{DirectWALWrites: direct, CheckpointEvents: -1})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := db.CreateProject(context.Background(), storetest.NewUUID()); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestCheckpointPassSyncsDatabaseFile: a checkpoint pass that copies
// frames syncs the database file (dbFileControl); the checkpointer's
// connection is opened through the gathering VFS, and only then.
func TestCheckpointPassSyncsDatabaseFile(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			db := ckptStore(t, filepath.Join(t.TempDir(), "a.db"), direct, 10)
			defer db.Close()
			s0 := ckptSyncs.Load()
			log, done, err := db.checkpoint()
			if err != nil || log == 0 || done != log {
				t.Fatalf("checkpoint: log %d, done %d, %v; want every frame copied", log, done, err)
			}
			got := ckptSyncs.Load() - s0
			if direct && got != 0 || !direct && got < 1 {
				t.Fatalf("direct=%v: %d early syncs of the database file", direct, got)
			}
			// Nothing left to copy: no pass, no sync.
			s0 = ckptSyncs.Load()
			if _, _, err := db.checkpoint(); err != nil || ckptSyncs.Load() != s0 {
				t.Fatalf("empty checkpoint: %v, %d syncs", err, ckptSyncs.Load()-s0)
			}
		})
	}
}

// TestCheckpointSyncFailureSticks: when the early sync fails, every later
// sync of that file handle fails too, so the checkpoint that reaches the
// end of the WAL fails (and the WAL is not restarted over frames whose
// pages may not be on disk) even once syncs work again; appends go on,
// and after a reopen everything is there.
func TestCheckpointSyncFailureSticks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	db := ckptStore(t, path, false, 10)
	real := ckptSync
	ckptSync = func(*libc.TLS, *dbFile, uintptr) int32 { return lib.SQLITE_IOERR_FSYNC }
	t.Cleanup(func() { ckptSync = real })
	if _, _, err := db.checkpoint(); err == nil {
		t.Fatal("checkpoint after a failed early sync: no error")
	}
	ckptSync = real
	if _, err := db.CreateProject(context.Background(), storetest.NewUUID()); err != nil {
		t.Fatalf("append after the failure: %v", err)
	}
	if _, _, err := db.checkpoint(); err == nil {
		t.Fatal("second checkpoint on the same handle: no error; the failure did not stick")
	}
	_ = db.Close() // its last checkpoint fails the same way
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("after Close the WAL is gone or empty (%v): a fresh handle's sync stood in for the failed one", err)
	}
	db = ckptStore(t, path, false, 0)
	defer db.Close()
	var n int
	if err := db.w.QueryRow("SELECT count(*) FROM projects").Scan(&n); err != nil || n != 11 {
		t.Fatalf("after reopen: %d projects, %v; want 11", n, err)
	}
	if log, done, err := db.checkpoint(); err != nil || done != log {
		t.Fatalf("checkpoint after reopen: log %d, done %d, %v", log, done, err)
	}
	integrityOK(t, db.w)
}

// TestCheckpointPartialPassLeavesFileClean: a pass that cannot reach the
// end of the WAL (a reader holds an older snapshot), which SQLite itself
// does not follow with a sync, leaves no dirty page of the database file
// in the page cache (cachestat(2), Linux 6.5 or later).
func TestCheckpointPartialPassLeavesFileClean(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	db := ckptStore(t, path, false, 200)
	defer db.Close()
	// Kept open until the store is closed: closing a descriptor of the
	// file drops the process's POSIX locks on it, SQLite's included.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // after db.Close (deferred first, runs last)
	dirty := func() uint64 {
		var st unix.Cachestat_t
		if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0); err != nil {
			t.Skipf("not checked: cachestat: %v", err)
		}
		return st.Dirty + st.Writeback
	}
	dirty()
	if _, _, err := db.checkpoint(); err != nil {
		t.Fatal(err)
	}
	add := func(n int) {
		for range n {
			if _, err := db.CreateProject(context.Background(), storetest.NewUUID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(200)
	tx, err := db.r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM projects").Scan(&n); err != nil {
		t.Fatal(err)
	}
	add(50)
	s0 := ckptSyncs.Load()
	log, done, err := db.checkpoint()
	if err != nil || done == 0 || done >= log {
		t.Fatalf("checkpoint: log %d, done %d, %v; want a partial pass", log, done, err)
	}
	if ckptSyncs.Load() == s0 {
		t.Fatal("the partial pass ran no early sync")
	}
	if d := dirty(); d != 0 {
		t.Fatalf("after a partial pass %d pages of the database file are dirty; want 0", d)
	}
}

// TestHealthReportsFailingCheckpoint: once a checkpoint cycle of the
// store's own loop fails (a sync of the database file failed, which sticks
// to the handle), Health reports ErrCheckpointFailing while appends go on;
// a cycle that succeeds clears it.
func TestHealthReportsFailingCheckpoint(t *testing.T) {
	ctx := context.Background()
	db, err := OpenWith(ctx, filepath.Join(t.TempDir(), "a.db"), nil, Options{CheckpointEvents: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	n := 0
	// appendAndWait appends enough to start a checkpoint cycle, waits until
	// the cycle that took every append so far has ended, and returns
	// Health; it repeats until want holds or 10 s pass.
	appendAndWait := func(want func(error) bool) error {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			for range 4 {
				n++
				ev, c := s.Event(t, storetest.Spec{ThreadID: "t", Summary: strconv.Itoa(n)})
				if _, err := db.Append(ctx, ev, c); err != nil {
					t.Fatalf("append %d: %v", n, err)
				}
			}
			for db.ckCovered.Load() < int64(n) && time.Now().Before(deadline) {
				time.Sleep(externalCheckInterval / 5)
			}
			if db.ckCovered.Load() < int64(n) {
				t.Fatalf("no checkpoint cycle took appends up to %d in 10 s", n)
			}
			if err := db.Health(ctx); want(err) || time.Now().After(deadline) {
				return err
			}
		}
	}
	if err := db.Health(ctx); err != nil {
		t.Fatalf("Health of a new store: %v", err)
	}
	if err := appendAndWait(func(error) bool { return true }); err != nil {
		t.Fatalf("Health after appends and a checkpoint cycle: %v", err)
	}

	real := ckptSync
	ckptSync = func(*libc.TLS, *dbFile, uintptr) int32 { return lib.SQLITE_IOERR_FSYNC }
	t.Cleanup(func() { ckptSync = real })
	err = appendAndWait(func(err error) bool { return err != nil })
	if !errors.Is(err, ErrCheckpointFailing) {
		t.Fatalf("Health after a failed checkpoint sync = %v, want ErrCheckpointFailing", err)
	}
	ckptSync = real
	if err := appendAndWait(func(error) bool { return true }); !errors.Is(err, ErrCheckpointFailing) {
		t.Fatalf("Health after later appends = %v; the failure sticks to the handle until reopen, want ErrCheckpointFailing", err)
	}

	// A cycle that succeeds clears it (here: a stand-in failure on a
	// store whose checkpoints work).
	db2, err := OpenWith(ctx, filepath.Join(t.TempDir(), "b.db"), nil, Options{CheckpointEvents: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	stale := errors.New("stand-in")
	db2.ckFailed.Store(&stale)
	if err := db2.Health(ctx); !errors.Is(err, ErrCheckpointFailing) || !errors.Is(err, stale) {
		t.Fatalf("Health with a failed cycle = %v, want ErrCheckpointFailing wrapping the cause", err)
	}
	p2, err := db2.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	db, s, n = db2, storetest.NewSigner(t, p2.ID).Register(t, db2), 0
	if err := appendAndWait(func(err error) bool { return err == nil }); err != nil {
		t.Fatalf("Health after a checkpoint cycle that succeeded = %v, want nil", err)
	}
}
