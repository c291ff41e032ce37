-- Why: the verifiable log in the C2SP witness ecosystem (issue 34): per project and external witness (tlog-witness), the witness's latest cosigned size as it told us and the last outcome, so restarts and other processes resume from it instead of size 0; and, for acrelay as a witness of other logs, the latest checkpoint cosigned per origin (compare-and-set on its size, so two processes never cosign two trees of one size).
--
-- Query paths and the index that serves each:
--   LogWitnessStates (one project or all) / SaveLogWitnessState   PK (project_id, witness)
--   WitnessedLog / SaveWitnessedLog                                 PK (origin)

-- +goose Up
CREATE TABLE log_witness_states (
    project_id    TEXT NOT NULL REFERENCES projects (id),
    witness       TEXT NOT NULL, -- the witness's verifier key, name+hash+key
    known_size    INTEGER NOT NULL,
    cosigned_size INTEGER NOT NULL,
    cosigned_at   TEXT NOT NULL DEFAULT '',
    last_error    TEXT NOT NULL DEFAULT '',
    error_at      TEXT NOT NULL DEFAULT '',
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (project_id, witness)
) STRICT;

CREATE TABLE witnessed_logs (
    origin     TEXT PRIMARY KEY,
    tree_size  INTEGER NOT NULL,
    root       BLOB NOT NULL,
    checkpoint BLOB NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE witnessed_logs;
DROP TABLE log_witness_states;
