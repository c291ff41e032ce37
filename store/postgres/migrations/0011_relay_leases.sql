-- Why: relay-wide single-holder jobs (the Matrix inbox and bot /sync, the WebSub hub's revoked-token scan) hold a lease like the couriers, under the project id '' (issue 26 "One lease package"), so courier_leases no longer references projects; AcquireLeases still skips unknown project ids itself.
--
-- Query paths and the index that serves each:
--   AcquireLeases / ReleaseLeases / LeaseStates   courier_leases PK (courier, project_id)
--   RenewLeases / ReclaimLeases                   courier_leases_holder (courier, holder)

-- +goose Up
ALTER TABLE courier_leases DROP CONSTRAINT courier_leases_project_id_fkey;
