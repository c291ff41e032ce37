-- Why: the first PostgreSQL schema: registry, append-only event log with receipts, parents, claim lineage with its ready frontier and branch tips (spec §3, §7, §8, §10); the same tables as store/sqlite's 0001.
--
-- Query paths and the index that serves each:
--   registry lookups by id                      primary keys
--   ActiveIdentityIDs(project, after, limit)    identities_project_status (project_id, status, id)
--   Append: next receipt                        projects row (last_seq counter, one row per project)
--   Append: exact retry / collision             events_event_id UNIQUE (project_id, event_id)
--   Append: session fork lookup                 events_session (project_id, identity_id, device_id, session_id, session_seq)
--   Events(q) by repository / thread            events_repository (project_id, repository_id, received_seq)
--                                               events_thread (project_id, repository_id, thread_id, received_seq)
--   missing_parents of a record                 parents PK (project_id, event_id, parent_id) + events_event_id
--   records whose parent just arrived (voice)   parents_parent (project_id, parent_id)
--   lineage row of a claim event                claim_lineage PK (project_id, event_id)
--   rows waiting on a predecessor               lineage_waiting PK (project_id, predecessor_event_id, event_id)
--   frontier in arrival order                   lineage_frontier_queue (project_id, id)
--   live claims of a repository                 claim_tips_live (project_id, repository_id, expires_at)
--   siblings of one claim (conflicts)           claim_tips_claim (project_id, repository_id, claim_id)
--
-- Identifiers are text COLLATE "C": every ORDER BY on them is byte order,
-- whatever the database's default collation. Times are timestamptz written
-- by the database clock truncated to milliseconds (see doc.go).
-- Appends and lineage work of one project are serialized by a
-- transaction-scoped advisory lock keyed by the project id, not by these
-- tables' row locks.

-- +goose Up
CREATE TABLE projects (
    id                 text COLLATE "C" PRIMARY KEY,
    created_at         timestamptz NOT NULL,
    last_seq           bigint NOT NULL DEFAULT 0,
    last_received_at   timestamptz,
    lineage_incomplete boolean NOT NULL DEFAULT false,
    lineage_changed_at timestamptz
);

-- Identity and key ids are scoped to their project (primary key
-- (project_id, id)): one project's ids are invisible to another, with no
-- existence oracle through a duplicate-id 409 (spec §11).
CREATE TABLE identities (
    id           text COLLATE "C" NOT NULL,
    project_id   text COLLATE "C" NOT NULL REFERENCES projects (id),
    display_name text NOT NULL,
    status       text NOT NULL CHECK (status IN ('active', 'inactive')),
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (project_id, id)
);

CREATE INDEX identities_project_status ON identities (project_id, status, id);

CREATE TABLE signing_keys (
    id          text COLLATE "C" NOT NULL,
    identity_id text COLLATE "C" NOT NULL,
    project_id  text COLLATE "C" NOT NULL REFERENCES projects (id),
    public_key  text NOT NULL,
    status      text NOT NULL CHECK (status IN ('active', 'revoked')),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (project_id, id),
    FOREIGN KEY (project_id, identity_id) REFERENCES identities (project_id, id)
);

CREATE INDEX signing_keys_identity ON signing_keys (project_id, identity_id);

CREATE TABLE tokens (
    id         text COLLATE "C" PRIMARY KEY,
    project_id text COLLATE "C" NOT NULL REFERENCES projects (id),
    scopes     text[] NOT NULL, -- scope words, in the order given
    hash       bytea NOT NULL,
    revoked    boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL
);

CREATE INDEX tokens_project ON tokens (project_id);

CREATE TABLE settings (
    name  text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);

-- One row per accepted event; never updated or deleted. canonical holds the
-- RFC 8785 bytes exactly as served.
CREATE TABLE events (
    project_id    text COLLATE "C" NOT NULL REFERENCES projects (id),
    received_seq  bigint NOT NULL,
    event_id      text COLLATE "C" NOT NULL,
    received_at   timestamptz NOT NULL,
    repository_id text COLLATE "C" NOT NULL,
    thread_id     text COLLATE "C" NOT NULL,
    kind          text NOT NULL,
    identity_id   text COLLATE "C" NOT NULL,
    device_id     text COLLATE "C" NOT NULL,
    session_id    text COLLATE "C" NOT NULL,
    session_seq   bigint NOT NULL,
    canonical     bytea NOT NULL,
    PRIMARY KEY (project_id, received_seq)
);

CREATE UNIQUE INDEX events_event_id ON events (project_id, event_id);
CREATE INDEX events_repository ON events (project_id, repository_id, received_seq);
CREATE INDEX events_thread ON events (project_id, repository_id, thread_id, received_seq);
CREATE INDEX events_session ON events (project_id, identity_id, device_id, session_id, session_seq);

-- The parents each event names (spec §7); missing_parents is computed at
-- read time as the parents with no events row in the project.
CREATE TABLE parents (
    project_id text COLLATE "C" NOT NULL,
    event_id   text COLLATE "C" NOT NULL,
    parent_id  text COLLATE "C" NOT NULL,
    PRIMARY KEY (project_id, event_id, parent_id)
);

CREATE INDEX parents_parent ON parents (project_id, parent_id);

-- The lineage state of each claim event (spec §8): its node fields and its
-- current status. root_identity_id is set once the status is valid.
CREATE TABLE claim_lineage (
    project_id           text COLLATE "C" NOT NULL,
    event_id             text COLLATE "C" NOT NULL,
    received_seq         bigint NOT NULL,
    repository_id        text COLLATE "C" NOT NULL,
    thread_id            text COLLATE "C" NOT NULL,
    claim_id             text COLLATE "C" NOT NULL,
    identity_id          text COLLATE "C" NOT NULL,
    device_id            text COLLATE "C" NOT NULL,
    session_id           text COLLATE "C" NOT NULL,
    kind                 text NOT NULL,
    generation           bigint NOT NULL,
    predecessor_event_id text COLLATE "C" NOT NULL, -- '' for claim.open
    paths                text[] NOT NULL,            -- scope.paths as signed
    expires_at           timestamptz,                -- NULL for claim.release
    status               text NOT NULL CHECK (status IN ('pending', 'valid', 'invalid')),
    root_identity_id     text COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (project_id, event_id)
);

CREATE INDEX claim_lineage_claim ON claim_lineage (project_id, repository_id, claim_id);

-- Pending children keyed by the predecessor they wait for.
CREATE TABLE lineage_waiting (
    project_id           text COLLATE "C" NOT NULL,
    predecessor_event_id text COLLATE "C" NOT NULL,
    event_id             text COLLATE "C" NOT NULL,
    PRIMARY KEY (project_id, predecessor_event_id, event_id)
);

-- The durable ready frontier: pending children whose predecessor is stored
-- and no longer pending, resolved in arrival order (id) at most 32 per append.
CREATE TABLE lineage_frontier (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id text COLLATE "C" NOT NULL,
    event_id   text COLLATE "C" NOT NULL
);

CREATE UNIQUE INDEX lineage_frontier_event ON lineage_frontier (project_id, event_id);
CREATE INDEX lineage_frontier_queue ON lineage_frontier (project_id, id);

-- Branch tips: valid claim events with no valid direct child.
CREATE TABLE claim_tips (
    project_id       text COLLATE "C" NOT NULL,
    event_id         text COLLATE "C" NOT NULL,
    received_seq     bigint NOT NULL,
    repository_id    text COLLATE "C" NOT NULL,
    thread_id        text COLLATE "C" NOT NULL,
    claim_id         text COLLATE "C" NOT NULL,
    kind             text NOT NULL,
    generation       bigint NOT NULL,
    root_identity_id text COLLATE "C" NOT NULL,
    device_id        text COLLATE "C" NOT NULL,
    session_id       text COLLATE "C" NOT NULL,
    paths            text[] NOT NULL, -- scope.paths as signed
    expires_at       timestamptz,     -- NULL for claim.release
    PRIMARY KEY (project_id, event_id)
);

CREATE INDEX claim_tips_live ON claim_tips (project_id, repository_id, expires_at);
CREATE INDEX claim_tips_claim ON claim_tips (project_id, repository_id, claim_id);
