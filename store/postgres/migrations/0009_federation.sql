-- Why: federation (spec/federation.md): a foreign record is accepted when its key was active at the remote's receipt time, so keys and identities keep when they stopped being active (revoked_at, deactivated_at); keys and identities imported from a peer's registry are marked with their source (the peer link's id, '' for local ones) and listed as such; peer links are kept with the remote's token so every process can run them.
--
-- Query paths and the index that serves each:
--   RegistryKeys(project, after, limit)          signing_keys PK (project_id, id), identities PK (project_id, id)
--   AppendAt: sender statuses and change times   signing_keys PK, identities PK (selectAppendState)
--   ImportKey                                    signing_keys PK, identities PK
--   ProjectEvents(project, after, limit)         events PK (project_id, received_seq)
--   Peers(project) / Peer / RemovePeer           federation_peers_project (project_id, peer_id), PK (peer_id)
--   CreatePeer: one link per (project, remote, repository)   federation_peers_link UNIQUE
-- Revocations and deactivations made before this migration have no time: such a key or identity is never active for a foreign record.

-- +goose Up
ALTER TABLE signing_keys ADD COLUMN revoked_at timestamptz;
ALTER TABLE signing_keys ADD COLUMN source text NOT NULL DEFAULT '';
ALTER TABLE identities ADD COLUMN deactivated_at timestamptz;
ALTER TABLE identities ADD COLUMN source text NOT NULL DEFAULT '';

CREATE TABLE federation_peers (
    peer_id       text COLLATE "C" PRIMARY KEY,
    project_id    text COLLATE "C" NOT NULL REFERENCES projects (id),
    remote_url    text NOT NULL,
    token         text NOT NULL, -- the remote's read capability: a secret, never listed
    repository_id text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL
);
CREATE INDEX federation_peers_project ON federation_peers (project_id, peer_id);
CREATE UNIQUE INDEX federation_peers_link ON federation_peers (project_id, remote_url, repository_id);

-- +goose Down
DROP TABLE federation_peers;
ALTER TABLE identities DROP COLUMN source;
ALTER TABLE identities DROP COLUMN deactivated_at;
ALTER TABLE signing_keys DROP COLUMN source;
ALTER TABLE signing_keys DROP COLUMN revoked_at;
