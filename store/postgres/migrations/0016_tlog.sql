-- Why: the verifiable log (issue 24, spec tlog.md): each project's Merkle tree over its records, written by the sequencer after the records' transactions (never inside them, so appends from several processes never wait on tile rows), and the relay's log key that signs the trees' checkpoints, kept with the store (PostgreSQL is backed up with its own tools, which carry it).
--
-- Query paths and the index that serves each:
--   TreeHead                          PK (project_id) of tlog_heads
--   IntegrateTree: the fenced head    PK (project_id) of tlog_heads (UPDATE … WHERE size = old, or INSERT … ON CONFLICT DO NOTHING for the first)
--   IntegrateTree / ReadTiles         PK (project_id, level, n) of tlog_tiles
--   LogKey                            PK (id) of tlog_keys (one row; INSERT … ON CONFLICT DO NOTHING)

-- +goose Up
CREATE TABLE tlog_heads (
    project_id text COLLATE "C" PRIMARY KEY,
    size       bigint NOT NULL CHECK (size > 0),
    root       bytea NOT NULL,
    checkpoint bytea NOT NULL,
    updated_at timestamptz NOT NULL
);

-- One row per hash tile (height 8): a full tile holds 256 hashes (8192
-- bytes) and never changes; the partial tile at the right edge of each
-- level is replaced by a wider one as the tree grows. Hashes do not
-- compress: EXTERNAL stores them out of line without trying.
CREATE TABLE tlog_tiles (
    project_id text COLLATE "C" NOT NULL,
    level      smallint NOT NULL,
    n          bigint NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (project_id, level, n)
);
ALTER TABLE tlog_tiles ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE tlog_keys (
    id         smallint PRIMARY KEY CHECK (id = 1),
    skey       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE tlog_keys;
DROP TABLE tlog_tiles;
DROP TABLE tlog_heads;
