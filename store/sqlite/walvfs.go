//go:build linux

package sqlite

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"modernc.org/libc"
	lib "modernc.org/sqlite/lib"
)

// gatherVFSName is the SQLite VFS the writer and checkpointer connections
// open the database through (Options.DirectWALWrites turns it off):
// Linux's default VFS ("unix") with two changes. A WAL file's writes are
// gathered in memory while each continues where the last ended, and reach
// the file as one pwrite(2) before anything else is done with the file or
// with the database's locks. And every checkpoint pass syncs the database
// file it copied pages into (dbFileControl), not only the pass that
// empties the WAL.
//
// Why: SQLite writes each WAL frame with two pwrite(2)s (its 24-byte header,
// then its page), so a group commit of ~7 appends made ~70 system calls
// before its fsync: ~12 per append, each a kernel entry and an ext4
// page-cache walk, and ~1/3 of the group committer's time. Gathered, a
// commit is one pwrite(2) and the same fdatasync(2). See
// docs/performance.md.
//
// What stays the same: the bytes reach the file in the order SQLite wrote
// them, before any other call on the WAL file: above all its xSync, which
// synchronous=FULL (the writer's setting; it must not run with less) runs
// at every commit before the commit is published. A failed write fails
// that xSync, and so the commit, with the error the default VFS would have
// given (SQLITE_FULL on ENOSPC, else SQLITE_IOERR_WRITE). The gathered
// bytes are also written before any change of the database's shared-memory
// locks and at its memory barrier: SQLite hands the WAL's write lock on
// only through xShmLock, so another writer (another process's admin
// command, say) never writes where bytes of a rolled-back transaction are
// still waiting to be written.
const gatherVFSName = "acrelay-gather-wal"

// gatherMax bounds what one WAL file gathers before it writes; a larger
// transaction is written in pieces of at most this size.
const gatherMax = 1 << 20

var (
	gatherOnce sync.Once
	gatherErr  error

	// gatherVFS is a copy of the default VFS with gatherOpen as its xOpen.
	// It and the method tables are Go globals: SQLite keeps pointers to
	// them for the life of the process, and Go never moves globals.
	gatherVFS lib.Tsqlite3_vfs
	baseOpen  uintptr // the default VFS's xOpen

	// The wrapped method tables, made from the first file's default
	// methods (walBase, dbBase); a file with other default methods is
	// left alone.
	walMethods, dbMethods lib.Tsqlite3_io_methods
	walBase, dbBase       *lib.Tsqlite3_io_methods

	// gathered counts the WAL writes SQLite issued through the VFS, and
	// written the pwrite(2)s that carried them; ckptSyncs the database
	// file syncs dbFileControl ran; read by tests.
	gathered, written, ckptSyncs atomic.Int64

	// ckptSync is the sync dbFileControl runs (the default VFS's xSync);
	// tests replace it to make it fail.
	ckptSync = func(tls *libc.TLS, d *dbFile, pFile uintptr) int32 {
		return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&d.base.FxSync)))(tls, pFile, lib.SQLITE_SYNC_NORMAL)
	}

	gatherMu sync.Mutex
	walFiles = map[uintptr]*walFile{} // by sqlite3_file address
	dbFiles  = map[uintptr]*dbFile{}
)

// walFile is one open WAL file: its default methods, its descriptor and
// the bytes gathered for [off, off+len(buf)). Only the connection that
// owns the file touches buf and off (SQLite serializes a connection).
type walFile struct {
	base *lib.Tsqlite3_io_methods
	name string
	fd   int
	buf  []byte
	off  int64
	db   *dbFile // the database file it belongs to
	// failed is set when gathered bytes could not be written: SQLite
	// already counts them as in the file (spilled frames of the open
	// transaction may be read back), so every later call fails until the
	// transaction gives up the write lock (dbShmLock).
	failed bool
}

// dbFile is one open database file and the WAL file of the same
// connection, whose gathered bytes its lock and barrier calls write first.
type dbFile struct {
	base *lib.Tsqlite3_io_methods
	name string
	tls  *libc.TLS // the connection's (modernc.org/sqlite gives each its own)
	wal  *walFile
	// syncFailed is set when a sync of this file handle failed
	// (dbFileControl's or SQLite's own): every later one fails (dbSync).
	// The handle's store then never completes another checkpoint and
	// keeps its WAL (which holds every committed page) until it is
	// reopened; each cycle logs the failure.
	syncFailed atomic.Bool
}

// gatherVFSRegistered registers gatherVFSName (once per process) and
// returns it.
func gatherVFSRegistered() (string, error) {
	gatherOnce.Do(func() {
		tls := libc.NewTLS() // kept, as the registration is, for the process's life
		def := lib.Xsqlite3_vfs_find(tls, 0)
		if def == 0 {
			gatherErr = fmt.Errorf("sqlite: no default VFS")
			return
		}
		gatherVFS = *(*lib.Tsqlite3_vfs)(cptr(def))
		name, err := libc.CString(gatherVFSName)
		if err != nil {
			gatherErr = err
			return
		}
		gatherVFS.FzName = name
		gatherVFS.FpNext = 0
		baseOpen = gatherVFS.FxOpen
		*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&gatherVFS.FxOpen)) = gatherOpen
		if rc := lib.Xsqlite3_vfs_register(tls, uintptr(unsafe.Pointer(&gatherVFS)), 0); rc != lib.SQLITE_OK {
			gatherErr = fmt.Errorf("sqlite: register VFS %s: result code %d", gatherVFSName, rc)
		}
	})
	return gatherVFSName, gatherErr
}

// gatherOpen is the VFS's xOpen: the default VFS's, then the gathering
// methods for a WAL file and the flushing lock methods for a database
// file. Other files (temporary ones) keep the default methods.
func gatherOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	rc := (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&baseOpen)))(tls, pVfs, zName, pFile, flags, pOutFlags)
	f := (*lib.Tsqlite3_file)(cptr(pFile))
	if rc != lib.SQLITE_OK || f.FpMethods == 0 || zName == 0 {
		return rc
	}
	base := (*lib.Tsqlite3_io_methods)(cptr(f.FpMethods))
	name := libc.GoString(zName)
	gatherMu.Lock()
	defer gatherMu.Unlock()
	switch {
	case flags&lib.SQLITE_OPEN_WAL != 0:
		// Gather only for a WAL whose database file (same connection,
		// same name) flushes it at every lock change, and whose methods
		// are the ones walMethods wraps; any other keeps the default
		// methods.
		var d *dbFile
		for _, c := range dbFiles {
			if c.tls == tls && c.name+"-wal" == name && c.wal == nil {
				d = c
				break
			}
		}
		if d == nil || walBase != nil && walBase != base {
			return rc
		}
		if walBase == nil {
			walBase, walMethods = base, gatherWALMethods(base)
		}
		w := &walFile{base: base, name: name, fd: int((*lib.TunixFile)(cptr(pFile)).Fh), db: d}
		d.wal = w
		walFiles[pFile] = w
		f.FpMethods = uintptr(unsafe.Pointer(&walMethods))
	case flags&lib.SQLITE_OPEN_MAIN_DB != 0 && base.FiVersion >= 2:
		if dbBase != nil && dbBase != base {
			return rc // another locking style (nolock=1, say): not wrapped, so its WAL never gathers
		}
		if dbBase == nil {
			dbBase, dbMethods = base, flushingDBMethods(base)
		}
		dbFiles[pFile] = &dbFile{base: base, name: name, tls: tls}
		f.FpMethods = uintptr(unsafe.Pointer(&dbMethods))
	}
	return rc
}

// gatherWALMethods is base with every method that touches the file
// writing the gathered bytes first, and xWrite gathering. xSectorSize and
// xDeviceCharacteristics read no file state; the locking, shared-memory
// and fetch methods are the database file's business, never called on a
// WAL file.
func gatherWALMethods(base *lib.Tsqlite3_io_methods) lib.Tsqlite3_io_methods {
	m := *base
	*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxClose)) = walClose
	*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxRead)) = walRead
	*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxWrite)) = walWrite
	*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&m.FxTruncate)) = walTruncate
	*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxSync)) = walSync
	*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&m.FxFileSize)) = walFileSize
	*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&m.FxFileControl)) = walFileControl
	return m
}

// flushingDBMethods is base with the shared-memory lock and barrier (and
// close) writing the connection's gathered WAL bytes first.
func flushingDBMethods(base *lib.Tsqlite3_io_methods) lib.Tsqlite3_io_methods {
	m := *base
	*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxClose)) = dbClose
	*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&m.FxShmLock)) = dbShmLock
	*(*func(*libc.TLS, uintptr))(unsafe.Pointer(&m.FxShmBarrier)) = dbShmBarrier
	*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&m.FxFileControl)) = dbFileControl
	*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxSync)) = dbSync
	return m
}

func walOf(pFile uintptr) *walFile {
	gatherMu.Lock()
	w := walFiles[pFile]
	gatherMu.Unlock()
	return w
}

func dbOf(pFile uintptr) *dbFile {
	gatherMu.Lock()
	d := dbFiles[pFile]
	gatherMu.Unlock()
	return d
}

// flush writes what w gathered, with its own pwrite(2)s (SQLite's write
// path caps one call at 128 KiB). A failure is SQLITE_IOERR_WRITE, even
// for ENOSPC: an I/O error makes SQLite roll the whole transaction back,
// where SQLITE_FULL from a read would roll back only the statement and
// let the transaction commit without the bytes. It sticks (w.failed).
func (w *walFile) flush() int32 {
	if w.failed {
		w.buf = w.buf[:0]
		return lib.SQLITE_IOERR_WRITE
	}
	b, off := w.buf, w.off
	w.buf = w.buf[:0]
	for len(b) > 0 {
		n, err := syscall.Pwrite(w.fd, b, off)
		written.Add(1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			w.failed = true
			return lib.SQLITE_IOERR_WRITE
		}
		b, off = b[n:], off+int64(n)
	}
	return lib.SQLITE_OK
}

func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	w := walOf(pFile)
	if w.failed {
		return lib.SQLITE_IOERR_WRITE
	}
	if len(w.buf) > 0 && (iOfst != w.off+int64(len(w.buf)) || len(w.buf)+int(iAmt) > gatherMax) {
		if rc := w.flush(); rc != lib.SQLITE_OK {
			return rc
		}
	}
	if iAmt > gatherMax {
		return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&w.base.FxWrite)))(tls, pFile, zBuf, iAmt, iOfst)
	}
	if len(w.buf) == 0 {
		w.off = iOfst
	}
	w.buf = append(w.buf, unsafe.Slice((*byte)(cptr(zBuf)), iAmt)...)
	gathered.Add(1)
	return lib.SQLITE_OK
}

func walClose(tls *libc.TLS, pFile uintptr) int32 {
	w := walOf(pFile)
	rc := w.flush()
	gatherMu.Lock()
	delete(walFiles, pFile)
	if w.db != nil {
		w.db.wal = nil
	}
	gatherMu.Unlock()
	if rc2 := (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&w.base.FxClose)))(tls, pFile); rc == lib.SQLITE_OK {
		rc = rc2
	}
	return rc
}

func walRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	w := walOf(pFile)
	if rc := w.flush(); rc != lib.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&w.base.FxRead)))(tls, pFile, zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	w := walOf(pFile)
	if rc := w.flush(); rc != lib.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&w.base.FxTruncate)))(tls, pFile, size)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	w := walOf(pFile)
	if rc := w.flush(); rc != lib.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&w.base.FxSync)))(tls, pFile, flags)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	w := walOf(pFile)
	if rc := w.flush(); rc != lib.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&w.base.FxFileSize)))(tls, pFile, pSize)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	w := walOf(pFile)
	if rc := w.flush(); rc != lib.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&w.base.FxFileControl)))(tls, pFile, op, pArg)
}

// walOfDB is d's WAL file, or nil.
func (d *dbFile) walOfDB() *walFile {
	gatherMu.Lock()
	w := d.wal
	gatherMu.Unlock()
	return w
}

// flushWAL writes the gathered bytes of d's WAL file, if it has one.
func (d *dbFile) flushWAL() int32 {
	if w := d.walOfDB(); w != nil {
		return w.flush()
	}
	return lib.SQLITE_OK
}

// walWriteLock is SQLite's WAL_WRITE_LOCK, the first shared-memory lock.
const walWriteLock = 0

// dbShmLock writes the gathered WAL bytes before a lock is taken or given
// up, with one exception. When the write lock is given up, bytes still
// gathered belong to a transaction that rolled back (a commit's xSync, or
// at the latest its barrier, wrote everything before it was published), so
// they are dropped, and a failure that stuck to the WAL is cleared: the
// next transaction starts afresh. An unlock always reaches the default
// method, whatever a flush returned, so a lock is never left held.
func dbShmLock(tls *libc.TLS, pFile uintptr, offset, n, flags int32) int32 {
	d := dbOf(pFile)
	unlock := flags&lib.SQLITE_SHM_UNLOCK != 0
	if w := d.walOfDB(); w != nil {
		switch {
		case unlock && offset == walWriteLock:
			w.buf, w.failed = w.buf[:0], false
		case unlock:
			w.flush() // a failure sticks to w
		default:
			if rc := w.flush(); rc != lib.SQLITE_OK {
				return rc
			}
		}
	}
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&d.base.FxShmLock)))(tls, pFile, offset, n, flags)
}

// dbShmBarrier cannot fail. With synchronous=FULL, which OpenWith checks
// the writer runs with, the commit's xSync has written (or failed, and so
// failed the commit) everything gathered before SQLite reaches the barrier
// that publishes it, so the flush here finds nothing to write; a failure
// would stick to the WAL all the same.
func dbShmBarrier(tls *libc.TLS, pFile uintptr) {
	d := dbOf(pFile)
	d.flushWAL()
	(*(*func(*libc.TLS, uintptr))(unsafe.Pointer(&d.base.FxShmBarrier)))(tls, pFile)
}

// dbFileControl passes a file control on; at SQLITE_FCNTL_CKPT_DONE (a
// checkpoint has copied its frames into the database file) it first syncs
// the database file. SQLite syncs it only when the checkpoint reached the
// end of the WAL, so under sustained appends every checkpoint pass that
// runs beside the writer (checkpointAll) left its pages dirty in the page
// cache until the last pass, the one that holds the writer, synced all of
// them: ≈ 20 MiB and 10–15 ms of fdatasync with every append waiting.
// Synced here, each pass writes out its own pages while appends go on, and
// the last one only its few. The sync is an early one: SQLite still runs
// its own where it always did. SQLite ignores what CKPT_DONE returns, so a
// failure sticks to the file handle instead (dbSync): the kernel reports a
// write-back error once per open file, and SQLite's own later sync must
// not succeed in its place and let the WAL restart.
func dbFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	d := dbOf(pFile)
	if op == lib.SQLITE_FCNTL_CKPT_DONE && !d.syncFailed.Load() {
		ckptSyncs.Add(1)
		if ckptSync(tls, d, pFile) != lib.SQLITE_OK {
			d.syncFailed.Store(true)
		}
	}
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&d.base.FxFileControl)))(tls, pFile, op, pArg)
}

// dbSync is the default xSync, except after a failed sync of the same
// file handle (its own or dbFileControl's), when it fails
// (SQLITE_IOERR_FSYNC) every time.
func dbSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	d := dbOf(pFile)
	if d.syncFailed.Load() {
		return lib.SQLITE_IOERR_FSYNC
	}
	rc := (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&d.base.FxSync)))(tls, pFile, flags)
	if rc != lib.SQLITE_OK {
		d.syncFailed.Store(true)
	}
	return rc
}

func dbClose(tls *libc.TLS, pFile uintptr) int32 {
	d := dbOf(pFile)
	rc := d.flushWAL()
	gatherMu.Lock()
	delete(dbFiles, pFile)
	if d.wal != nil {
		d.wal.db = nil
	}
	gatherMu.Unlock()
	if rc2 := (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&d.base.FxClose)))(tls, pFile); rc == lib.SQLITE_OK {
		rc = rc2
	}
	return rc
}

// cptr turns an address SQLite handed over (memory of modernc.org/libc's
// allocator, which the Go collector neither moves nor frees) into a
// pointer.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
