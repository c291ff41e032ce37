-- Why: relay-wide single-holder jobs (the Matrix inbox and bot /sync, the WebSub hub's revoked-token scan) hold a lease like the couriers, under the project id '' (issue 26 "One lease package"), so courier_leases no longer references projects; AcquireLeases still skips unknown project ids itself.
--
-- Query paths and the index that serves each:
--   AcquireLeases / ReleaseLeases / LeaseStates   courier_leases PK (courier, project_id)
--   RenewLeases / ReclaimLeases                   courier_leases_holder (courier, holder)
-- SQLite cannot drop a foreign key: the table is rebuilt with the same rows.

-- +goose Up
CREATE TABLE courier_leases_next (
    courier    TEXT NOT NULL,
    project_id TEXT NOT NULL,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    fence      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (courier, project_id)
) STRICT, WITHOUT ROWID;
INSERT INTO courier_leases_next (courier, project_id, holder, expires_at, fence)
    SELECT courier, project_id, holder, expires_at, fence FROM courier_leases;
DROP TABLE courier_leases;
ALTER TABLE courier_leases_next RENAME TO courier_leases;
CREATE INDEX courier_leases_holder ON courier_leases (courier, holder);
