package shared

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acrelay/acrelay/store"
)

// CourierSQL is one dialect's statements for the couriers' per-target
// state (store.Couriers) that need no lease. The leases, their fencing and
// the fenced writes stay the dialects' own: SQLite checks the lease in
// its one writer's transaction, PostgreSQL in each statement.
type CourierSQL struct {
	// TargetStates (courier, project) → target state rows (target,
	// received_seq, failures, retry in ms, failing_since, NULL or '' for none,
	// last_error), by target.
	TargetStates string
	// Forget (courier, project, target).
	Forget string
}

// Couriers is the dialect-independent part of store.Couriers.
type Couriers struct {
	Engine
	SQL *CourierSQL
}

// TargetStates reads every stored target state of (courier, project).
// Errors: store.ErrUnavailable.
func (c Couriers) TargetStates(ctx context.Context, courier, projectID string) ([]store.TargetState, error) {
	return List(ctx, c.Engine, "target states", ScanTargetState, c.SQL.TargetStates, courier, projectID)
}

// ForgetTarget deletes target's state. Errors: store.ErrUnavailable.
func (c Couriers) ForgetTarget(ctx context.Context, courier, projectID, target string) error {
	_, err := c.ExecN(ctx, "forget target", c.SQL.Forget, courier, projectID, target)
	return err
}

// MaxLastError is the most bytes of a delivery error a target state keeps.
const MaxLastError = 200

// ClampLastError cuts lastError to MaxLastError bytes, dropping a
// character cut in two.
func ClampLastError(lastError string) string {
	if len(lastError) > MaxLastError {
		return strings.ToValidUTF8(lastError[:MaxLastError], "")
	}
	return lastError
}

// CheckAdvances refuses a negative received_seq among advances (op names
// the call in the error).
func CheckAdvances(op string, advances []store.CursorAdvance) error {
	for _, a := range advances {
		if a.ReceivedSeq < 0 {
			return fmt.Errorf("%s: negative received_seq %d", op, a.ReceivedSeq)
		}
	}
	return nil
}

// ScanTargetState scans a target state row.
func ScanTargetState(r Row) (store.TargetState, error) {
	var ts store.TargetState
	var retryMS int64
	var since Time
	if err := r.Scan(&ts.Target, &ts.ReceivedSeq, &ts.Failures, &retryMS, &since, &ts.LastError); err != nil {
		return ts, err
	}
	ts.RetryIn = time.Duration(retryMS) * time.Millisecond
	ts.FailingSince = since.T
	return ts, nil
}
