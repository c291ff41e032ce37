-- Why: state that one process alone knew moves into the store (issue 26 item 3): the Matrix inbox's retry state per submission (attempts, next_attempt_at, last_error) and its final outcome, so one room that refuses replies stalls no other and any process can take a submission up; and the web view's sessions (hashed), so any process serves a signed-in page.
--
-- Query paths and the index that serves each:
--   ClaimMatrixSubmissions               matrix_submissions_due (next_attempt_at, matrix_event_id) WHERE NOT done
--   DeleteFinishedMatrixSubmissions      matrix_submissions_finished (finished_at) WHERE done
--   UISession / Create / Delete          ui_sessions PK (session_hash)
--   DeleteExpiredUISessions              ui_sessions_expires (expires_at)

-- +goose Up
ALTER TABLE matrix_submissions
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN next_attempt_at timestamptz,
    ADD COLUMN last_error text NOT NULL DEFAULT '',
    ADD COLUMN final text NOT NULL DEFAULT '',
    ADD COLUMN finished_at timestamptz;
UPDATE matrix_submissions SET next_attempt_at = received_at;
UPDATE matrix_submissions SET final = 'replied', finished_at = received_at WHERE done;
ALTER TABLE matrix_submissions ALTER COLUMN next_attempt_at SET NOT NULL;
DROP INDEX matrix_submissions_pending;
CREATE INDEX matrix_submissions_due ON matrix_submissions (next_attempt_at, matrix_event_id) WHERE NOT done;
CREATE INDEX matrix_submissions_finished ON matrix_submissions (finished_at) WHERE done;

CREATE TABLE ui_sessions (
    session_hash bytea PRIMARY KEY,
    project_id   text NOT NULL,
    token_id     text NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);

-- +goose Down
DROP TABLE ui_sessions;
DROP INDEX matrix_submissions_finished;
DROP INDEX matrix_submissions_due;
CREATE INDEX matrix_submissions_pending ON matrix_submissions (received_at) WHERE NOT done;
ALTER TABLE matrix_submissions
    DROP COLUMN finished_at,
    DROP COLUMN final,
    DROP COLUMN last_error,
    DROP COLUMN next_attempt_at,
    DROP COLUMN attempts;
