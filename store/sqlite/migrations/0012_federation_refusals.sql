-- Why: refused foreign records are durable and visible (issue 23, spec/federation.md "Trust"): each is kept with its reason per peer link; one that may pass (its key not known here yet) keeps its bytes so the link retries it after the next registry sync or backfill round, and the remote cursor waits for it.
--
-- Query paths and the index that serves each:
--   SaveRefusal / DeleteRefusal (peer, remote seq)         PK (peer_id, remote_seq)
--   PendingRefusals(peer, after, limit)                    federation_refusals_pending (peer_id, final, remote_seq)
--   SummarizeRefusals(peer): counts by reason, latest      PK scan of the peer's rows (bounded by what it refused)
--   RemovePeer                                             ON DELETE CASCADE from federation_peers

-- +goose Up
CREATE TABLE federation_refusals (
    peer_id            TEXT NOT NULL REFERENCES federation_peers (peer_id) ON DELETE CASCADE,
    remote_seq         INTEGER NOT NULL,
    project_id         TEXT NOT NULL,
    event_id           TEXT NOT NULL DEFAULT '',
    reason             TEXT NOT NULL,
    final              INTEGER NOT NULL DEFAULT 0,
    record             BLOB, -- the record's bytes while it may pass; NULL once final
    remote_received_at TEXT,
    attempts           INTEGER NOT NULL DEFAULT 1,
    first_refused_at   TEXT NOT NULL,
    refused_at         TEXT NOT NULL,
    PRIMARY KEY (peer_id, remote_seq)
) STRICT;
CREATE INDEX federation_refusals_pending ON federation_refusals (peer_id, final, remote_seq);

-- +goose Down
DROP TABLE federation_refusals;
