-- Why: events_thread (project_id, repository_id, thread_id, received_seq)
-- was one of the two indexes each append dirtied a leaf of at random (one
-- hot leaf per busy thread), ~1.3 of the ~5.3 WAL pages an append wrote.
-- thread_events holds the same keys but is filled in bulk: the group
-- committer inserts a project's newest events, sorted, once at least
-- ThreadIndexEvery (256) of them are not in it yet, so each hot leaf is
-- written once per bulk insert instead of once per append.
--
-- Invariant: thread_events holds (at least) every event of the project
-- with received_seq <= projects.thread_indexed_seq; a thread-filtered read
-- takes those from thread_events and scans the newer tail of events (at
-- most a few hundred rows) in the same statement.
--
-- Query paths and what serves each:
--   Events by thread (after, limit), voice by thread   thread_events primary key + events tail
--   Bulk insert                                        events primary key (project_id, received_seq)

-- +goose Up
CREATE TABLE thread_events (
    project_id    TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    thread_id     TEXT NOT NULL,
    received_seq  INTEGER NOT NULL,
    PRIMARY KEY (project_id, repository_id, thread_id, received_seq)
) STRICT, WITHOUT ROWID;

ALTER TABLE projects ADD COLUMN thread_indexed_seq INTEGER NOT NULL DEFAULT 0;

INSERT INTO thread_events (project_id, repository_id, thread_id, received_seq)
SELECT project_id, repository_id, thread_id, received_seq FROM events
ORDER BY project_id, repository_id, thread_id, received_seq;

UPDATE projects SET thread_indexed_seq =
    coalesce((SELECT max(received_seq) FROM events WHERE events.project_id = projects.id), 0);

DROP INDEX events_thread;

-- +goose Down
CREATE INDEX events_thread ON events (project_id, repository_id, thread_id, received_seq);
DROP TABLE thread_events;
ALTER TABLE projects DROP COLUMN thread_indexed_seq;
