-- Why: a peer link's WebSub subscriber state (its latest hub request with its random id, mode and time, the HMAC secret, the verified state and lease) was kept in the process holding the link's lease; in the store, any process behind the callback URL answers the remote hub's verification and authenticates a push (issue 26 item 3). The secret is kept as the HMAC key it is (it must be read to verify a push), like the peer's token, and never listed.
--
-- Query paths and the index that serves each:
--   PeerSubscription / SavePeerSubscription / ReplacePeerSubscription   PK (peer_id)
--   RemovePeer                                                          ON DELETE CASCADE

-- +goose Up
CREATE TABLE federation_subscriptions (
    peer_id       text COLLATE "C" PRIMARY KEY REFERENCES federation_peers (peer_id) ON DELETE CASCADE,
    project_id    text COLLATE "C" NOT NULL,
    topic         text NOT NULL,
    request_id    text NOT NULL,
    mode          text NOT NULL,
    secret        bytea,
    requested_at  timestamptz NOT NULL,
    failed        boolean NOT NULL DEFAULT false,
    state         text NOT NULL,
    verified      boolean NOT NULL DEFAULT false,
    lease_seconds bigint NOT NULL DEFAULT 0,
    verified_at   timestamptz,
    reason        text NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE federation_subscriptions;
