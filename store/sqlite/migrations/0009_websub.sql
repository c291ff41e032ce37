-- Why: the embedded WebSub hub keeps verified subscriptions (one per project, topic and callback, each lease ended by the database clock) and its pending verifications of intent durably, so a restart neither loses nor repeats an accepted request (spec/websub.md "Subscribing").
--
-- Query paths and the index that serves each:
--   Subscription / RemoveSubscription / SetSubscriptionState   websub_subscriptions PK (id), project_id checked
--   ActivateSubscription (upsert) / DeleteSubscription         websub_subscriptions_key UNIQUE (project_id, topic, callback)
--   Subscriptions / SubscribedProjects                         websub_subscriptions_live (project_id, expires_at)
--   the new subscription's cursor                              courier_cursors PK (courier, project_id, target)
--   PendingVerifications                                       websub_verifications_pending (created_at, id)
--   DeleteVerification / RetryVerification                     websub_verifications PK (id)
-- Times are TEXT in RFC 3339 with milliseconds, UTC, from the database clock;
-- expires_at is compared with the database clock only.

-- +goose Up
CREATE TABLE websub_subscriptions (
    id            TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects (id),
    topic         TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    thread_id     TEXT NOT NULL DEFAULT '',
    format        TEXT NOT NULL CHECK (format IN ('atom', 'json')),
    callback      TEXT NOT NULL,
    secret        BLOB NOT NULL,
    token_id      TEXT NOT NULL DEFAULT '',
    lease_seconds INTEGER NOT NULL CHECK (lease_seconds >= 0),
    expires_at    TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('active', 'failing')),
    created_at    TEXT NOT NULL,
    verified_at   TEXT NOT NULL
) STRICT;

CREATE UNIQUE INDEX websub_subscriptions_key ON websub_subscriptions (project_id, topic, callback);
CREATE INDEX websub_subscriptions_live ON websub_subscriptions (project_id, expires_at);

CREATE TABLE websub_verifications (
    id            TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects (id),
    mode          TEXT NOT NULL CHECK (mode IN ('subscribe', 'unsubscribe')),
    topic         TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    thread_id     TEXT NOT NULL DEFAULT '',
    format        TEXT NOT NULL CHECK (format IN ('atom', 'json')),
    callback      TEXT NOT NULL,
    secret        BLOB NOT NULL,
    token_id      TEXT NOT NULL DEFAULT '',
    lease_seconds INTEGER NOT NULL CHECK (lease_seconds >= 0),
    attempts      INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL
) STRICT;

CREATE INDEX websub_verifications_pending ON websub_verifications (created_at, id);

-- +goose Down
DROP INDEX websub_verifications_pending;
DROP TABLE websub_verifications;
DROP INDEX websub_subscriptions_live;
DROP INDEX websub_subscriptions_key;
DROP TABLE websub_subscriptions;
