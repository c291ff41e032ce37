-- Why: handoff contracts (spec/handoff-contract-1.md) are stored per project as append-only versions, and a handoff's GET lists the correspondence handoff events whose body.handoff_id names it, so those references are indexed when events are appended; the same tables as store/sqlite's 0003.
--
-- Query paths and the index that serves each:
--   Handoff(project, id) / AppendHandoffVersion    handoffs PK (project_id, handoff_id)
--   CreateHandoff: idempotent replay                handoffs_idempotency_key UNIQUE (project_id, idempotency_key)
--   Handoffs(q) newest first                        handoffs_created (project_id, created_at, handoff_id)
--   Handoffs(q) by state                            handoffs_state (project_id, state, created_at, handoff_id)
--   Handoffs(q) by assignee                         handoffs_assignee (project_id, assignee_id, created_at, handoff_id)
--   HandoffVersions(project, id, after)             handoff_versions PK (project_id, handoff_id, version)
--   HandoffEvents(project, id)                      handoff_refs PK (project_id, handoff_id, received_seq)
-- handoff_versions rows are never updated or deleted. handoff_refs is filled
-- by Append for every handoff event with a string body.handoff_id, whether or
-- not the contract exists, and is backfilled here from stored events.
-- Writes of one project's contracts take the project's stream lock.

-- +goose Up
CREATE TABLE handoffs (
    project_id      text COLLATE "C" NOT NULL REFERENCES projects (id),
    handoff_id      text COLLATE "C" NOT NULL,
    idempotency_key text COLLATE "C" NOT NULL,
    current_version bigint NOT NULL CHECK (current_version >= 1),
    state           text COLLATE "C" NOT NULL,
    assignee_id     text COLLATE "C" NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (project_id, handoff_id)
);

CREATE UNIQUE INDEX handoffs_idempotency_key ON handoffs (project_id, idempotency_key);
CREATE INDEX handoffs_created ON handoffs (project_id, created_at, handoff_id);
CREATE INDEX handoffs_state ON handoffs (project_id, state, created_at, handoff_id);
CREATE INDEX handoffs_assignee ON handoffs (project_id, assignee_id, created_at, handoff_id);

CREATE TABLE handoff_versions (
    project_id  text COLLATE "C" NOT NULL,
    handoff_id  text COLLATE "C" NOT NULL,
    version     bigint NOT NULL CHECK (version >= 1),
    contract    bytea NOT NULL, -- RFC 8785 bytes of the normalized contract
    state       text COLLATE "C" NOT NULL,
    assignee_id text COLLATE "C" NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (project_id, handoff_id, version),
    FOREIGN KEY (project_id, handoff_id) REFERENCES handoffs (project_id, handoff_id)
);

CREATE TABLE handoff_refs (
    project_id   text COLLATE "C" NOT NULL,
    handoff_id   text COLLATE "C" NOT NULL,
    received_seq bigint NOT NULL,
    event_id     text COLLATE "C" NOT NULL,
    PRIMARY KEY (project_id, handoff_id, received_seq)
);

INSERT INTO handoff_refs (project_id, handoff_id, received_seq, event_id)
SELECT project_id, convert_from(canonical, 'UTF8')::jsonb -> 'body' ->> 'handoff_id', received_seq, event_id
FROM events
WHERE kind = 'handoff' AND jsonb_typeof(convert_from(canonical, 'UTF8')::jsonb -> 'body' -> 'handoff_id') = 'string';
