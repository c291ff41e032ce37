// Package gctest holds the test helpers of groupcommit's users.
package gctest

import (
	"testing"
	"time"

	"github.com/acrelay/acrelay/store/internal/groupcommit"
)

// Answer reads a job's one answer, failing t when none comes within 5 s
// or when a second one follows.
func Answer[T any](t testing.TB, j *groupcommit.Job[T]) error {
	t.Helper()
	var err error
	select {
	case err = <-j.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("job never answered")
	}
	select {
	case e := <-j.Done():
		t.Fatalf("job answered twice: %v", e)
	default:
	}
	return err
}
