-- Why: a peer link's WebSub subscriber state (its latest hub request with its random id, mode and time, the HMAC secret, the verified state and lease) was kept in the process holding the link's lease; in the store, any process behind the callback URL answers the remote hub's verification and authenticates a push (issue 26 item 3). The secret is kept as the HMAC key it is (it must be read to verify a push), like the peer's token, and never listed.
--
-- Query paths and the index that serves each:
--   PeerSubscription / SavePeerSubscription / ReplacePeerSubscription   PK (peer_id)
--   RemovePeer                                                          ON DELETE CASCADE

-- +goose Up
CREATE TABLE federation_subscriptions (
    peer_id       TEXT PRIMARY KEY REFERENCES federation_peers (peer_id) ON DELETE CASCADE,
    project_id    TEXT NOT NULL,
    topic         TEXT NOT NULL,
    request_id    TEXT NOT NULL,
    mode          TEXT NOT NULL,
    secret        BLOB,
    requested_at  TEXT NOT NULL,
    failed        INTEGER NOT NULL DEFAULT 0,
    state         TEXT NOT NULL,
    verified      INTEGER NOT NULL DEFAULT 0,
    lease_seconds INTEGER NOT NULL DEFAULT 0,
    verified_at   TEXT,
    reason        TEXT NOT NULL DEFAULT ''
) STRICT;

-- +goose Down
DROP TABLE federation_subscriptions;
