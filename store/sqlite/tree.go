package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
)

// Tree (store.Tree): the verifiable log's heads, hash tiles and log key
// (migration 0018).

var _ store.Tree = (*DB)(nil)

const (
	selectTreeHead = `SELECT size, root, checkpoint, updated_at FROM tlog_heads WHERE project_id = ?`
	selectTile     = `SELECT data FROM tlog_tiles WHERE project_id = ? AND level = ? AND n = ?`
	insertTreeHead = `INSERT INTO tlog_heads (project_id, size, root, checkpoint, updated_at)
		VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ON CONFLICT (project_id) DO NOTHING`
	updateTreeHead = `UPDATE tlog_heads SET size = ?2, root = ?3, checkpoint = ?4, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
		WHERE project_id = ?1 AND size = ?5`
	upsertTile = `INSERT INTO tlog_tiles (project_id, level, n, data) VALUES (?, ?, ?, ?)
		ON CONFLICT (project_id, level, n) DO UPDATE SET data = excluded.data WHERE length(excluded.data) > length(tlog_tiles.data)`
	selectLogKey = `SELECT skey FROM tlog_keys WHERE id = 1`
	insertLogKey = `INSERT INTO tlog_keys (id, skey, created_at) VALUES (1, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ON CONFLICT (id) DO NOTHING`
)

// TreeHead reads a project's tree head (store.Tree).
func (db *DB) TreeHead(ctx context.Context, projectID string) (store.TreeHead, error) {
	var h store.TreeHead
	var root []byte
	var at string
	err := db.rd.QueryRowContext(ctx, selectTreeHead, projectID).Scan(&h.Size, &root, &h.Checkpoint, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return store.TreeHead{}, nil
	}
	if err != nil {
		return store.TreeHead{}, mapErr("tree head", err)
	}
	if len(root) != len(h.Root) {
		return store.TreeHead{}, fmt.Errorf("tree head: %w: root of %d bytes", store.ErrUnavailable, len(root))
	}
	copy(h.Root[:], root)
	h.UpdatedAt = parseTime(at)
	return h, nil
}

// ReadTiles reads hash tiles at the widths asked (store.Tree).
func (db *DB) ReadTiles(ctx context.Context, projectID string, tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if t.H != 8 || t.L < 0 || t.W < 1 || t.W > 256 {
			return nil, fmt.Errorf("read tiles: %w", store.ErrNotFound)
		}
		var data []byte
		if err := db.rd.QueryRowContext(ctx, selectTile, projectID, t.L, t.N).Scan(&data); err != nil {
			return nil, mapErr("read tiles", err)
		}
		if len(data) < t.W*tlog.HashSize {
			return nil, fmt.Errorf("read tiles: %w", store.ErrNotFound)
		}
		out[i] = data[:t.W*tlog.HashSize]
	}
	return out, nil
}

// IntegrateTree stores tiles and a new head, fenced on the old size
// (store.Tree).
func (db *DB) IntegrateTree(ctx context.Context, projectID string, oldSize int64, tiles []tlog.Tile, data [][]byte, head store.TreeHead) error {
	if err := store.CheckTreeArgs(oldSize, tiles, data, head); err != nil {
		return err
	}
	return db.writeTx(ctx, "integrate tree", func(tx *sql.Tx) error {
		var r sql.Result
		var err error
		if oldSize == 0 {
			r, err = tx.ExecContext(ctx, insertTreeHead, projectID, head.Size, head.Root[:], head.Checkpoint)
		} else {
			r, err = tx.ExecContext(ctx, updateTreeHead, projectID, head.Size, head.Root[:], head.Checkpoint, oldSize)
		}
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n != 1 {
			return errors.Join(store.ErrConflict, err)
		}
		for i, t := range tiles {
			if _, err := tx.ExecContext(ctx, upsertTile, projectID, t.L, t.N, data[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// LogKey returns the relay's log key, created once (store.Tree): another
// writer may have stored its key first, and the stored one counts.
func (db *DB) LogKey(ctx context.Context, create func() (string, error)) (string, error) {
	return db.engine().CreateOnce(ctx, "log key", selectLogKey, insertLogKey, create)
}
