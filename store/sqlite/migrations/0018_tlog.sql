-- Why: the verifiable log (issue 24, spec tlog.md): each project's Merkle tree over its records, written by the sequencer after the records' transactions (never inside them), and the relay's log key that signs the trees' checkpoints. The key is kept in the database so that `acrelay backup` (VACUUM INTO) carries it with the records it signs.
--
-- Query paths and the index that serves each:
--   TreeHead                          PK (project_id) of tlog_heads
--   IntegrateTree: the fenced head    PK (project_id) of tlog_heads (UPDATE … WHERE size = old, or INSERT for the first)
--   IntegrateTree / ReadTiles         PK (project_id, level, n) of tlog_tiles
--   LogKey                            PK (id) of tlog_keys (one row)

-- +goose Up
CREATE TABLE tlog_heads (
    project_id TEXT PRIMARY KEY,
    size       INTEGER NOT NULL CHECK (size > 0),
    root       BLOB NOT NULL,
    checkpoint BLOB NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;

-- One row per hash tile (height 8): a full tile holds 256 hashes (8192
-- bytes) and never changes; the partial tile at the right edge of each
-- level is replaced by a wider one as the tree grows.
CREATE TABLE tlog_tiles (
    project_id TEXT NOT NULL,
    level      INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    data       BLOB NOT NULL,
    PRIMARY KEY (project_id, level, n)
) STRICT, WITHOUT ROWID;

CREATE TABLE tlog_keys (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    skey       TEXT NOT NULL,
    created_at TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE tlog_keys;
DROP TABLE tlog_tiles;
DROP TABLE tlog_heads;
