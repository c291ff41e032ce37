-- Why: the Matrix courier binds projects to rooms, records which parts of which record reached which room (so a room sees each record once across crashes), queues room submissions durably by Matrix event id (so each is answered once across restarts) and keeps a bot's sync token (spec/matrix.md "Decisions").
--
-- Query paths and the index that serves each:
--   MatrixBindings / MatrixBinding       matrix_bindings_project (project_id, binding_id)
--   MatrixRoomBindings                   matrix_bindings_room (room_id)
--   MatrixSentParts / RecordMatrixSent   matrix_sent PK (room_id, event_id, part)
--   PendingMatrixSubmissions             matrix_submissions_pending (received_at) WHERE done = 0
--   Enqueue / Complete / Outcome         matrix_submissions PK (matrix_event_id)

-- +goose Up
CREATE TABLE matrix_bindings (
    binding_id    TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects (id),
    repository_id TEXT NOT NULL DEFAULT '',
    room_id       TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX matrix_bindings_project ON matrix_bindings (project_id, binding_id);
CREATE INDEX matrix_bindings_room ON matrix_bindings (room_id);

CREATE TABLE matrix_sent (
    room_id         TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    part            TEXT NOT NULL,
    matrix_event_id TEXT NOT NULL,
    sent_at         TEXT NOT NULL,
    PRIMARY KEY (room_id, event_id, part)
) WITHOUT ROWID;

CREATE TABLE matrix_submissions (
    matrix_event_id TEXT PRIMARY KEY,
    room_id         TEXT NOT NULL,
    sender          TEXT NOT NULL,
    event           BLOB NOT NULL,
    outcome         BLOB,
    reply_event_id  TEXT NOT NULL DEFAULT '',
    done            INTEGER NOT NULL DEFAULT 0,
    received_at     TEXT NOT NULL
);
CREATE INDEX matrix_submissions_pending ON matrix_submissions (received_at) WHERE done = 0;

CREATE TABLE matrix_sync (
    sync_key TEXT PRIMARY KEY,
    since    TEXT NOT NULL
);

-- +goose Down
DROP TABLE matrix_sync;
DROP TABLE matrix_submissions;
DROP TABLE matrix_sent;
DROP TABLE matrix_bindings;
