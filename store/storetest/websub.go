package storetest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// subscribeVerification is a pending subscribe of project pid's topic to
// callback.
func subscribeVerification(pid, topic, callback, secret string, lease int64) store.Verification {
	return store.Verification{ID: NewUUID(), ProjectID: pid, Mode: "subscribe", Topic: topic, RepositoryID: "repo-a",
		Format: "atom", Callback: callback, Secret: []byte(secret), TokenID: "tok-1", LeaseSeconds: lease}
}

func topicOf(pid string) string {
	return "https://relay.example/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=repo-a"
}

func pendingIDs(t *testing.T, s store.Store, limit int) []string {
	t.Helper()
	var ids []string
	for _, v := range must[[]store.Verification](t, "pending")(s.PendingVerifications(ctx, limit)) {
		ids = append(ids, v.ID)
	}
	return ids
}

func hasTarget(t *testing.T, s store.Store, pid, target string) bool {
	t.Helper()
	for _, ts := range must[[]store.TargetState](t, "target states")(s.TargetStates(ctx, store.CourierWebSub, pid)) {
		if ts.Target == target {
			return true
		}
	}
	return false
}

func subscriptionIDs(t *testing.T, s store.Store, pid string) []string {
	t.Helper()
	var ids []string
	for _, sub := range must[[]store.Subscription](t, "subscriptions")(s.Subscriptions(ctx, pid)) {
		ids = append(ids, sub.ID)
	}
	return ids
}

func testWebSubVerifications(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	wantErr(t, "verification of an unknown project",
		s.AddVerification(ctx, subscribeVerification(NewUUID(), topicOf(pid), "https://cb.example/a", "k", 60)), store.ErrNotFound)
	if ids := pendingIDs(t, s, 10); len(ids) != 0 {
		t.Fatalf("pending before any: %v", ids)
	}
	var added []string
	for i, cb := range []string{"https://cb.example/a", "https://cb.example/b", "https://cb.example/c"} {
		v := subscribeVerification(pid, topicOf(pid), cb, "secret", int64(60+i))
		if i == 2 {
			v.Mode, v.Secret, v.TokenID, v.LeaseSeconds = "unsubscribe", nil, "", 0
		}
		if err := s.AddVerification(ctx, v); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		added = append(added, v.ID)
		time.Sleep(2 * time.Millisecond) // distinct created_at: oldest first is observable
	}
	wantErr(t, "a verification id twice", s.AddVerification(ctx, store.Verification{ID: added[0], ProjectID: pid,
		Mode: "subscribe", Topic: topicOf(pid), RepositoryID: "repo-a", Format: "atom", Callback: "https://cb.example/z"}), store.ErrExists)
	if got := pendingIDs(t, s, 10); !slices.Equal(got, added) {
		t.Fatalf("pending = %v, want %v (oldest first)", got, added)
	}
	if got := pendingIDs(t, s, 2); !slices.Equal(got, added[:2]) {
		t.Fatalf("pending limit 2 = %v, want %v", got, added[:2])
	}
	vs := must[[]store.Verification](t, "pending")(s.PendingVerifications(ctx, 10))
	first := vs[0]
	if first.ProjectID != pid || first.Mode != "subscribe" || first.Topic != topicOf(pid) || first.RepositoryID != "repo-a" ||
		first.Format != "atom" || first.Callback != "https://cb.example/a" || string(first.Secret) != "secret" ||
		first.TokenID != "tok-1" || first.LeaseSeconds != 60 || first.Attempts != 0 {
		t.Fatalf("stored verification = %+v", first)
	}
	checkDBTime(t, "verification created_at", first.CreatedAt)
	if vs[2].Mode != "unsubscribe" || len(vs[2].Secret) != 0 || vs[2].LeaseSeconds != 0 {
		t.Fatalf("unsubscribe verification = %+v", vs[2])
	}
	for range 2 {
		if err := s.RetryVerification(ctx, added[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RetryVerification(ctx, NewUUID()); err != nil {
		t.Fatalf("retry of an unknown verification: %v", err)
	}
	vs = must[[]store.Verification](t, "pending")(s.PendingVerifications(ctx, 10))
	if vs[1].Attempts != 2 || vs[0].Attempts != 0 {
		t.Fatalf("attempts = %d, %d; want 0, 2", vs[0].Attempts, vs[1].Attempts)
	}
	if err := s.DeleteVerification(ctx, added[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVerification(ctx, added[1]); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	if got := pendingIDs(t, s, 10); !slices.Equal(got, []string{added[0], added[2]}) {
		t.Fatalf("pending after delete = %v", got)
	}
}

func testWebSubActivate(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	for range 3 {
		ev, c := sg.Event(t, Spec{RepositoryID: "repo-a"})
		appendOK(t, s, ev, c)
	}
	wantErr(t, "activate in an unknown project",
		func() error {
			_, err := s.ActivateSubscription(ctx, subscribeVerification(NewUUID(), topicOf(pid), "https://cb.example/a", "k", 60), NewUUID())
			return err
		}(), store.ErrNotFound)

	v := subscribeVerification(pid, topicOf(pid), "https://cb.example/a", "first-secret", 3600)
	if err := s.AddVerification(ctx, v); err != nil {
		t.Fatal(err)
	}
	id := NewUUID()
	before := time.Now()
	sub := must[store.Subscription](t, "activate")(s.ActivateSubscription(ctx, v, id))
	if sub.ID != id || sub.ProjectID != pid || sub.Topic != v.Topic || sub.Callback != v.Callback || sub.RepositoryID != "repo-a" ||
		sub.ThreadID != "" || sub.Format != "atom" || string(sub.Secret) != "first-secret" || sub.TokenID != "tok-1" ||
		sub.LeaseSeconds != 3600 || sub.State != store.SubscriptionActive {
		t.Fatalf("activated = %+v", sub)
	}
	checkDBTime(t, "created_at", sub.CreatedAt)
	checkDBTime(t, "verified_at", sub.VerifiedAt)
	if d := sub.ExpiresAt.Sub(sub.VerifiedAt); d != time.Hour {
		t.Fatalf("expires_at - verified_at = %v, want the lease (1h)", d)
	}
	if d := sub.ExpiresAt.Sub(before); d < time.Hour-time.Minute || d > time.Hour+time.Minute {
		t.Fatalf("expires_at %v is %v after now, want about 1h", sub.ExpiresAt, d)
	}
	if ids := pendingIDs(t, s, 10); len(ids) != 0 {
		t.Fatalf("the verification is still pending after activation: %v", ids)
	}
	// A new subscription's cursor starts at the project's head: it gets
	// only the records appended after its verification.
	if got := stateOf(t, s, store.CourierWebSub, pid, id); got.ReceivedSeq != 3 || got.Failures != 0 {
		t.Fatalf("new subscription's cursor = %+v, want received_seq 3 (the head)", got)
	}
	got := must[store.Subscription](t, "subscription")(s.Subscription(ctx, pid, id))
	if got.ID != id || string(got.Secret) != "first-secret" || !got.ExpiresAt.Equal(sub.ExpiresAt) {
		t.Fatalf("Subscription = %+v, want %+v", got, sub)
	}

	// The courier moves the cursor; a renewal keeps id and cursor and
	// takes the new secret, token and lease.
	ev, c := sg.Event(t, Spec{RepositoryID: "repo-a"})
	appendOK(t, s, ev, c)
	lease := leaseOf(t, s, store.CourierWebSub, "relay-a", pid, time.Minute)
	if err := s.AdvanceCursor(ctx, lease, id, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSubscriptionState(ctx, pid, id, store.SubscriptionFailing); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ev, c := sg.Event(t, Spec{RepositoryID: "repo-a"})
		appendOK(t, s, ev, c)
	}
	renew := subscribeVerification(pid, topicOf(pid), "https://cb.example/a", "second-secret", 7200)
	renew.TokenID = "tok-2"
	if err := s.AddVerification(ctx, renew); err != nil {
		t.Fatal(err)
	}
	renewed := must[store.Subscription](t, "renew")(s.ActivateSubscription(ctx, renew, NewUUID()))
	if renewed.ID != id || string(renewed.Secret) != "second-secret" || renewed.TokenID != "tok-2" || renewed.LeaseSeconds != 7200 ||
		renewed.State != store.SubscriptionActive || !renewed.CreatedAt.Equal(sub.CreatedAt) || !renewed.ExpiresAt.After(sub.ExpiresAt) {
		t.Fatalf("renewed = %+v (first %+v)", renewed, sub)
	}
	if got := stateOf(t, s, store.CourierWebSub, pid, id); got.ReceivedSeq != 4 {
		t.Fatalf("renewal moved the cursor to %d, want it kept at 4", got.ReceivedSeq)
	}
	if ids := subscriptionIDs(t, s, pid); !slices.Equal(ids, []string{id}) {
		t.Fatalf("subscriptions after renewal = %v, want the one", ids)
	}

	// Unique per (project, topic, callback): another callback or topic is
	// another subscription.
	otherCB := must[store.Subscription](t, "other callback")(s.ActivateSubscription(ctx,
		subscribeVerification(pid, topicOf(pid), "https://cb.example/b", "k", 60), NewUUID()))
	otherTopic := subscribeVerification(pid, topicOf(pid)+"&thread_id=t1", "https://cb.example/a", "", 60)
	otherTopic.ThreadID, otherTopic.TokenID = "t1", ""
	ot := must[store.Subscription](t, "other topic")(s.ActivateSubscription(ctx, otherTopic, NewUUID()))
	if ot.ThreadID != "t1" || len(ot.Secret) != 0 || ot.TokenID != "" {
		t.Fatalf("subscription without secret or token = %+v", ot)
	}
	want := []string{id, otherCB.ID, ot.ID}
	slices.Sort(want)
	if ids := subscriptionIDs(t, s, pid); !slices.Equal(ids, want) {
		t.Fatalf("subscriptions = %v, want %v (sorted by id)", ids, want)
	}
	if got := stateOf(t, s, store.CourierWebSub, pid, ot.ID); got.ReceivedSeq != 6 {
		t.Fatalf("a later subscription's cursor = %d, want 6 (the head then)", got.ReceivedSeq)
	}
}

func testWebSubLeases(t *testing.T, s store.Store) {
	a := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	b := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	empty := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	live := must[store.Subscription](t, "live")(s.ActivateSubscription(ctx,
		subscribeVerification(a, topicOf(a), "https://cb.example/live", "k", 3600), NewUUID()))
	// A lease of 0 seconds has ended by the database clock when it is read.
	ended := must[store.Subscription](t, "ended")(s.ActivateSubscription(ctx,
		subscribeVerification(a, topicOf(a), "https://cb.example/ended", "k", 0), NewUUID()))
	must[store.Subscription](t, "ended only")(s.ActivateSubscription(ctx,
		subscribeVerification(empty, topicOf(empty), "https://cb.example/ended", "k", 0), NewUUID()))
	// One second: listed now, not once it has passed.
	short := must[store.Subscription](t, "short")(s.ActivateSubscription(ctx,
		subscribeVerification(b, topicOf(b), "https://cb.example/short", "k", 1), NewUUID()))
	if ids := subscriptionIDs(t, s, a); !slices.Equal(ids, []string{live.ID}) {
		t.Fatalf("subscriptions of a = %v, want only the live one", ids)
	}
	if ids := subscriptionIDs(t, s, b); !slices.Equal(ids, []string{short.ID}) {
		t.Fatalf("subscriptions of b = %v, want the short one while its lease runs", ids)
	}
	projects := must[[]string](t, "subscribed projects")(s.SubscribedProjects(ctx))
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(projects, want) {
		t.Fatalf("subscribed projects = %v, want %v", projects, want)
	}
	// An ended lease is still readable by id (the courier may clean it).
	if got := must[store.Subscription](t, "ended by id")(s.Subscription(ctx, a, ended.ID)); got.ID != ended.ID {
		t.Fatalf("Subscription(ended) = %+v", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if ids := subscriptionIDs(t, s, b); len(ids) != 0 {
		t.Fatalf("subscriptions of b after its lease = %v, want none", ids)
	}
	if projects := must[[]string](t, "subscribed projects")(s.SubscribedProjects(ctx)); !slices.Equal(projects, []string{a}) {
		t.Fatalf("subscribed projects after b's lease = %v, want [a]", projects)
	}
}

func testWebSubDelete(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	a := must[store.Subscription](t, "a")(s.ActivateSubscription(ctx,
		subscribeVerification(pid, topicOf(pid), "https://cb.example/a", "k", 3600), NewUUID()))
	b := must[store.Subscription](t, "b")(s.ActivateSubscription(ctx,
		subscribeVerification(pid, topicOf(pid), "https://cb.example/b", "k", 3600), NewUUID()))
	o := must[store.Subscription](t, "other project")(s.ActivateSubscription(ctx,
		subscribeVerification(other, topicOf(other), "https://cb.example/a", "k", 3600), NewUUID()))
	for _, sub := range []store.Subscription{a, b, o} {
		if !hasTarget(t, s, sub.ProjectID, sub.ID) {
			t.Fatalf("no courier cursor for %s", sub.ID)
		}
	}

	// Another project's id is not found there.
	_, err := s.Subscription(ctx, pid, o.ID)
	wantErr(t, "subscription of another project", err, store.ErrNotFound)
	_, err = s.Subscription(ctx, pid, NewUUID())
	wantErr(t, "unknown subscription", err, store.ErrNotFound)
	wantErr(t, "state of an unknown subscription", s.SetSubscriptionState(ctx, pid, o.ID, store.SubscriptionFailing), store.ErrNotFound)
	if err := s.SetSubscriptionState(ctx, pid, a.ID, "paused"); err == nil {
		t.Fatal("state paused accepted")
	}
	if err := s.SetSubscriptionState(ctx, pid, b.ID, store.SubscriptionFailing); err != nil {
		t.Fatal(err)
	}
	if got := must[store.Subscription](t, "b")(s.Subscription(ctx, pid, b.ID)); got.State != store.SubscriptionFailing {
		t.Fatalf("state = %s, want failing", got.State)
	}

	// A verified unsubscribe deletes by (project, topic, callback), with
	// its cursor and its verification.
	unsub := store.Verification{ID: NewUUID(), ProjectID: pid, Mode: "unsubscribe", Topic: topicOf(pid), RepositoryID: "repo-a",
		Format: "atom", Callback: "https://cb.example/a"}
	if err := s.AddVerification(ctx, unsub); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSubscription(ctx, pid, topicOf(pid), "https://cb.example/a", unsub.ID); err != nil {
		t.Fatal(err)
	}
	if ids := subscriptionIDs(t, s, pid); !slices.Equal(ids, []string{b.ID}) {
		t.Fatalf("subscriptions after unsubscribe = %v, want [b]", ids)
	}
	if hasTarget(t, s, pid, a.ID) {
		t.Fatal("the deleted subscription's cursor is still there")
	}
	if ids := pendingIDs(t, s, 10); len(ids) != 0 {
		t.Fatalf("the unsubscribe verification is still pending: %v", ids)
	}
	// Unknown (topic, callback) and no verification: nothing happens.
	if err := s.DeleteSubscription(ctx, pid, topicOf(pid), "https://cb.example/none", ""); err != nil {
		t.Fatal(err)
	}
	if !hasTarget(t, s, other, o.ID) || !slices.Equal(subscriptionIDs(t, s, other), []string{o.ID}) {
		t.Fatal("an unsubscribe in one project touched another")
	}

	// RemoveSubscription by id (a 410, a revoked token).
	if err := s.RemoveSubscription(ctx, pid, o.ID); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(subscriptionIDs(t, s, other), []string{o.ID}) {
		t.Fatal("RemoveSubscription with another project's id removed it")
	}
	if err := s.RemoveSubscription(ctx, pid, b.ID); err != nil {
		t.Fatal(err)
	}
	if ids := subscriptionIDs(t, s, pid); len(ids) != 0 || hasTarget(t, s, pid, b.ID) {
		t.Fatalf("after remove: subscriptions %v, cursor kept %v", ids, hasTarget(t, s, pid, b.ID))
	}
	if err := s.RemoveSubscription(ctx, pid, b.ID); err != nil {
		t.Fatalf("remove twice: %v", err)
	}
	// A fresh subscription at the same (topic, callback) gets a fresh id and cursor.
	again := must[store.Subscription](t, "again")(s.ActivateSubscription(ctx,
		subscribeVerification(pid, topicOf(pid), "https://cb.example/a", "k", 3600), NewUUID()))
	if again.ID == a.ID || !hasTarget(t, s, pid, again.ID) {
		t.Fatalf("re-subscribe after delete = %+v", again)
	}
}

// WebSubDurable checks that the hub's state survives reopening the store:
// open returns a fresh store, reopen closes it and opens the same database
// again.
func WebSubDurable(t *testing.T, open func(t *testing.T) store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	s := open(t)
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	pending := subscribeVerification(pid, topicOf(pid), "https://cb.example/pending", "pending-secret", 600)
	if err := s.AddVerification(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if err := s.RetryVerification(ctx, pending.ID); err != nil {
		t.Fatal(err)
	}
	sub := must[store.Subscription](t, "activate")(s.ActivateSubscription(ctx,
		subscribeVerification(pid, topicOf(pid), "https://cb.example/a", "sub-secret", 3600), NewUUID()))
	s = reopen(t, s)
	vs := must[[]store.Verification](t, "pending after reopen")(s.PendingVerifications(ctx, 10))
	if len(vs) != 1 || vs[0].ID != pending.ID || !bytes.Equal(vs[0].Secret, pending.Secret) || vs[0].Attempts != 1 ||
		vs[0].LeaseSeconds != 600 {
		t.Fatalf("pending after reopen = %+v", vs)
	}
	got := must[store.Subscription](t, "subscription after reopen")(s.Subscription(ctx, pid, sub.ID))
	if string(got.Secret) != "sub-secret" || !got.ExpiresAt.Equal(sub.ExpiresAt) || got.TokenID != sub.TokenID {
		t.Fatalf("subscription after reopen = %+v, want %+v", got, sub)
	}
	if !hasTarget(t, s, pid, sub.ID) {
		t.Fatal("cursor lost on reopen")
	}
}
