-- Why: couriers (WebSub, Matrix, federation) need a durable delivery cursor per (courier, project, target) and a lease row so that one relay process delivers per (courier, project) (DESIGN.md, Couriers).
--
-- Query paths and the index that serves each:
--   CourierCursor / AdvanceCursor     courier_cursors PK (courier, project_id, target)
--   AcquireLease / ReleaseLease       courier_leases PK (courier, project_id)
-- Times are TEXT in RFC 3339 with milliseconds, UTC, from the database clock;
-- expires_at is compared with the database clock only, never a relay's.

-- +goose Up
CREATE TABLE courier_cursors (
    courier      TEXT NOT NULL,
    project_id   TEXT NOT NULL REFERENCES projects (id),
    target       TEXT NOT NULL,
    received_seq INTEGER NOT NULL CHECK (received_seq >= 0),
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (courier, project_id, target)
) STRICT, WITHOUT ROWID;

CREATE TABLE courier_leases (
    courier    TEXT NOT NULL,
    project_id TEXT NOT NULL REFERENCES projects (id),
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    PRIMARY KEY (courier, project_id)
) STRICT, WITHOUT ROWID;
