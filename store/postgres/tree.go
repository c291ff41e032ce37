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
	selectTiles    = `SELECT t.level, t.n, t.strip, t.data FROM unnest($2::smallint[], $3::bigint[], $4::int[]) AS a(level, n, w)
		JOIN tlog_tiles t ON t.project_id = $1 AND t.level = a.level AND t.n = a.n AND t.strip * 32 < a.w` // 32: stripHashes
	insertTreeHead = `INSERT INTO tlog_heads (project_id, size, root, checkpoint, updated_at)
		VALUES ($1, $2, $3, $4, ` + nowMS + `) ON CONFLICT (project_id) DO NOTHING`
	updateTreeHead = `UPDATE tlog_heads SET size = $2, root = $3, checkpoint = $4, updated_at = ` + nowMS + `
		WHERE project_id = $1 AND size = $5`
	upsertTiles = `INSERT INTO tlog_tiles (project_id, level, n, strip, data)
		SELECT $1, a.level, a.n, a.strip, a.data FROM unnest($2::smallint[], $3::bigint[], $4::smallint[], $5::bytea[]) AS a(level, n, strip, data)
		ON CONFLICT (project_id, level, n, strip) DO UPDATE SET data = excluded.data
		WHERE octet_length(excluded.data) > octet_length(tlog_tiles.data)`
	selectLogKey = `SELECT skey FROM tlog_keys WHERE id = 1`
	insertLogKey = `INSERT INTO tlog_keys (id, skey) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`
)

// stripHashes is how many hashes one row of tlog_tiles holds (a strip of
// a tile; migration 0016): a partial tile's growth rewrites only its last
// strip.
const stripHashes = 32

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

// ReadTiles reads hash tiles at the widths asked, in one query, from
// their strips (store.Tree).
func (db *DB) ReadTiles(ctx context.Context, projectID string, tiles []tlog.Tile) ([][]byte, error) {
	levels := make([]int16, len(tiles))
	ns := make([]int64, len(tiles))
	ws := make([]int32, len(tiles))
	for i, t := range tiles {
		if t.H != 8 || t.L < 0 || t.L > 63 || t.W < 1 || t.W > 256 {
			return nil, fmt.Errorf("read tiles: %w", store.ErrNotFound)
		}
		levels[i], ns[i], ws[i] = int16(t.L), t.N, int32(t.W)
	}
	rows, err := db.pool.Query(ctx, selectTiles, projectID, levels, ns, ws)
	if err != nil {
		return nil, mapErr("read tiles", err)
	}
	type key struct {
		level int16
		n     int64
	}
	found := make(map[key][][]byte, len(tiles))
	for rows.Next() {
		var k key
		var strip int16
		var data []byte
		if err := rows.Scan(&k.level, &k.n, &strip, &data); err != nil {
			rows.Close()
			return nil, mapErr("read tiles", err)
		}
		strips := found[k]
		for len(strips) <= int(strip) {
			strips = append(strips, nil)
		}
		strips[strip] = data
		found[k] = strips
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("read tiles", err)
	}
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		need := t.W * tlog.HashSize
		data := make([]byte, 0, need)
		for s, strip := range found[key{int16(t.L), t.N}] {
			if len(data) != s*stripHashes*tlog.HashSize {
				break // a strip missing or short before this one
			}
			data = append(data, strip...)
		}
		if len(data) < need {
			return nil, fmt.Errorf("read tiles: %w", store.ErrNotFound)
		}
		out[i] = data[:need]
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
	// Each tile as its strips: a strip already stored at its width is
	// left as it is by the upsert's WHERE (no new row version).
	var levels, strips []int16
	var ns []int64
	var datas [][]byte
	for i, t := range tiles {
		for s, off := 0, 0; off < len(data[i]); s, off = s+1, off+stripHashes*tlog.HashSize {
			levels, ns, strips = append(levels, int16(t.L)), append(ns, t.N), append(strips, int16(s))
			datas = append(datas, data[i][off:min(off+stripHashes*tlog.HashSize, len(data[i]))])
		}
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
			if _, err := tx.Exec(ctx, upsertTiles, projectID, levels, ns, strips, datas); err != nil {
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
