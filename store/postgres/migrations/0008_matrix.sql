-- Why: the Matrix courier binds projects to rooms, records which parts of which record reached which room (so a room sees each record once across crashes), queues room submissions durably by Matrix event id (so each is answered once across restarts) and keeps a bot's sync token (spec/matrix.md "Decisions").
--
-- Query paths and the index that serves each:
--   MatrixBindings / MatrixBinding       matrix_bindings_project (project_id, binding_id)
--   MatrixRoomBindings                   matrix_bindings_room (room_id)
--   MatrixSentParts / RecordMatrixSent   matrix_sent PK (room_id, event_id, part)
--   PendingMatrixSubmissions             matrix_submissions_pending (received_at) WHERE NOT done
--   Enqueue / Complete / Outcome         matrix_submissions PK (matrix_event_id)

-- +goose Up
CREATE TABLE matrix_bindings (
    binding_id    text COLLATE "C" PRIMARY KEY,
    project_id    text NOT NULL REFERENCES projects (id),
    repository_id text NOT NULL DEFAULT '',
    room_id       text NOT NULL,
    created_at    timestamptz NOT NULL
);
CREATE INDEX matrix_bindings_project ON matrix_bindings (project_id, binding_id);
CREATE INDEX matrix_bindings_room ON matrix_bindings (room_id);

CREATE TABLE matrix_sent (
    room_id         text NOT NULL,
    event_id        text NOT NULL,
    part            text NOT NULL,
    matrix_event_id text NOT NULL,
    sent_at         timestamptz NOT NULL,
    PRIMARY KEY (room_id, event_id, part)
);

CREATE TABLE matrix_submissions (
    matrix_event_id text COLLATE "C" PRIMARY KEY,
    room_id         text NOT NULL,
    sender          text NOT NULL,
    event           bytea NOT NULL,
    outcome         bytea,
    reply_event_id  text NOT NULL DEFAULT '',
    done            boolean NOT NULL DEFAULT false,
    received_at     timestamptz NOT NULL
);
CREATE INDEX matrix_submissions_pending ON matrix_submissions (received_at) WHERE NOT done;

CREATE TABLE matrix_sync (
    sync_key text COLLATE "C" PRIMARY KEY,
    since    text NOT NULL
);

-- +goose Down
DROP TABLE matrix_sync;
DROP TABLE matrix_submissions;
DROP TABLE matrix_sent;
DROP TABLE matrix_bindings;
