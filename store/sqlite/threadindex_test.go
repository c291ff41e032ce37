package sqlite_test

import (
	"testing"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// openEvery opens a store whose thread index (thread_events, migration
// 0005) takes a project's events in bulk once every of them wait outside
// it, so that thread-filtered reads mix the index and the unindexed tail.
func openEvery(every int) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store {
		t.Helper()
		return openOpts(t, sqlite.Options{ThreadIndexEvery: every})
	}
}

// TestStoreThreadIndexEvery runs the store conformance suite with the
// thread index filled every third append of a project, so that its
// thread-filtered reads meet both the index and the tail.
func TestStoreThreadIndexEvery(t *testing.T) {
	storetest.Run(t, openEvery(3))
}
