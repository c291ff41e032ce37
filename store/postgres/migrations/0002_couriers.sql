-- Why: couriers (WebSub, Matrix, federation) need a durable delivery cursor per (courier, project, target) and a lease row so that one relay process delivers per (courier, project) (DESIGN.md, Couriers).
--
-- Query paths and the index that serves each:
--   CourierCursor / AdvanceCursor     courier_cursors PK (courier, project_id, target)
--   AcquireLease / ReleaseLease       courier_leases PK (courier, project_id)
-- expires_at is compared with the database clock only, never a relay's.

-- +goose Up
CREATE TABLE courier_cursors (
    courier      text COLLATE "C" NOT NULL,
    project_id   text COLLATE "C" NOT NULL REFERENCES projects (id),
    target       text COLLATE "C" NOT NULL,
    received_seq bigint NOT NULL CHECK (received_seq >= 0),
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (courier, project_id, target)
);

CREATE TABLE courier_leases (
    courier    text COLLATE "C" NOT NULL,
    project_id text COLLATE "C" NOT NULL REFERENCES projects (id),
    holder     text COLLATE "C" NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (courier, project_id)
);
