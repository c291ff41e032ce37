package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// testHandoffs runs the handoff cases on one store; each makes its own
// projects.
func testHandoffs(t *testing.T, s store.Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"create", testHandoffCreate},
		{"versions", testHandoffVersions},
		{"version_race", testHandoffVersionRace},
		{"list", testHandoffList},
		{"events", testHandoffEvents},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s) })
	}
}

// handoffV1 is version 1 of a contract in pid: the store compares bytes
// only, so the contract bytes here need only be distinct per case.
func handoffV1(pid, id, key, assignee string) store.HandoffVersion {
	return store.HandoffVersion{
		ProjectID: pid, HandoffID: id, Version: 1, IdempotencyKey: key, State: "proposed", AssigneeID: assignee,
		Contract: []byte(fmt.Sprintf(`{"assignee":{"id":%q},"handoffId":%q,"idempotencyKey":%q,"state":"proposed"}`, assignee, id, key)),
	}
}

func testHandoffCreate(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	id := NewUUID()
	v1 := handoffV1(pid, id, "key-1", "agent-b")

	got, created, err := s.CreateHandoff(ctx, v1)
	if err != nil || !created {
		t.Fatalf("create: created %v, %v", created, err)
	}
	if got.Version != 1 || !bytes.Equal(got.Contract, v1.Contract) || got.State != "proposed" || got.AssigneeID != "agent-b" || got.IdempotencyKey != "key-1" {
		t.Fatalf("create returned %+v", got)
	}
	checkDBTime(t, "created_at", got.CreatedAt)

	// Exact replay: the stored current version, not created.
	again, created, err := s.CreateHandoff(ctx, v1)
	if err != nil || created || again.Version != 1 || !bytes.Equal(again.Contract, v1.Contract) || !again.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("replay: %+v created %v, %v", again, created, err)
	}

	// The key with other bytes (same id or another) is reuse; checked first.
	changed := v1
	changed.Contract = append(bytes.Clone(v1.Contract[:len(v1.Contract)-1]), `,"x":1}`...)
	_, _, err = s.CreateHandoff(ctx, changed)
	wantErr(t, "same key, same id, other bytes", err, store.ErrIdempotencyKeyReused)
	_, _, err = s.CreateHandoff(ctx, handoffV1(pid, NewUUID(), "key-1", "agent-b"))
	wantErr(t, "same key, other id", err, store.ErrIdempotencyKeyReused)
	// The id under another key exists.
	_, _, err = s.CreateHandoff(ctx, handoffV1(pid, id, "key-2", "agent-b"))
	wantErr(t, "same id, other key", err, store.ErrHandoffExists)

	// Ids and keys are per project.
	if _, created, err := s.CreateHandoff(ctx, handoffV1(other, id, "key-1", "agent-b")); err != nil || !created {
		t.Fatalf("same id and key in another project: created %v, %v", created, err)
	}
	_, _, err = s.CreateHandoff(ctx, handoffV1(NewUUID(), NewUUID(), "k", "a"))
	wantErr(t, "unknown project", err, store.ErrNotFound)
	_, err = s.Handoff(ctx, pid, NewUUID())
	wantErr(t, "unknown handoff", err, store.ErrNotFound)
	_, err = s.Handoff(ctx, NewUUID(), id)
	wantErr(t, "handoff of unknown project", err, store.ErrNotFound)
}

func testHandoffVersions(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	id := NewUUID()
	v1 := handoffV1(pid, id, "key-1", "agent-b")
	must[store.HandoffVersion](t, "create")(func() (store.HandoffVersion, error) {
		v, _, err := s.CreateHandoff(ctx, v1)
		return v, err
	}())
	states := []string{"accepted", "running", "blocked", "running", "verifying", "succeeded"}
	for i, st := range states {
		v := store.HandoffVersion{ProjectID: pid, HandoffID: id, Version: int64(i + 2), State: st, AssigneeID: "agent-b",
			Contract: []byte(fmt.Sprintf(`{"state":%q,"v":%d}`, st, i+2))}
		got, err := s.AppendHandoffVersion(ctx, v)
		if err != nil {
			t.Fatalf("append version %d: %v", v.Version, err)
		}
		if got.Version != v.Version || got.IdempotencyKey != "key-1" || !bytes.Equal(got.Contract, v.Contract) {
			t.Fatalf("append returned %+v", got)
		}
		checkDBTime(t, "version created_at", got.CreatedAt)
		cur := must[store.HandoffVersion](t, "current")(s.Handoff(ctx, pid, id))
		if cur.Version != v.Version || cur.State != st || !bytes.Equal(cur.Contract, v.Contract) {
			t.Fatalf("current after version %d: %+v", v.Version, cur)
		}
	}
	// Stale, repeated and skipping versions conflict; nothing is written.
	for _, n := range []int64{7, 2, 9, 0} {
		_, err := s.AppendHandoffVersion(ctx, store.HandoffVersion{ProjectID: pid, HandoffID: id, Version: n, State: "failed", Contract: []byte(`{}`)})
		wantErr(t, fmt.Sprintf("append version %d after 7", n), err, store.ErrVersionConflict)
	}
	_, err := s.AppendHandoffVersion(ctx, store.HandoffVersion{ProjectID: pid, HandoffID: NewUUID(), Version: 2, State: "accepted", Contract: []byte(`{}`)})
	wantErr(t, "append to unknown handoff", err, store.ErrNotFound)

	// All versions in order, paged; the first is the creation, untouched.
	var all []store.HandoffVersion
	after := int64(0)
	for {
		page, more, err := s.HandoffVersions(ctx, pid, id, after, 3)
		if err != nil {
			t.Fatalf("versions after %d: %v", after, err)
		}
		all = append(all, page...)
		if !more {
			break
		}
		after = page[len(page)-1].Version
	}
	var gotStates []string
	for i, v := range all {
		if v.Version != int64(i+1) {
			t.Fatalf("version %d at position %d", v.Version, i)
		}
		gotStates = append(gotStates, v.State)
	}
	if want := append([]string{"proposed"}, states...); !slices.Equal(gotStates, want) {
		t.Fatalf("version states %v, want %v", gotStates, want)
	}
	if !bytes.Equal(all[0].Contract, v1.Contract) {
		t.Fatalf("version 1 bytes changed: %s", all[0].Contract)
	}
	if page, more, err := s.HandoffVersions(ctx, pid, id, 7, 10); err != nil || len(page) != 0 || more {
		t.Fatalf("versions after the last: %d %v %v", len(page), more, err)
	}
	_, _, err = s.HandoffVersions(ctx, pid, NewUUID(), 0, 10)
	wantErr(t, "versions of unknown handoff", err, store.ErrNotFound)
}

// testHandoffVersionRace: of concurrent writers of the same next version,
// exactly one wins; the others conflict.
func testHandoffVersionRace(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	id := NewUUID()
	if _, _, err := s.CreateHandoff(ctx, handoffV1(pid, id, "k", "a")); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.AppendHandoffVersion(ctx, store.HandoffVersion{ProjectID: pid, HandoffID: id, Version: 2,
				State: "accepted", AssigneeID: "a", Contract: []byte(fmt.Sprintf(`{"writer":%d}`, i))})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrVersionConflict):
			t.Fatalf("racing writer: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won version 2, want 1", won)
	}
	if cur := must[store.HandoffVersion](t, "current")(s.Handoff(ctx, pid, id)); cur.Version != 2 {
		t.Fatalf("current version %d, want 2", cur.Version)
	}
}

func testHandoffList(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	// Seven contracts created in order; assignees alternate a, b; ids
	// 2 and 5 move to accepted.
	var ids []string
	for i := range 7 {
		id := NewUUID()
		ids = append(ids, id)
		if _, _, err := s.CreateHandoff(ctx, handoffV1(pid, id, fmt.Sprintf("key-%d", i), []string{"a", "b"}[i%2])); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.CreateHandoff(ctx, handoffV1(other, NewUUID(), "key-0", "a")); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 5} {
		if _, err := s.AppendHandoffVersion(ctx, store.HandoffVersion{ProjectID: pid, HandoffID: ids[i], Version: 2, State: "accepted",
			AssigneeID: []string{"a", "b"}[i%2], Contract: []byte(`{"state":"accepted"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// Creation order by database clock may tie at a millisecond; the list
	// breaks ties by handoff id descending, so compute the expected order
	// from what the store reports rather than from creation order.
	list := func(q store.HandoffQuery) []string {
		t.Helper()
		q.ProjectID = pid
		var got []string
		for {
			page, err := s.Handoffs(ctx, q)
			if err != nil {
				t.Fatalf("handoffs %+v: %v", q, err)
			}
			for _, v := range page.Versions {
				if v.ProjectID != pid {
					t.Fatalf("row of project %s", v.ProjectID)
				}
				got = append(got, v.HandoffID+":"+v.State)
			}
			if !page.HasMore {
				return got
			}
			if len(page.Versions) != q.Limit {
				t.Fatalf("short page (%d of %d) with more", len(page.Versions), q.Limit)
			}
			q.After = page.Versions[len(page.Versions)-1].HandoffID
		}
	}
	full := list(store.HandoffQuery{Limit: 200})
	if len(full) != 7 {
		t.Fatalf("%d contracts listed, want 7: %v", len(full), full)
	}
	// Every contract once, in its current state.
	var want []string
	for i := 6; i >= 0; i-- {
		st := "proposed"
		if i == 2 || i == 5 {
			st = "accepted"
		}
		want = append(want, ids[i]+":"+st)
	}
	if !sameSet(full, want) {
		t.Fatalf("listed %v, want the set %v", full, want)
	}
	for _, tc := range []struct {
		name string
		q    store.HandoffQuery
		keep func(i int) bool
	}{
		{"paged by 2", store.HandoffQuery{Limit: 2}, func(int) bool { return true }},
		{"state accepted", store.HandoffQuery{State: "accepted", Limit: 1}, func(i int) bool { return i == 2 || i == 5 }},
		{"state proposed", store.HandoffQuery{State: "proposed", Limit: 3}, func(i int) bool { return i != 2 && i != 5 }},
		{"assignee b", store.HandoffQuery{AssigneeID: "b", Limit: 2}, func(i int) bool { return i%2 == 1 }},
		{"assignee a, accepted", store.HandoffQuery{AssigneeID: "a", State: "accepted", Limit: 5}, func(i int) bool { return i == 2 }},
		{"no match", store.HandoffQuery{State: "running", Limit: 5}, func(int) bool { return false }},
	} {
		var sub []string
		for _, row := range full {
			for i, id := range ids {
				if row[:36] == id && tc.keep(i) {
					sub = append(sub, row)
				}
			}
		}
		if got := list(tc.q); !slices.Equal(got, sub) {
			t.Errorf("%s: %v, want %v", tc.name, got, sub)
		}
	}
	// Newest first: (creation time of the contract, handoff id) strictly
	// decreasing down the list. Version 1's time is the creation time.
	created := map[string]time.Time{}
	for _, id := range ids {
		vs, _, err := s.HandoffVersions(ctx, pid, id, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		created[id] = vs[0].CreatedAt
	}
	for i := 1; i < len(full); i++ {
		a, b := full[i-1][:36], full[i][:36]
		if created[a].Before(created[b]) || created[a].Equal(created[b]) && a < b {
			t.Fatalf("list order: %s (%v) before %s (%v)", a, created[a], b, created[b])
		}
	}
	_, err := s.Handoffs(ctx, store.HandoffQuery{ProjectID: pid, After: NewUUID(), Limit: 5})
	wantErr(t, "unknown cursor", err, store.ErrNotFound)
	_, err = s.Handoffs(ctx, store.HandoffQuery{ProjectID: other, After: ids[0], Limit: 5})
	wantErr(t, "cursor of another project", err, store.ErrNotFound)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// testHandoffEvents: Append indexes handoff events by body.handoff_id,
// whether or not the contract exists, per project; other kinds and
// handoff events without the member are not indexed; exact retries add
// nothing.
func testHandoffEvents(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	otherPID, otherSg := newProject(t, s)
	id, unrelated := NewUUID(), NewUUID()
	handoffEvent := func(sg *Signer, handoffID string) (*correspondence.Event, []byte) {
		m := []canonicaljson.Member{
			{Name: "next_safe_action", Value: canonicaljson.StringValue("review")},
			{Name: "summary", Value: canonicaljson.StringValue("handing over")},
		}
		if handoffID != "" {
			m = append(m, canonicaljson.Member{Name: "handoff_id", Value: canonicaljson.StringValue(handoffID)})
		}
		body := canonicaljson.ObjectValue(m...)
		return sg.Event(t, Spec{Kind: correspondence.KindHandoff, Body: &body})
	}
	var want []string
	// Before the contract exists.
	ev, c := handoffEvent(sg, id)
	want = append(want, appendOK(t, s, ev, c).Record.EventID)
	appendOK(t, s, ev, c) // exact retry
	ev, c = handoffEvent(sg, "")
	appendOK(t, s, ev, c)
	ev, c = handoffEvent(sg, unrelated)
	unrelatedID := appendOK(t, s, ev, c).Record.EventID
	ev, c = sg.Event(t, Spec{Summary: id})
	appendOK(t, s, ev, c)
	if _, _, err := s.CreateHandoff(ctx, handoffV1(pid, id, "k", "a")); err != nil {
		t.Fatal(err)
	}
	ev, c = handoffEvent(sg, id)
	want = append(want, appendOK(t, s, ev, c).Record.EventID)
	ev, c = handoffEvent(otherSg, id)
	otherID := appendOK(t, s, ev, c).Record.EventID

	for _, tc := range []struct {
		name, pid, id string
		want          []string
	}{
		{"named contract", pid, id, want},
		{"unrelated id", pid, unrelated, []string{unrelatedID}},
		{"other project", otherPID, id, []string{otherID}},
		{"nothing", pid, NewUUID(), nil},
	} {
		got, truncated, err := s.HandoffEvents(ctx, tc.pid, tc.id)
		if err != nil || truncated {
			t.Fatalf("%s: truncated %v, %v", tc.name, truncated, err)
		}
		if got == nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v (never nil)", tc.name, got, tc.want)
		}
	}
}
