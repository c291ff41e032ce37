package sqlite

import "time"

const (
	// checkpointInterval is how often checkpointLoop copies committed WAL
	// frames into the database file.
	checkpointInterval = 200 * time.Millisecond
	// walRestartFrames is the WAL length, in frames (4 KiB pages), above
	// which checkpointLoop makes sure the WAL is restarted from its
	// beginning: about 16 MiB.
	walRestartFrames = 4096
	// walCatchUpFrames is the backlog, in frames, small enough to finish
	// while holding the writer between two batches.
	walCatchUpFrames = 512
	// externalCheckInterval bounds how long a change committed by another
	// process (an admin command on the same file) can go unnoticed by the
	// caches (wstate, tokenCache) while no append runs.
	externalCheckInterval = 50 * time.Millisecond
	// walSizeLimit is the journal_size_limit: a restarted WAL file longer
	// than this is truncated to it.
	walSizeLimit = 64 << 20
)

// checkpointLoop runs PASSIVE checkpoints on its own connection until
// Close. Commits append to the WAL and fsync it (synchronous=FULL: a 201
// is durable), but never wait for a checkpoint: copying pages into the
// database file and fsyncing it happens here, concurrently.
//
// Under sustained appends a concurrent PASSIVE checkpoint never catches up
// with the writer completely, and SQLite restarts the WAL from its
// beginning only once every frame has been copied; left alone the WAL
// would grow without bound, and every commit would extend the file. So
// once the WAL is longer than walRestartFrames, the loop checkpoints
// back to back until the backlog is under walCatchUpFrames, then copies
// that rest while holding the writer between two batches (a pause of a
// few milliseconds); the writer's next transaction starts the WAL afresh.
func (db *DB) checkpointLoop() {
	defer close(db.ckDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	ext := time.NewTicker(externalCheckInterval)
	defer ext.Stop()
	for {
		select {
		case <-db.ckStop:
			return
		case <-ext.C:
			db.checkExternal()
			continue
		case <-t.C:
		}
		log, done, err := db.checkpoint()
		for err == nil && log >= walRestartFrames && log-done > walCatchUpFrames {
			select {
			case <-db.ckStop:
				return
			default:
			}
			log, done, err = db.checkpoint()
		}
		if err == nil && log >= walRestartFrames {
			db.wmu.Lock()
			_, _, err = db.checkpoint()
			db.wmu.Unlock()
		}
		if err != nil {
			db.logger.Warn("sqlite checkpoint", "err", mapErr("checkpoint", err))
		}
	}
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
	if err := db.stmts[dataVersion].QueryRow().Scan(&v); err != nil {
		db.logger.Warn("sqlite data_version", "err", mapErr("data_version", err))
		return
	}
	db.ws.observe(v)
}
