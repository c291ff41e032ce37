-- Why: public projects (spec/websub.md "Topics": a public project's reads need no token; private is the default) and per-reader feed capabilities (GET /v1/feeds/{feed_token}.atom), stored only as the SHA-256 of the capability; the same as store/sqlite's 0008.
--
-- Query paths and the index that serves each:
--   ProjectVisibility / SetProjectVisibility   projects PK (id)
--   FeedToken / RevokeFeedToken                feed_tokens PK (id)
-- RFC 5005 archives (CountRecords, RecordsAt) add no index: they count and
-- skip through events_repository or events_thread (index-only where the
-- visibility map allows). Another index on events would cost every append
-- one more random leaf write for a read that feed readers make rarely and
-- caches keep (archives are immutable).

-- +goose Up
ALTER TABLE projects ADD COLUMN visibility text NOT NULL DEFAULT 'private'
    CHECK (visibility IN ('private', 'public'));

CREATE TABLE feed_tokens (
    id            text COLLATE "C" PRIMARY KEY,
    project_id    text COLLATE "C" NOT NULL REFERENCES projects (id),
    repository_id text COLLATE "C" NOT NULL,
    hash          bytea NOT NULL,
    created_by    text COLLATE "C" NOT NULL,
    revoked       boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL
);

-- +goose Down
DROP TABLE feed_tokens;
ALTER TABLE projects DROP COLUMN visibility;
