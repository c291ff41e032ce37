package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// BenchmarkAppendWALFrames measures what a durable append writes: b.N
// progress events of ~1 KiB from 16 goroutines, one per thread and
// session (the shape of `acrelay-bench`), with checkpoints off so every
// commit's frames stay in the WAL. It reports WAL frames (4 KiB pages,
// each written with two pwrites) per append, appends per commit, and the
// frames per append of each b-tree, read from the WAL's frame headers and
// SQLite's dbstat table:
//
//	go test -run '^$' -bench AppendWALFrames -benchtime 4000x ./store/sqlite
func BenchmarkAppendWALFrames(b *testing.B) {
	const clients = 16
	path := filepath.Join(b.TempDir(), "frames.db")
	db, err := sqlite.OpenWith(context.Background(), path, discard, sqlite.Options{CheckpointEvents: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		b.Fatal(err)
	}
	base := storetest.NewSigner(b, p.ID).Register(b, db)
	queues := make([][]signed, clients)
	for i := range b.N {
		c := i % clients
		s := *base
		s.SessionID = fmt.Sprintf("00000000-0000-4000-8000-%012d", c)
		e, cb := s.Event(b, storetest.Spec{Kind: correspondence.KindProgress, ThreadID: fmt.Sprintf("bench-%d", c),
			SessionSeq: int64(i/clients + 1), Paths: []string{"packages/sdk", "docs"},
			Summary: fmt.Sprintf("bench event %d: %s", i, strings.Repeat("progress report text ", 40))})
		queues[c] = append(queues[c], signed{e, cb})
	}
	// The WAL so far holds the registry writes; count only what follows.
	before, err := walFrames(path + "-wal")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for _, x := range queues[c] {
				if _, err := db.Append(ctx, x.ev, x.c); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	frames, err := walFrames(path + "-wal")
	if err != nil {
		b.Fatal(err)
	}
	frames = frames[len(before):]
	names, err := btreeOfPage(path)
	if err != nil {
		b.Fatal(err)
	}
	commits := 0
	per := map[string]int{}
	for _, f := range frames {
		if f.commit {
			commits++
		}
		per[names[f.page]]++
	}
	n := float64(b.N)
	b.ReportMetric(float64(len(frames))/n, "frames/append")
	b.ReportMetric(n/float64(max(commits, 1)), "appends/commit")
	for name, c := range per {
		if name == "" {
			name = "other"
		}
		b.ReportMetric(float64(c)/n, name+"-frames/append")
	}
}

type walFrame struct {
	page   uint32
	commit bool
}

// walFrames parses a WAL file's frame headers (https://sqlite.org/fileformat2.html#walformat),
// stopping at the first frame of an older generation (another salt).
func walFrames(path string) ([]walFrame, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 32 {
		return nil, nil
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:12]))
	salt1 := binary.BigEndian.Uint32(b[16:20])
	var out []walFrame
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		h := b[off : off+24]
		if binary.BigEndian.Uint32(h[8:12]) != salt1 {
			break
		}
		out = append(out, walFrame{page: binary.BigEndian.Uint32(h[0:4]), commit: binary.BigEndian.Uint32(h[4:8]) != 0})
	}
	return out, nil
}

// btreeOfPage names the table or index each page belongs to (dbstat).
func btreeOfPage(path string) (map[uint32]string, error) {
	ro, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer ro.Close()
	rows, err := ro.Query("SELECT name, pageno FROM dbstat")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names := map[uint32]string{}
	for rows.Next() {
		var name string
		var page uint32
		if err := rows.Scan(&name, &page); err != nil {
			return nil, err
		}
		names[page] = name
	}
	return names, rows.Err()
}
