package sqlite

import "time"

// checkpointInterval is how often checkpointLoop copies committed WAL
// frames into the database file.
const checkpointInterval = 200 * time.Millisecond

// checkpointLoop runs PASSIVE checkpoints on its own connection until
// Close. Commits append to the WAL and fsync it (synchronous=FULL: a 201
// is durable), but never wait for a checkpoint: copying pages into the
// database file and fsyncing it happens here, concurrently. A PASSIVE
// checkpoint never blocks readers or the writer; the writer restarts the
// WAL from its beginning once a checkpoint has copied all of it.
func (db *DB) checkpointLoop() {
	defer close(db.ckDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-db.ckStop:
			return
		case <-t.C:
			if _, err := db.ck.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
				db.logger.Warn("sqlite checkpoint", "err", mapErr("checkpoint", err))
			}
		}
	}
}
