-- Why: state that one process alone knew moves into the store (issue 26 item 3): the Matrix inbox's retry state per submission (attempts, next_attempt_at, last_error) and its final outcome, so one room that refuses replies stalls no other and any process can take a submission up; and the web view's sessions (hashed), so any process serves a signed-in page.
--
-- Query paths and the index that serves each:
--   ClaimMatrixSubmissions               matrix_submissions_due (next_attempt_at, matrix_event_id) WHERE done = 0
--   DeleteFinishedMatrixSubmissions      matrix_submissions_finished (finished_at) WHERE done = 1
--   UISession / Create / Delete          ui_sessions PK (session_hash)
--   DeleteExpiredUISessions              ui_sessions_expires (expires_at)

-- +goose Up
ALTER TABLE matrix_submissions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE matrix_submissions ADD COLUMN next_attempt_at TEXT NOT NULL DEFAULT '';
ALTER TABLE matrix_submissions ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
ALTER TABLE matrix_submissions ADD COLUMN final TEXT NOT NULL DEFAULT '';
ALTER TABLE matrix_submissions ADD COLUMN finished_at TEXT NOT NULL DEFAULT '';
UPDATE matrix_submissions SET next_attempt_at = received_at;
UPDATE matrix_submissions SET final = 'replied', finished_at = received_at WHERE done = 1;
DROP INDEX matrix_submissions_pending;
CREATE INDEX matrix_submissions_due ON matrix_submissions (next_attempt_at, matrix_event_id) WHERE done = 0;
CREATE INDEX matrix_submissions_finished ON matrix_submissions (finished_at) WHERE done = 1;

CREATE TABLE ui_sessions (
    session_hash BLOB PRIMARY KEY,
    project_id   TEXT NOT NULL,
    token_id     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);

-- +goose Down
DROP TABLE ui_sessions;
DROP INDEX matrix_submissions_finished;
DROP INDEX matrix_submissions_due;
CREATE INDEX matrix_submissions_pending ON matrix_submissions (received_at) WHERE done = 0;
ALTER TABLE matrix_submissions DROP COLUMN finished_at;
ALTER TABLE matrix_submissions DROP COLUMN final;
ALTER TABLE matrix_submissions DROP COLUMN last_error;
ALTER TABLE matrix_submissions DROP COLUMN next_attempt_at;
ALTER TABLE matrix_submissions DROP COLUMN attempts;
