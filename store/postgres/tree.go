package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
)

// Tree (store.Tree): the verifiable log's heads, hash tiles and log key
// (migration 0016).

var _ store.Tree = (*DB)(nil)

const (
	selectTreeHead = `SELECT size, root, checkpoint, updated_at FROM tlog_heads WHERE project_id = $1`
	selectTiles    = `SELECT t.level, t.n, t.data FROM unnest($2::smallint[], $3::bigint[]) AS a(level, n)
		JOIN tlog_tiles t ON t.project_id = $1 AND t.level = a.level AND t.n = a.n`
	insertTreeHead = `INSERT INTO tlog_heads (project_id, size, root, checkpoint, updated_at)
		VALUES ($1, $2, $3, $4, ` + nowMS + `) ON CONFLICT (project_id) DO NOTHING`
	updateTreeHead = `UPDATE tlog_heads SET size = $2, root = $3, checkpoint = $4, updated_at = ` + nowMS + `
		WHERE project_id = $1 AND size = $5`
	upsertTiles = `INSERT INTO tlog_tiles (project_id, level, n, data)
		SELECT $1, a.level, a.n, a.data FROM unnest($2::smallint[], $3::bigint[], $4::bytea[]) AS a(level, n, data)
		ON CONFLICT (project_id, level, n) DO UPDATE SET data = excluded.data
		WHERE octet_length(excluded.data) > octet_length(tlog_tiles.data)`
	selectLogKey = `SELECT skey FROM tlog_keys WHERE id = 1`
	insertLogKey = `INSERT INTO tlog_keys (id, skey) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`
)

// TreeHead reads a project's tree head (store.Tree).
func (db *DB) TreeHead(ctx context.Context, projectID string) (store.TreeHead, error) {
	var h store.TreeHead
	var root []byte
	var at time.Time
	err := db.pool.QueryRow(ctx, selectTreeHead, projectID).Scan(&h.Size, &root, &h.Checkpoint, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.TreeHead{}, nil
	}
	if err != nil {
		return store.TreeHead{}, mapErr("tree head", err)
	}
	if len(root) != len(h.Root) {
		return store.TreeHead{}, fmt.Errorf("tree head: %w: root of %d bytes", store.ErrUnavailable, len(root))
	}
	copy(h.Root[:], root)
	h.UpdatedAt = utc(at)
	return h, nil
}

// ReadTiles reads hash tiles at the widths asked, in one query
// (store.Tree).
func (db *DB) ReadTiles(ctx context.Context, projectID string, tiles []tlog.Tile) ([][]byte, error) {
	levels := make([]int16, len(tiles))
	ns := make([]int64, len(tiles))
	for i, t := range tiles {
		if t.H != 8 || t.L < 0 || t.L > 63 || t.W < 1 || t.W > 256 {
			return nil, fmt.Errorf("read tiles: %w", store.ErrNotFound)
		}
		levels[i], ns[i] = int16(t.L), t.N
	}
	rows, err := db.pool.Query(ctx, selectTiles, projectID, levels, ns)
	if err != nil {
		return nil, mapErr("read tiles", err)
	}
	found := make(map[[2]int64][]byte, len(tiles))
	for rows.Next() {
		var level int16
		var n int64
		var data []byte
		if err := rows.Scan(&level, &n, &data); err != nil {
			rows.Close()
			return nil, mapErr("read tiles", err)
		}
		found[[2]int64{int64(level), n}] = data
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("read tiles", err)
	}
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data := found[[2]int64{int64(t.L), t.N}]
		if len(data) < t.W*tlog.HashSize {
			return nil, fmt.Errorf("read tiles: %w", store.ErrNotFound)
		}
		out[i] = data[:t.W*tlog.HashSize]
	}
	return out, nil
}

// IntegrateTree stores tiles and a new head in one transaction, fenced on
// the old size (store.Tree): the head row is written first, so a second
// integrator of the same project waits on its row lock and then finds
// another size.
func (db *DB) IntegrateTree(ctx context.Context, projectID string, oldSize int64, tiles []tlog.Tile, data [][]byte, head store.TreeHead) error {
	if err := store.CheckTreeArgs(oldSize, tiles, data, head); err != nil {
		return err
	}
	levels := make([]int16, len(tiles))
	ns := make([]int64, len(tiles))
	for i, t := range tiles {
		levels[i], ns[i] = int16(t.L), t.N
	}
	return db.inTx(ctx, "integrate tree", pgx.TxOptions{}, func(tx pgx.Tx) error {
		q, args := updateTreeHead, []any{projectID, head.Size, head.Root[:], head.Checkpoint, oldSize}
		if oldSize == 0 {
			q, args = insertTreeHead, args[:4]
		}
		tag, err := tx.Exec(ctx, q, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return store.ErrConflict
		}
		if len(tiles) > 0 {
			if _, err := tx.Exec(ctx, upsertTiles, projectID, levels, ns, data); err != nil {
				return err
			}
		}
		return nil
	})
}

// LogKey returns the relay's log key, created once (store.Tree): the
// insert of the one row is ON CONFLICT DO NOTHING, and the row read after
// it is the key every process uses.
func (db *DB) LogKey(ctx context.Context, create func() (string, error)) (string, error) {
	var skey string
	err := db.pool.QueryRow(ctx, selectLogKey).Scan(&skey)
	if err == nil {
		return skey, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", mapErr("log key", err)
	}
	created, err := create()
	if err != nil {
		return "", fmt.Errorf("log key: %w", err)
	}
	if _, err := db.pool.Exec(ctx, insertLogKey, created); err != nil {
		return "", mapErr("log key", err)
	}
	if err := db.pool.QueryRow(ctx, selectLogKey).Scan(&skey); err != nil {
		return "", mapErr("log key", err)
	}
	return skey, nil
}
