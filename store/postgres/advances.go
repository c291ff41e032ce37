package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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

// ListenAdvances calls f for every append committed by any process on this
// database (store.Advances), on a dedicated connection outside the pool,
// until ctx ends; it then returns ctx's error. A lost connection is
// re-established with backoff; appends committed while it was down are
// not replayed (listeners must treat notifications as wake-ups and read
// by cursor). f runs on the listening goroutine and should not block.
func (db *DB) ListenAdvances(ctx context.Context, f func(projectID string, receivedSeq int64)) error {
	backoff := 100 * time.Millisecond
	for {
		err := db.listenOnce(ctx, f, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		db.logger.WarnContext(ctx, "listen for advances: connection lost; reconnecting", "err", mapErr("listen", err), "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func (db *DB) listenOnce(ctx context.Context, f func(string, int64), connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+advancesChannel); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel != advancesChannel {
			continue
		}
		projectID, seq, ok := parseAdvance(n.Payload)
		if !ok {
			db.logger.WarnContext(ctx, "listen for advances: malformed payload ignored")
			continue
		}
		f(projectID, seq)
	}
}
