package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

// TestHousekeepOnce: expired sessions and Matrix submissions final for
// longer than the retention are deleted in batches; a live session, a
// recent final submission and a pending one stay.
func TestHousekeepOnce(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	later := now.Add(matrixSubmissionRetained + time.Hour) // the clock of the housekeeping run
	hash := func(i int) []byte { h := sha256.Sum256([]byte(fmt.Sprint("s", i))); return h[:] }
	for i := range 6 {
		exp := now.Add(time.Duration(i) * time.Minute)
		if i == 5 {
			exp = later.Add(time.Hour) // still live then
		}
		if err := st.CreateUISession(ctx, store.UISession{Hash: hash(i), ProjectID: "p", TokenID: "t", CreatedAt: now, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	var subs []store.MatrixSubmission
	for i := range 4 {
		subs = append(subs, store.MatrixSubmission{MatrixEventID: fmt.Sprint("$", i), RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{}`)})
	}
	if err := st.EnqueueMatrixSubmissions(ctx, subs, "", ""); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.CompleteMatrixSubmission(ctx, subs[i].MatrixEventID, "$r"); err != nil {
			t.Fatal(err)
		}
	}
	// Within the retention: nothing of the submissions goes.
	sessions, n, err := housekeepOnce(ctx, st, now.Add(-time.Second), 2)
	if err != nil || sessions != 0 || n != 0 {
		t.Fatalf("early run deleted %d sessions, %d submissions (%v), want none", sessions, n, err)
	}
	sessions, n, err = housekeepOnce(ctx, st, later, 2)
	if err != nil || sessions != 5 || n != 3 {
		t.Fatalf("deleted %d sessions and %d submissions (%v), want 5 and 3", sessions, n, err)
	}
	if _, err := st.UISession(ctx, hash(5)); err != nil {
		t.Errorf("the live session: %v", err)
	}
	if s, err := st.MatrixSubmission(ctx, "$3"); err != nil || s.Final != "" {
		t.Errorf("the pending submission: %+v %v", s, err)
	}
}
