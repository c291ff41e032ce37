// Package couriers runs the couriers that republish a project's immutable
// {event, receipt} records (DESIGN.md "Couriers and federation"): each
// courier is a loop with a durable cursor per (courier, project, target)
// that reads records after the cursor from the store, delivers them and
// advances the cursor. It is never fed from the request path, so a crash,
// a restart or a down receiver loses nothing: it resumes from the cursor.
// Delivery is at-least-once; receivers de-duplicate by event_id.
//
// With several relay processes on one database, a renewable lease row per
// (courier, project) makes exactly one process deliver; when the holder
// dies the lease expires by the database clock and another process takes
// over from the durable cursor.
//
// Concrete couriers (WebSub, Matrix) live in sub-packages; Export, a
// JSON-lines archive per project, is the first and simplest.
package couriers
