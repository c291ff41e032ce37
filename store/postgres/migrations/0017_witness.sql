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
    id         integer PRIMARY KEY CHECK (id = 1),
    skey       text NOT NULL, -- a secret: the note signer key, never listed or logged
    created_at timestamptz NOT NULL
);

CREATE TABLE log_cosignatures (
    project_id text COLLATE "C" NOT NULL REFERENCES projects (id),
    key_name   text COLLATE "C" NOT NULL,
    tree_size  bigint NOT NULL,
    root       bytea NOT NULL,
    body       bytea NOT NULL,
    line       text NOT NULL,
    signed_at  timestamptz NOT NULL,
    stored_at  timestamptz NOT NULL,
    PRIMARY KEY (project_id, key_name)
);

CREATE TABLE witness_states (
    peer_id     text COLLATE "C" PRIMARY KEY REFERENCES federation_peers (peer_id) ON DELETE CASCADE,
    project_id  text COLLATE "C" NOT NULL,
    log_key     text NOT NULL,
    witness_key text NOT NULL DEFAULT '',
    tree_size   bigint NOT NULL,
    root        bytea NOT NULL,
    checkpoint  bytea,
    cosigned_at timestamptz NOT NULL
);
CREATE INDEX witness_states_project ON witness_states (project_id, peer_id);

CREATE TABLE witness_split_views (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id  text COLLATE "C" NOT NULL,
    peer_id     text COLLATE "C" NOT NULL,
    kind        text NOT NULL,
    origin      text NOT NULL,
    cosigned    bytea NOT NULL,
    seen        bytea NOT NULL,
    detected_at timestamptz NOT NULL
);
CREATE INDEX witness_split_views_project ON witness_split_views (project_id, id);

-- +goose Down
DROP TABLE witness_split_views;
DROP TABLE witness_states;
DROP TABLE log_cosignatures;
DROP TABLE witness_key;
