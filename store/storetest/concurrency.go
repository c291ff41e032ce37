package storetest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// testStreamCoordination is the stream-coordination test of issue 5
// (spec §7, §8): 16 concurrent appenders × 500 events over 4 projects
// (50 each under -short), every tenth event also re-posted at once as an
// exact retry. Per project the receipts must be strictly increasing in
// each appender's order and unique, received_at must never go backwards
// along received_seq, every event id must be stored once, every receipt a
// caller was given must read back exactly, and nothing may deadlock (each
// append runs under a two-minute deadline).
func testStreamCoordination(t *testing.T, s store.Store) {
	const workers, projects = 16, 4
	each := 500
	if testing.Short() {
		each = 50
	}
	signers := make([]*Signer, projects)
	for i := range signers {
		_, signers[i] = newProject(t, s)
	}
	type built struct {
		ev *correspondence.Event
		c  []byte
	}
	work := make([][]built, workers)
	for w := range workers {
		sg := *signers[w%projects]
		sg.SessionID = NewUUID() // a session per worker, so no forks
		sg.seq = 0
		work[w] = make([]built, each)
		for i := range each {
			ev, c := sg.Event(t, Spec{Summary: fmt.Sprintf("w%d e%d", w, i), RepositoryID: fmt.Sprintf("repo-%d", w%2)})
			work[w][i] = built{ev, c}
		}
	}

	results := make([][]store.Record, workers)
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i, b := range work[w] {
				actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				res, err := s.Append(actx, b.ev, b.c)
				if err == nil && i%10 == 0 {
					// An exact retry right behind the first acceptance.
					again, rerr := s.Append(actx, b.ev, b.c)
					switch {
					case rerr != nil:
						err = fmt.Errorf("retry: %w", rerr)
					case again.Created || !reflect.DeepEqual(again.Record.ReceivedSeq, res.Record.ReceivedSeq) ||
						!again.Record.ReceivedAt.Equal(res.Record.ReceivedAt):
						err = fmt.Errorf("retry: created %v receipt %d %v, first %d %v", again.Created,
							again.Record.ReceivedSeq, again.Record.ReceivedAt, res.Record.ReceivedSeq, res.Record.ReceivedAt)
					}
				}
				cancel()
				if err != nil {
					errs <- fmt.Errorf("worker %d event %d: %w", w, i, err)
					return
				}
				if !res.Created || len(res.Warnings) != 0 {
					errs <- fmt.Errorf("worker %d event %d: created %v warnings %v", w, i, res.Created, res.Warnings)
					return
				}
				results[w] = append(results[w], res.Record)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d appends (+%d retries) by %d workers over %d projects in %v", workers*each, workers*((each+9)/10),
		workers, projects, time.Since(start).Round(time.Millisecond))

	bySeq := map[string]map[int64]store.Record{}
	seenID := map[string]bool{}
	for w, rs := range results {
		pid := signers[w%projects].ProjectID
		m := bySeq[pid]
		if m == nil {
			m = map[int64]store.Record{}
			bySeq[pid] = m
		}
		for i, r := range rs {
			if i > 0 && r.ReceivedSeq <= rs[i-1].ReceivedSeq {
				t.Fatalf("worker %d: received_seq %d after %d", w, r.ReceivedSeq, rs[i-1].ReceivedSeq)
			}
			if prev, dup := m[r.ReceivedSeq]; dup {
				t.Fatalf("received_seq %d given to %s and %s", r.ReceivedSeq, prev.EventID, r.EventID)
			}
			if seenID[r.EventID] {
				t.Fatalf("event id %s accepted twice", r.EventID)
			}
			seenID[r.EventID] = true
			m[r.ReceivedSeq] = r
		}
	}
	perProject := workers / projects * each
	for _, sg := range signers {
		m := bySeq[sg.ProjectID]
		if len(m) != perProject {
			t.Fatalf("project has %d receipts, want %d", len(m), perProject)
		}
		var read []store.Record
		for _, repo := range []string{"repo-0", "repo-1"} {
			after := int64(0)
			for {
				page := must[store.EventPage](t, "events")(s.Events(ctx, store.EventQuery{ProjectID: sg.ProjectID,
					RepositoryID: repo, After: after, Limit: 200}))
				read = append(read, page.Records...)
				if !page.HasMore {
					break
				}
				after = page.Records[len(page.Records)-1].ReceivedSeq
			}
		}
		if len(read) != perProject {
			t.Fatalf("read %d records, want %d", len(read), perProject)
		}
		maxSeq := int64(0)
		for _, r := range read {
			if !reflect.DeepEqual(m[r.ReceivedSeq], r) {
				t.Fatalf("received_seq %d: read %s, receipt said %s", r.ReceivedSeq, r.EventID, m[r.ReceivedSeq].EventID)
			}
			maxSeq = max(maxSeq, r.ReceivedSeq)
		}
		// Along received_seq, received_at never goes backwards.
		var last store.Record
		for seq := int64(1); seq <= maxSeq; seq++ {
			r, ok := m[seq]
			if !ok {
				continue // gaps are allowed
			}
			if r.ReceivedAt.Before(last.ReceivedAt) {
				t.Fatalf("received_seq %d at %v, before received_seq %d at %v", seq, r.ReceivedAt, last.ReceivedSeq, last.ReceivedAt)
			}
			last = r
		}
		head, at, err := s.Head(ctx, sg.ProjectID)
		if err != nil || head != maxSeq || !at.Equal(last.ReceivedAt) {
			t.Fatalf("head %d %v %v, want %d %v", head, at, err, maxSeq, last.ReceivedAt)
		}
	}
}
