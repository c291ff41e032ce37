package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/internal/backoff"
	"github.com/acrelay/acrelay/store"
)

// advancesChannel is the LISTEN/NOTIFY channel of "project P advanced to
// received_seq N" (payload "P N"; never the event).
const advancesChannel = "acrelay_advances"

var _ store.Advances = (*DB)(nil)

// notifyAdvance is queued by a creating append inside its own transaction,
// after the event row: PostgreSQL delivers a NOTIFY only if and when the
// transaction commits, so listeners never hear of a record they cannot
// read. The payload is "project_id received_seq".
const notifyAdvance = `SELECT pg_notify('` + advancesChannel + `', id || ' ' || last_seq) FROM projects WHERE id = $1`

// selectHeads is the re-check after the listener reconnects: every
// project's head, so appends committed while it was down are not missed.
const selectHeads = `SELECT id, last_seq FROM projects WHERE last_seq > 0`

func parseAdvance(payload string) (string, int64, bool) {
	i := strings.LastIndexByte(payload, ' ')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil || seq <= 0 {
		return "", 0, false
	}
	return payload[:i], seq, true
}

// SubscribeAdvances implements store.Advances: appends committed by any
// process on this database, heard through LISTEN on a dedicated connection
// outside the pool (opened with the first subscription, closed after the
// last), and this process's own appends at once after their commit. A
// lost connection is re-established with backoff, and every project's head
// is then published again (a re-check), so nothing committed while it was
// down goes unheard.
func (db *DB) SubscribeAdvances() *store.AdvanceSubscription {
	return db.advances.SubscribeAdvances()
}

// startListening counts a broker (advances, wakes) that has
// subscriptions and starts the LISTEN loop for the first. A broker calls it under its
// lock for its first subscription.
func (db *DB) startListening() {
	db.listenMu.Lock()
	defer db.listenMu.Unlock()
	db.listenUses++
	if db.listenStop != nil {
		return // running for the other broker
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	db.listenStop, db.listenDone = cancel, done
	go func() {
		defer close(done)
		db.listen(ctx)
	}()
}

// cancelListening is called by a broker (under its lock) after its last
// subscription closed; the LISTEN loop ends, without being waited for (its
// Publish takes a broker's lock), once no broker uses it.
func (db *DB) cancelListening() {
	db.listenMu.Lock()
	defer db.listenMu.Unlock()
	db.listenUses--
	if db.listenUses == 0 && db.listenStop != nil {
		db.listenStop()
		db.listenStop = nil
	}
}

// stopListening ends the LISTEN loop and waits for it.
func (db *DB) stopListening() {
	db.listenMu.Lock()
	stop, done := db.listenStop, db.listenDone
	db.listenStop = nil
	db.listenMu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (db *DB) listen(ctx context.Context) {
	retry := backoff.Policy{Initial: 100 * time.Millisecond, Max: 10 * time.Second}
	failures := 0 // since the last connection
	for reconnect := false; ; reconnect = true {
		err := db.listenOnce(ctx, reconnect, func() { failures = 0 })
		if ctx.Err() != nil {
			return
		}
		failures++
		wait := retry.Ceiling(failures)
		db.logger.WarnContext(ctx, "listen for advances: connection lost; reconnecting", "err", mapErr("listen", err), "backoff", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

func (db *DB) listenOnce(ctx context.Context, recheck bool, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+advancesChannel+"; LISTEN "+wakesChannel); err != nil {
		return err
	}
	connected()
	if recheck {
		db.wakes.Publish(store.PeerWake{}) // wakes sent while it was down are lost: every link backfills
		// LISTEN is in place: whatever commits from now on is heard, and
		// what committed while the connection was down is in the heads.
		rows, err := conn.Query(ctx, selectHeads)
		if err != nil {
			return err
		}
		var id string
		var seq int64
		_, err = pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
			db.advances.Publish(id, seq)
			return nil
		})
		if err != nil {
			return err
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == wakesChannel {
			i := strings.LastIndexByte(n.Payload, ' ')
			if i <= 0 || i == len(n.Payload)-1 {
				db.logger.WarnContext(ctx, "listen for peer wakes: malformed payload ignored")
				continue
			}
			db.wakes.Publish(store.PeerWake{ProjectID: n.Payload[:i], PeerID: n.Payload[i+1:]})
			continue
		}
		if n.Channel != advancesChannel {
			continue
		}
		projectID, seq, ok := parseAdvance(n.Payload)
		if !ok {
			db.logger.WarnContext(ctx, "listen for advances: malformed payload ignored")
			continue
		}
		db.advances.Publish(projectID, seq)
	}
}

// wakesChannel is the LISTEN/NOTIFY channel of store.PeerWake (payload
// "project_id peer_id"), heard on the advances' LISTEN connection.
const wakesChannel = "acrelay_peer_wakes"

var _ store.PeerWakes = (*DB)(nil)

// WakePeer implements store.PeerWakes: a NOTIFY every process listening
// on this database hears (this one too). Errors: store.ErrUnavailable.
func (db *DB) WakePeer(ctx context.Context, projectID, peerID string) error {
	if _, err := db.pool.Exec(ctx, `SELECT pg_notify('`+wakesChannel+`', $1)`, projectID+" "+peerID); err != nil {
		return mapErr("wake peer", err)
	}
	return nil
}

// SubscribePeerWakes implements store.PeerWakes: the wakes any process
// sends on this database, heard through the LISTEN connection (opened
// with the first subscription to advances or wakes, closed after the
// last); after it reconnects the zero PeerWake is published.
func (db *DB) SubscribePeerWakes() *store.PeerWakeSubscription {
	return db.wakes.SubscribePeerWakes()
}
