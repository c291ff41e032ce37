-- Why: the session index is the widest of the event indexes (project,
-- identity, device and session ids, ~165 bytes an entry) and every append
-- writes into one of its leaves; with many sessions appending at once it
-- was the index that dirtied the most WAL pages per event. Keyed by
-- (project_id, session_id, session_seq) an entry is about half as wide, so
-- leaves split half as often. Session ids are opaque ids chosen by
-- clients; the lookups that use it (session-fork tuple, a session's
-- highest session_seq, the voice fork lookup) still compare identity_id
-- and device_id, from the table row.
--
-- Query paths and the index that serves each:
--   Append: session fork tuple, session's highest seq   events_session (project_id, session_id, session_seq)
--   Voice: per-tuple fork lookup                        events_session (project_id, session_id, session_seq)

-- +goose Up
DROP INDEX events_session;
CREATE INDEX events_session ON events (project_id, session_id, session_seq);

-- +goose Down
DROP INDEX events_session;
CREATE INDEX events_session ON events (project_id, identity_id, device_id, session_id, session_seq);
