package sqlite

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
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
		"nextReceipt":              nextReceipt,
		"selectSessionTuple":       selectSessionTuple,
		"selectLineage":            selectLineage,
		"updateLineage":            updateLineage,
		"eventExists":              eventExists,
		"releaseWaiters":           releaseWaiters,
		"deleteWaiters":            deleteWaiters,
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
	}
	wantIndex := map[string]string{
		"selectSessionTuple":       "events_session",
		"selectTips":               "claim_tips_claim",
		"selectRecordsAfter":       "events_repository",
		"selectThreadRecordsAfter": "events_thread",
		"selectActiveIdentityIDs":  "identities_project_status",
		"selectFrontierHead":       "lineage_frontier_queue",
	}
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
			if strings.HasPrefix(step, "SCAN") && step != "SCAN CONSTANT ROW" {
				t.Errorf("%s scans: %q (plan %q)", name, step, plan)
			}
		}
		if want, ok := wantIndex[name]; ok && !strings.Contains(plan[0], want) {
			t.Errorf("%s: plan %q, want index %s", name, plan, want)
		}
		t.Logf("%s: %q", name, plan)
	}
}
