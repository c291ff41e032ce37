-- Why: listing a project's tokens (GET /v1/admin/projects/{id}/tokens,
-- acrelay token list) pages in id order; with only tokens_project
-- (project_id) every page read and sorted all of the project's tokens.
-- Keyed by (project_id, id) a page is an index range. It serves every
-- lookup tokens_project served.

-- +goose Up
DROP INDEX tokens_project;
CREATE INDEX tokens_project ON tokens (project_id, id);

-- +goose Down
DROP INDEX tokens_project;
CREATE INDEX tokens_project ON tokens (project_id);
