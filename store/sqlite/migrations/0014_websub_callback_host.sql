-- Why: the hub caps subscriptions per callback host and pending verifications per callback host (docs/operating.md "Limits"); callback_host (store.CallbackHost, computed by the database from callback, so existing rows count too) and indexes make each count one index range.
--
-- Query paths and the index that serves each (store.WebSubLimits.CountWebSub):
--   subscriptions of a topic                 websub_subscriptions_key UNIQUE (project_id, topic, callback)
--   subscriptions of a project               websub_subscriptions_live (project_id, expires_at)
--   subscriptions of a callback host         websub_subscriptions_host (callback_host, expires_at)
--   pending verifications of a topic/project websub_verifications_topic (project_id, topic)
--   pending verifications of a callback host websub_verifications_host (callback_host)

-- +goose Up
ALTER TABLE websub_subscriptions ADD COLUMN callback_host TEXT GENERATED ALWAYS AS (
    CASE WHEN instr(callback, '://') = 0 THEN '' ELSE
    lower(substr(substr(substr(callback, instr(callback, '://') + 3), 1, instr(substr(callback, instr(callback, '://') + 3) || '/', '/') - 1),
                 1, instr(substr(substr(callback, instr(callback, '://') + 3), 1, instr(substr(callback, instr(callback, '://') + 3) || '/', '/') - 1) || '?', '?') - 1))
    END
) VIRTUAL;
ALTER TABLE websub_verifications ADD COLUMN callback_host TEXT GENERATED ALWAYS AS (
    CASE WHEN instr(callback, '://') = 0 THEN '' ELSE
    lower(substr(substr(substr(callback, instr(callback, '://') + 3), 1, instr(substr(callback, instr(callback, '://') + 3) || '/', '/') - 1),
                 1, instr(substr(substr(callback, instr(callback, '://') + 3), 1, instr(substr(callback, instr(callback, '://') + 3) || '/', '/') - 1) || '?', '?') - 1))
    END
) VIRTUAL;
CREATE INDEX websub_subscriptions_host ON websub_subscriptions (callback_host, expires_at);
CREATE INDEX websub_verifications_topic ON websub_verifications (project_id, topic);
CREATE INDEX websub_verifications_host ON websub_verifications (callback_host);

-- +goose Down
DROP INDEX websub_verifications_host;
DROP INDEX websub_verifications_topic;
DROP INDEX websub_subscriptions_host;
ALTER TABLE websub_verifications DROP COLUMN callback_host;
ALTER TABLE websub_subscriptions DROP COLUMN callback_host;
