-- Why: witnessing in federation (issue 24 item 5, spec/tlog.md §Checkpoints): the relay's own witness key, the cosignatures peers made on this relay's checkpoints (served with the checkpoint), each peer link's latest verified and cosigned remote checkpoint with the keys it pinned, and split-view evidence (both notes), which outlives the link.
--
-- Query paths and the index that serves each:
--   WitnessKey                          PK (id), one row
--   SaveCosignature / Cosignatures      PK (project_id, key_name)
--   WitnessState / SaveWitnessState     PK (peer_id); RemovePeer: ON DELETE CASCADE
--   PeerWitnessKeys                     witness_states_project (project_id, peer_id)
--   SaveSplitView / SplitViews          PK (id); witness_split_views_project (project_id, id)

-- +goose Up
CREATE TABLE witness_key (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    skey       TEXT NOT NULL, -- a secret: the note signer key, never listed or logged
    created_at TEXT NOT NULL
) STRICT;

CREATE TABLE log_cosignatures (
    project_id TEXT NOT NULL REFERENCES projects (id),
    key_name   TEXT NOT NULL,
    tree_size  INTEGER NOT NULL,
    root       BLOB NOT NULL,
    body       BLOB NOT NULL,
    line       TEXT NOT NULL,
    signed_at  TEXT NOT NULL,
    stored_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, key_name)
) STRICT;

CREATE TABLE witness_states (
    peer_id     TEXT PRIMARY KEY REFERENCES federation_peers (peer_id) ON DELETE CASCADE,
    project_id  TEXT NOT NULL,
    log_key     TEXT NOT NULL,
    witness_key TEXT NOT NULL DEFAULT '',
    tree_size   INTEGER NOT NULL,
    root        BLOB NOT NULL,
    checkpoint  BLOB,
    cosigned_at TEXT NOT NULL
) STRICT;
CREATE INDEX witness_states_project ON witness_states (project_id, peer_id);

CREATE TABLE witness_split_views (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id  TEXT NOT NULL,
    peer_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    origin      TEXT NOT NULL,
    cosigned    BLOB NOT NULL,
    seen        BLOB NOT NULL,
    detected_at TEXT NOT NULL
) STRICT;
CREATE INDEX witness_split_views_project ON witness_split_views (project_id, id);

-- +goose Down
DROP TABLE witness_split_views;
DROP TABLE witness_states;
DROP TABLE log_cosignatures;
DROP TABLE witness_key;
