-- Why: handoff contracts (spec/handoff-contract-1.md) are stored per project as append-only versions, and a handoff's GET lists the correspondence handoff events whose body.handoff_id names it, so those references are indexed when events are appended.
--
-- Query paths and the index that serves each:
--   Handoff(project, id) / AppendHandoffVersion    handoffs PK (project_id, handoff_id)
--   CreateHandoff: idempotent replay                handoffs_idempotency_key UNIQUE (project_id, idempotency_key)
--   Handoffs(q) newest first                        handoffs_created (project_id, created_at, handoff_id)
--   Handoffs(q) by state                            handoffs_state (project_id, state, created_at, handoff_id)
--   Handoffs(q) by assignee                         handoffs_assignee (project_id, assignee_id, created_at, handoff_id)
--   HandoffVersions(project, id, after)             handoff_versions PK (project_id, handoff_id, version)
--   HandoffEvents(project, id)                      handoff_refs PK (project_id, handoff_id, received_seq)
-- handoffs is the head row of each contract (its current version, state and
-- assignee, for filtering); handoff_versions rows are never updated or
-- deleted. handoff_refs is filled by Append for every handoff event with a
-- body.handoff_id, whether or not the contract exists, and is backfilled
-- here from the events already stored.
-- Times are TEXT in RFC 3339 with milliseconds, UTC, from the database clock.

-- +goose Up
CREATE TABLE handoffs (
    project_id      TEXT NOT NULL REFERENCES projects (id),
    handoff_id      TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    current_version INTEGER NOT NULL CHECK (current_version >= 1),
    state           TEXT NOT NULL,
    assignee_id     TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (project_id, handoff_id)
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX handoffs_idempotency_key ON handoffs (project_id, idempotency_key);
CREATE INDEX handoffs_created ON handoffs (project_id, created_at, handoff_id);
CREATE INDEX handoffs_state ON handoffs (project_id, state, created_at, handoff_id);
CREATE INDEX handoffs_assignee ON handoffs (project_id, assignee_id, created_at, handoff_id);

CREATE TABLE handoff_versions (
    project_id  TEXT NOT NULL,
    handoff_id  TEXT NOT NULL,
    version     INTEGER NOT NULL CHECK (version >= 1),
    contract    BLOB NOT NULL, -- RFC 8785 bytes of the normalized contract
    state       TEXT NOT NULL,
    assignee_id TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, handoff_id, version),
    FOREIGN KEY (project_id, handoff_id) REFERENCES handoffs (project_id, handoff_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE handoff_refs (
    project_id   TEXT NOT NULL,
    handoff_id   TEXT NOT NULL,
    received_seq INTEGER NOT NULL,
    event_id     TEXT NOT NULL,
    PRIMARY KEY (project_id, handoff_id, received_seq)
) STRICT, WITHOUT ROWID;

INSERT INTO handoff_refs (project_id, handoff_id, received_seq, event_id)
SELECT project_id, json_extract(CAST(canonical AS TEXT), '$.body.handoff_id'), received_seq, event_id
FROM events
WHERE kind = 'handoff' AND json_type(CAST(canonical AS TEXT), '$.body.handoff_id') = 'text';
