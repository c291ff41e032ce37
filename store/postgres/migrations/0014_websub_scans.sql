-- Why: the relay-wide WebSub scans become one statement each (issue 26 item 4): housekeeping deletes expired subscriptions and lapsed verifications in batches, the revoked-token check and the revoke hook find a token's subscriptions, and the publish courier lists the public projects, without reading every project's rows.
--
-- Query paths and the index that serves each:
--   DeleteExpiredSubscriptions     websub_subscriptions_expires (expires_at, id)
--   CountSubscriptionStates        websub_subscriptions_expires (expires_at, id)
--   RevokedSubscriptions           websub_subscriptions_token (token_id) WHERE token_id <> '', tokens PK (id)
--   TokenSubscriptions             websub_subscriptions_token (token_id) WHERE token_id <> ''
--   PublicProjectIDs               projects_public (id) WHERE visibility = 'public'
--   DeleteLapsedVerifications      websub_verifications_pending (created_at, id), already there

-- +goose Up
CREATE INDEX websub_subscriptions_expires ON websub_subscriptions (expires_at, id);
CREATE INDEX websub_subscriptions_token ON websub_subscriptions (token_id) WHERE token_id <> '';
CREATE INDEX projects_public ON projects (id) WHERE visibility = 'public';

-- +goose Down
DROP INDEX projects_public;
DROP INDEX websub_subscriptions_token;
DROP INDEX websub_subscriptions_expires;
