-- Why: the courier runner fences every cursor write by its lease (a fence number that grows each time a lease is taken afresh), renews all of a holder's leases in one statement, and keeps each target's backoff durable so a restart neither hammers a dead target nor forgets one (issue "Before the couriers").
--
-- Query paths and the index that serves each:
--   AcquireLeases / ReleaseLeases        courier_leases PK (courier, project_id)
--   RenewLeases                          courier_leases_holder (courier, holder)
--   TargetStates                         courier_cursors PK prefix (courier, project_id)
--   AdvanceCursor / RecordFailure        courier_cursors PK (courier, project_id, target)
-- next_attempt_at and failing_since are TEXT in RFC 3339 with milliseconds,
-- UTC, from the database clock, compared with the database clock only.

-- +goose Up
ALTER TABLE courier_leases ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
CREATE INDEX courier_leases_holder ON courier_leases (courier, holder);
ALTER TABLE courier_cursors ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE courier_cursors ADD COLUMN next_attempt_at TEXT;
ALTER TABLE courier_cursors ADD COLUMN failing_since TEXT;
ALTER TABLE courier_cursors ADD COLUMN last_error TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE courier_cursors DROP COLUMN last_error;
ALTER TABLE courier_cursors DROP COLUMN failing_since;
ALTER TABLE courier_cursors DROP COLUMN next_attempt_at;
ALTER TABLE courier_cursors DROP COLUMN failures;
DROP INDEX courier_leases_holder;
ALTER TABLE courier_leases DROP COLUMN fence;
