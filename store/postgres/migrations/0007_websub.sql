-- Why: the embedded WebSub hub keeps verified subscriptions (one per project, topic and callback, each lease ended by the database clock) and its pending verifications of intent durably, so a restart neither loses nor repeats an accepted request (spec/websub.md "Subscribing").
--
-- Query paths and the index that serves each:
--   Subscription / RemoveSubscription / SetSubscriptionState   websub_subscriptions PK (id), project_id checked
--   ActivateSubscription (upsert) / DeleteSubscription         websub_subscriptions_key UNIQUE (project_id, topic, callback)
--   Subscriptions / SubscribedProjects                         websub_subscriptions_live (project_id, expires_at)
--   the new subscription's cursor                              courier_cursors PK (courier, project_id, target)
--   PendingVerifications                                       websub_verifications_pending (created_at, id)
--   DeleteVerification / RetryVerification                     websub_verifications PK (id)
-- Times are timestamptz from the database clock;
-- expires_at is compared with the database clock only.

-- +goose Up
CREATE TABLE websub_subscriptions (
    id            text COLLATE "C" PRIMARY KEY,
    project_id    text COLLATE "C" NOT NULL REFERENCES projects (id),
    topic         text COLLATE "C" NOT NULL,
    repository_id text COLLATE "C" NOT NULL,
    thread_id     text COLLATE "C" NOT NULL DEFAULT '',
    format        text COLLATE "C" NOT NULL CHECK (format IN ('atom', 'json')),
    callback      text COLLATE "C" NOT NULL,
    secret        bytea NOT NULL,
    token_id      text COLLATE "C" NOT NULL DEFAULT '',
    lease_seconds bigint NOT NULL CHECK (lease_seconds >= 0),
    expires_at    timestamptz NOT NULL,
    state         text COLLATE "C" NOT NULL CHECK (state IN ('active', 'failing')),
    created_at    timestamptz NOT NULL,
    verified_at   timestamptz NOT NULL
);

CREATE UNIQUE INDEX websub_subscriptions_key ON websub_subscriptions (project_id, topic, callback);
CREATE INDEX websub_subscriptions_live ON websub_subscriptions (project_id, expires_at);

CREATE TABLE websub_verifications (
    id            text COLLATE "C" PRIMARY KEY,
    project_id    text COLLATE "C" NOT NULL REFERENCES projects (id),
    mode          text COLLATE "C" NOT NULL CHECK (mode IN ('subscribe', 'unsubscribe')),
    topic         text COLLATE "C" NOT NULL,
    repository_id text COLLATE "C" NOT NULL,
    thread_id     text COLLATE "C" NOT NULL DEFAULT '',
    format        text COLLATE "C" NOT NULL CHECK (format IN ('atom', 'json')),
    callback      text COLLATE "C" NOT NULL,
    secret        bytea NOT NULL,
    token_id      text COLLATE "C" NOT NULL DEFAULT '',
    lease_seconds bigint NOT NULL CHECK (lease_seconds >= 0),
    attempts      integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL
);

CREATE INDEX websub_verifications_pending ON websub_verifications (created_at, id);

-- +goose Down
DROP INDEX websub_verifications_pending;
DROP TABLE websub_verifications;
DROP INDEX websub_subscriptions_live;
DROP INDEX websub_subscriptions_key;
DROP TABLE websub_subscriptions;
