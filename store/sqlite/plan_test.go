package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// TestQueryPlansUseIndexes: no statement on a hot path scans a table; each
// is served by the index the migration names for it.
func TestQueryPlansUseIndexes(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	queries := map[string]string{
		"selectActiveIdentityIDs":  selectActiveIdentityIDs,
		"selectSender":             selectSender,
		"selectCanonical":          selectCanonical,
		"selectSessionTuple":       selectSessionTuple,
		"selectLineage":            selectLineage,
		"updateLineage":            updateLineage,
		"eventExists":              eventExists,
		"takeWaiters":              takeWaiters,
		"selectMissingParents":     selectMissingParents,
		"selectFeedAfter":          selectFeedAfter,
		"selectFrontierHead":       selectFrontierHead,
		"frontierRemains":          frontierRemains,
		"updateLineageFlags":       updateLineageFlags,
		"insertTip":                insertTip,
		"deleteTip":                deleteTip,
		"selectTips":               selectTips,
		"selectRecord":             selectRecord,
		"selectRecordsAfter":       selectRecordsAfter,
		"selectThreadRecordsAfter": selectThreadRecordsAfter,
		"selectHead":               selectHead,
		"selectSessionMax":         selectSessionMax,
		"selectProjectState":       selectProjectState,
		"updateProjectHead":        updateProjectHead,
		"forkLookup":               forkLookup,
		"recentThreadRecords":      recentThreadRecords,
		"recentThreadTuples":       recentThreadTuples,
		"indexThreadTail":          indexThreadTail,
		"updateThreadIndexed":      updateThreadIndexed,
	}
	wantIndex := map[string]string{
		"selectSessionTuple":       "events_session",
		"selectSessionMax":         "events_session",
		"forkLookup":               "events_session",
		"selectTips":               "claim_tips_claim",
		"selectRecordsAfter":       "events_repository",
		"selectThreadRecordsAfter": "sqlite_autoindex_events_1",
		"recentThreadRecords":      "sqlite_autoindex_events_1",
		"recentThreadTuples":       "sqlite_autoindex_events_1",
		"selectActiveIdentityIDs":  "identities_project_status",
		"selectFrontierHead":       "lineage_frontier_queue",
	}
	wantSearch := map[string]string{
		"selectSessionTuple": "(project_id=? AND session_id=? AND session_seq=?)",
		"forkLookup":         "(project_id=? AND session_id=? AND session_seq=?)",
		"selectSessionMax":   "(project_id=? AND session_id=?)",
		// Each record by its primary key, not a walk of the project.
		"selectThreadRecordsAfter": "(project_id=? AND received_seq=?)",
		"recentThreadRecords":      "(project_id=? AND received_seq=?)",
		"recentThreadTuples":       "(project_id=? AND received_seq=?)",
	}
	// The thread reads (migration 0005) take the thread's rows from
	// thread_events and the tail of events not yet in it by a range on
	// received_seq, then fetch each record by primary key.
	threadSteps := []string{
		"SEARCH thread_events USING PRIMARY KEY (project_id=? AND repository_id=? AND thread_id=?",
		"SEARCH events USING INDEX events_repository (project_id=? AND repository_id=? AND received_seq>?)",
	}
	wantSteps := map[string][]string{
		"selectThreadRecordsAfter": threadSteps,
		"recentThreadRecords":      threadSteps,
		"recentThreadTuples":       threadSteps,
		"indexThreadTail":          {"SEARCH events USING INDEX sqlite_autoindex_events_1 (project_id=? AND received_seq>?)"},
	}
	noSort := map[string]bool{"selectSessionMax": true, "selectRecordsAfter": true, "selectThreadRecordsAfter": true,
		"recentThreadRecords": true, "recentThreadTuples": true}
	for name, q := range queries {
		n := strings.Count(q, "?")
		args := make([]any, n)
		for i := range args {
			args[i] = "x"
		}
		rows, err := db.w.Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, step := range plan {
			// SCAN (subquery-N) reads a LIMITed subquery's rows, not a table.
			if strings.HasPrefix(step, "SCAN") && step != "SCAN CONSTANT ROW" && !strings.HasPrefix(step, "SCAN (subquery-") {
				t.Errorf("%s scans: %q (plan %q)", name, step, plan)
			}
		}
		for _, want := range wantSteps[name] {
			if !slices.ContainsFunc(plan, func(step string) bool { return strings.HasPrefix(step, want) }) {
				t.Errorf("%s: plan %q, want a step %q", name, plan, want)
			}
		}
		if want, ok := wantIndex[name]; ok && !strings.Contains(plan[0], want) {
			t.Errorf("%s: plan %q, want index %s", name, plan, want)
		}
		// INDEXED BY makes the index check above hold by fiat; these check
		// that the index is searched on all the columns it has.
		if want, ok := wantSearch[name]; ok && !strings.Contains(plan[0], want) {
			t.Errorf("%s: plan %q, want a search on %s", name, plan, want)
		}
		if noSort[name] && slices.Contains(plan, "USE TEMP B-TREE FOR ORDER BY") {
			t.Errorf("%s: plan %q sorts; the index order should serve it", name, plan)
		}
		t.Logf("%s: %q", name, plan)
	}
}

// TestPragmas: the writer runs WAL with synchronous=FULL (a returned
// append survives a machine crash), foreign keys on, a busy timeout, an
// 2 MiB page cache and no memory map; the read pool refuses writes.
func TestPragmas(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "pragma.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct{ pragma, want string }{
		{"journal_mode", "wal"}, {"synchronous", "2"}, {"foreign_keys", "1"}, {"busy_timeout", "5000"}, {"query_only", "0"},
		{"cache_size", "-2048"}, {"mmap_size", "0"},
	} {
		var got string
		if err := db.w.QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil || got != tc.want {
			t.Errorf("writer %s = %q (%v), want %q", tc.pragma, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ pragma, want string }{{"query_only", "1"}, {"synchronous", "2"}, {"journal_mode", "wal"}} {
		var got string
		if err := db.r.QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil || got != tc.want {
			t.Errorf("reader %s = %q (%v), want %q", tc.pragma, got, err, tc.want)
		}
	}
	if _, err := db.r.Exec(`INSERT INTO settings (name, value) VALUES ('x', 'y')`); err == nil {
		t.Error("read pool accepted a write")
	}
}

// TestPanickingJobIsIsolated: a job that panics fails alone; the writer
// keeps serving.
func TestPanickingJobIsIsolated(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "panic.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.submit(context.Background(), "boom", func(*txn) error { panic("boom") })
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("panicking job: %v", err)
	}
	if _, err := db.CreateProject(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReconcileLineage(context.Background(), "p", 32); err != nil {
		t.Fatalf("writer after a panic: %v", err)
	}
}
