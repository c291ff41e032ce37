package sqlite

import (
	"errors"
	"time"
)

const (
	// checkpointEvents is how many appended events start a checkpoint:
	// about 6,000 WAL frames (~24 MiB) at the 6 frames an event dirties
	// when many sessions and threads append at once. Copying that many
	// appends' pages in one go writes each hot page once, where frequent
	// small checkpoints would copy the same index pages again and again.
	checkpointEvents = 1024
	// checkpointIdle is Options.CheckpointIdle's default: the longest a
	// committed change waits in the WAL for its checkpoint when fewer than
	// checkpointEvents arrive.
	checkpointIdle = 2 * time.Second
	// walCatchUpFrames is the backlog, in frames, small enough to finish
	// while holding the writer between two batches.
	walCatchUpFrames = 512
	// catchUpPasses and catchUpPause bound one cycle's unlocked passes
	// that make no progress.
	catchUpPasses = 64
	catchUpPause  = 10 * time.Millisecond
	// externalCheckInterval bounds how long a change committed by another
	// process (an admin command on the same file) can go unnoticed by the
	// caches (wstate, tokenCache) while no append runs. It is also the
	// checkpoint loop's tick.
	externalCheckInterval = 50 * time.Millisecond
	// walSizeLimit is the journal_size_limit: a restarted WAL file longer
	// than this is truncated to it.
	walSizeLimit = 64 << 20
	// writerCacheKiB is the writer connection's page cache, as SQLite's
	// negative cache_size (KiB). Every commit truncates the page cache,
	// and SQLite (pcache1TruncateUnsafe) may walk the cache's whole hash
	// table to do it: at 64 MiB that walk was 7% of the relay's CPU under
	// load, 1–1.9% at 8 MiB, and out of the profile at 2 MiB, where
	// pread(2) of missed pages rose from 1.0% to 1.9% (issue 36: relay CPU
	// per event −5% by the medians of two A/B runs at 20,000 and 60,000
	// events; docs/performance.md "Side by side with khatru"). Pages the
	// cache misses come from the kernel's page cache with a read(2). (No
	// mmap_size: a read error on a mapped page is a SIGBUS that kills the
	// process, not an error.)
	writerCacheKiB = -2 << 10
)

// checkpointLoop runs the WAL checkpoints on its own connection until
// Close. Commits append to the WAL and fsync it (synchronous=FULL: a 201
// is durable), but never wait for a checkpoint: copying pages into the
// database file and fsyncing it happens here, concurrently.
//
// A checkpoint starts once Options.CheckpointEvents appends or
// Options.CheckpointIdle (whatever was written: registry writes too) have passed
// since the last one. A PASSIVE checkpoint running beside the
// writer never catches up with it completely, and SQLite restarts the WAL
// from its beginning only once every frame has been copied; left alone
// the WAL would grow without bound, and every commit would extend the
// file. So the loop checkpoints back to back until the backlog is under
// walCatchUpFrames, then copies that rest while holding the writer
// between two batches (a pause of a few milliseconds); the writer's next
// transaction starts the WAL afresh.
func (db *DB) checkpointLoop() {
	defer close(db.ckDone)
	t := time.NewTicker(externalCheckInterval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-db.ckStop:
			return
		case <-t.C:
		}
		db.checkExternal()
		n := db.sinceCheckpoint.Load()
		// Idle, a cycle still runs every ckIdle: registry,
		// handoff and courier writes never count as appends, and a cycle
		// with nothing to copy costs one read of the WAL index.
		if db.ckEvents < 0 || n < db.ckEvents && time.Since(last) < db.ckIdle {
			continue
		}
		db.sinceCheckpoint.Add(-n)
		last = time.Now()
		switch err := db.checkpointAll(); {
		case errors.Is(err, errCheckpointStalled):
			// Nothing learned about the file: Health stays as it was.
		case err != nil:
			err = mapErr("checkpoint", err)
			db.ckFailed.Store(&err)
			db.logger.Warn("sqlite checkpoint", "err", err)
		default:
			db.ckFailed.Store(nil)
		}
		db.ckCovered.Add(n)
		db.ckCycles.Add(1)
	}
}

// errCheckpointStalled: checkpointAll gave up (passes made no progress, or
// the store is closing) without an error from SQLite.
var errCheckpointStalled = errors.New("sqlite checkpoint: no progress")

// checkpointAll copies the whole WAL into the database file: unlocked
// passes until the backlog is small, then the rest between two batches.
// A pass that makes no progress (a reader still holds an older snapshot)
// waits catchUpPause before the next; after catchUpPasses such passes the
// cycle gives up and the next one tries again. Between passes it keeps
// watching for other processes' commits (checkExternal).
func (db *DB) checkpointAll() error {
	log, done, err := db.checkpoint()
	for stalled := 0; err == nil && log-done > walCatchUpFrames; {
		prev := done
		log, done, err = db.checkpoint()
		db.checkExternal()
		if err != nil || done > prev {
			continue
		}
		if stalled++; stalled == catchUpPasses {
			return errCheckpointStalled
		}
		select {
		case <-db.ckStop:
			return errCheckpointStalled
		case <-time.After(catchUpPause):
		}
	}
	if err != nil {
		return err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	_, _, err = db.checkpoint()
	return err
}

// checkpoint runs one PASSIVE checkpoint and returns the WAL's length and
// how much of it is now in the database file, in frames.
func (db *DB) checkpoint() (log, done int64, err error) {
	var busy int64
	err = db.ck.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done)
	return log, done, err
}

// checkExternal reads the writer connection's data_version between two
// batches; when another connection has committed, the caches start afresh.
func (db *DB) checkExternal() {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	var v int64
	var marked bool
	if err := db.stmts[dataVersion].QueryRow().Scan(&v, &marked); err != nil {
		db.logger.Warn("sqlite data_version", "err", mapErr("data_version", err))
		return
	}
	if !marked {
		if _, err := db.w.Exec(writerMark); err != nil {
			db.logger.Warn("sqlite writer mark", "err", mapErr("writer mark", err))
			return
		}
		db.ws.dataVersion = -1
	}
	db.ws.observe(v)
}
