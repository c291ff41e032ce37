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
	for {
		select {
		case <-db.ckStop:
			return
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
