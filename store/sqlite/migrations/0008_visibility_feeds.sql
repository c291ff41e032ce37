-- Why: public projects (spec/websub.md "Topics": a public project's reads need no token; private is the default) and per-reader feed capabilities (GET /v1/feeds/{feed_token}.atom), stored only as the SHA-256 of the capability.
--
-- Query paths and the index that serves each:
--   ProjectVisibility / SetProjectVisibility   projects PK (id)
--   FeedToken / RevokeFeedToken                feed_tokens PK (id)
-- RFC 5005 archives (CountRecords, RecordsAt) add no index: they count and
-- skip through events_repository, or thread_events plus the unindexed
-- tail (0005), index-only. Another index on events would cost every append
-- one more random leaf write for a read that feed readers make rarely and
-- caches keep (archives are immutable).

-- +goose Up
ALTER TABLE projects ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private'
    CHECK (visibility IN ('private', 'public'));

CREATE TABLE feed_tokens (
    id            TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects (id),
    repository_id TEXT NOT NULL,
    hash          BLOB NOT NULL,
    created_by    TEXT NOT NULL,
    revoked       INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE feed_tokens;
ALTER TABLE projects DROP COLUMN visibility;
