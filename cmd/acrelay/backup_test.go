package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestBackupVerifyRestore: a backup taken while appends go on opens and
// serves the same records and receipts as the source up to its snapshot;
// verify-log passes on it, and reports the one event whose stored bytes
// were changed on disk, exiting non-zero.
func TestBackupVerifyRestore(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	src, err := openStore(ctx, storeConfig{DataDir: data, SQLiteSync: "fdatasync", SQLiteMaxBatch: 128, Create: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, err := src.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, src)
	midway := make(chan struct{})
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			if i == 100 {
				close(midway)
			}
			e, canonical := s.Event(t, storetest.Spec{Summary: fmt.Sprintf("event %d", i), SessionSeq: int64(i + 1)})
			if _, err := src.Append(ctx, e, canonical); err != nil {
				t.Error(err)
				return
			}
		}
	}
	appendN(0, 50)

	out := filepath.Join(t.TempDir(), "snapshot.db")
	var wg sync.WaitGroup
	wg.Go(func() { appendN(50, 300) }) // the relay keeps appending meanwhile
	<-midway
	stdout, _, err := runAgent(t, newBackupCmd(), "", "--data-dir", data, "--out", out)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if !strings.Contains(stdout, out) {
		t.Fatalf("backup output %q", stdout)
	}
	// It holds secrets (WebSub HMAC keys, peer tokens): owner-only.
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if _, _, err := runAgent(t, newBackupCmd(), "", "--data-dir", data, "--out", out); err == nil {
		t.Fatal("a second backup over the first succeeded")
	}

	// Restore: the snapshot is the data directory's acrelay.db.
	restored := t.TempDir()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "acrelay.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	rst, err := sqlite.Open(ctx, filepath.Join(restored, "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	got := allRecords(t, rst, p.ID)
	rst.Close()
	want := allRecords(t, src, p.ID)
	if len(want) != 350 || len(got) < 100 || len(got) > len(want) {
		t.Fatalf("backup holds %d records, source %d; want 100..%d of 350", len(got), len(want), len(want))
	}
	t.Logf("the backup taken during appends holds %d of %d records", len(got), len(want))
	for i, r := range got {
		w := want[i]
		if r.ReceivedSeq != w.ReceivedSeq || r.EventID != w.EventID || !bytes.Equal(r.ImmutableJSON(), w.ImmutableJSON()) {
			t.Fatalf("record %d differs in the backup: %s vs %s", i, r.ImmutableJSON(), w.ImmutableJSON())
		}
	}

	stdout, _, err = runAgent(t, newVerifyLogCmd(), "", "--data-dir", restored)
	if err != nil || !strings.Contains(stdout, fmt.Sprintf("%d event(s) verified", len(got))) {
		t.Fatalf("verify-log on the restore: %v\n%s", err, stdout)
	}

	// One byte of one stored event changed on disk.
	raw, err := sql.Open("sqlite", filepath.Join(restored, "acrelay.db"))
	if err != nil {
		t.Fatal(err)
	}
	const seq = 7
	var canonical []byte
	if err := raw.QueryRow(`SELECT canonical FROM events WHERE project_id = ? AND received_seq = ?`, p.ID, seq).Scan(&canonical); err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(canonical, []byte("event 6"))
	if i < 0 {
		t.Fatalf("no summary in %s", canonical)
	}
	canonical[i] = 'E'
	if _, err := raw.Exec(`UPDATE events SET canonical = ? WHERE project_id = ? AND received_seq = ?`, canonical, p.ID, seq); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	stdout, _, err = runAgent(t, newVerifyLogCmd(), "", "--data-dir", restored, "--project", p.ID)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("verify-log after corruption: %v, want exit 1\n%s", err, stdout)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for _, l := range lines {
		if !strings.Contains(l, fmt.Sprintf("received_seq %d:", seq)) {
			t.Errorf("a problem outside the changed event: %q", l)
		}
	}
	if !strings.Contains(stdout, "signature does not verify") || !strings.Contains(stdout, "event_id does not match") {
		t.Fatalf("verify-log output %q", stdout)
	}
}

func allRecords(t *testing.T, st store.Store, projectID string) []store.Record {
	t.Helper()
	var out []store.Record
	for {
		recs, err := st.RecordsAfter(context.Background(), projectID, int64(len(out)), 100)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
		if len(recs) < 100 {
			return out
		}
	}
}
