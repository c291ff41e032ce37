package storetest

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// feedTests are the visibility, feed-token and archive tests of Run.
var feedTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"visibility", testVisibility},
	{"feed_tokens", testFeedTokens},
	{"archives/records_at", testRecordsAt},
}

func testVisibility(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	if v := must[string](t, "visibility")(s.ProjectVisibility(ctx, pid)); v != store.VisibilityPrivate {
		t.Fatalf("new project visibility %q, want private", v)
	}
	if err := s.SetProjectVisibility(ctx, pid, store.VisibilityPublic); err != nil {
		t.Fatal(err)
	}
	if v := must[string](t, "visibility")(s.ProjectVisibility(ctx, pid)); v != store.VisibilityPublic {
		t.Fatalf("visibility %q, want public", v)
	}
	if err := s.SetProjectVisibility(ctx, pid, "Public"); err == nil {
		t.Fatal("an unknown visibility was accepted")
	}
	if v := must[string](t, "visibility")(s.ProjectVisibility(ctx, pid)); v != store.VisibilityPublic {
		t.Fatalf("after a refused value: visibility %q, want public", v)
	}
	if err := s.SetProjectVisibility(ctx, pid, store.VisibilityPrivate); err != nil {
		t.Fatal(err)
	}
	if v := must[string](t, "visibility")(s.ProjectVisibility(ctx, pid)); v != store.VisibilityPrivate {
		t.Fatalf("visibility %q, want private", v)
	}
	_, err := s.ProjectVisibility(ctx, NewUUID())
	wantErr(t, "visibility of unknown project", err, store.ErrNotFound)
	wantErr(t, "set visibility of unknown project", s.SetProjectVisibility(ctx, NewUUID(), store.VisibilityPublic), store.ErrNotFound)
}

func testFeedTokens(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	other := must[store.Project](t, "project 2")(s.CreateProject(ctx, NewUUID())).ID
	sum := sha256.Sum256([]byte("acf_secret"))
	ft := store.FeedToken{ID: "feedid0000000000000000000a", ProjectID: pid, RepositoryID: "repo-1", Hash: sum[:], CreatedBy: "tokenid000000000000000000a"}
	got := must[store.FeedToken](t, "create")(s.CreateFeedToken(ctx, ft))
	checkDBTime(t, "feed token created_at", got.CreatedAt)
	ft.CreatedAt = got.CreatedAt
	read := must[store.FeedToken](t, "get")(s.FeedToken(ctx, ft.ID))
	if read.ID != ft.ID || read.ProjectID != pid || read.RepositoryID != "repo-1" || !bytes.Equal(read.Hash, sum[:]) ||
		read.CreatedBy != ft.CreatedBy || read.Revoked || !read.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("read %+v, want %+v", read, ft)
	}
	_, err := s.CreateFeedToken(ctx, ft)
	wantErr(t, "duplicate feed token", err, store.ErrExists)
	_, err = s.CreateFeedToken(ctx, store.FeedToken{ID: "feedid0000000000000000000b", ProjectID: NewUUID(), RepositoryID: "r", Hash: sum[:], CreatedBy: "x"})
	wantErr(t, "feed token of unknown project", err, store.ErrNotFound)
	_, err = s.FeedToken(ctx, "feedid0000000000000000000z")
	wantErr(t, "unknown feed token", err, store.ErrNotFound)

	wantErr(t, "revoke through another project", s.RevokeFeedToken(ctx, other, ft.ID), store.ErrNotFound)
	if must[store.FeedToken](t, "get")(s.FeedToken(ctx, ft.ID)).Revoked {
		t.Fatal("another project's revocation took effect")
	}
	if err := s.RevokeFeedToken(ctx, pid, ft.ID); err != nil {
		t.Fatal(err)
	}
	if !must[store.FeedToken](t, "get")(s.FeedToken(ctx, ft.ID)).Revoked {
		t.Fatal("not revoked")
	}
	wantErr(t, "revoke unknown", s.RevokeFeedToken(ctx, pid, "feedid0000000000000000000z"), store.ErrNotFound)
}

// testRecordsAt appends a repository's records across two threads,
// interleaved with another repository's, and reads them back by position.
func testRecordsAt(t *testing.T, s store.Store) {
	pid, sg := newProject(t, s)
	var repo, threadA []store.Record
	for i := range 300 { // past ThreadIndexEvery (256): thread_events and its tail both serve
		thread := "t-a"
		if i%3 == 0 {
			thread = "t-b"
		}
		ev, c := sg.Event(t, Spec{RepositoryID: "repo-1", ThreadID: thread})
		rec := appendOK(t, s, ev, c).Record
		repo = append(repo, rec)
		if thread == "t-a" {
			threadA = append(threadA, rec)
		}
		if i%10 == 0 {
			ev, c := sg.Event(t, Spec{RepositoryID: "repo-2", ThreadID: "t-a"})
			appendOK(t, s, ev, c)
		}
	}
	for _, tc := range []struct {
		name   string
		sel    store.Selection
		all    []store.Record
		offset int64
		limit  int
	}{
		{"repository first archive", store.Selection{ProjectID: pid, RepositoryID: "repo-1"}, repo, 0, 200},
		{"repository tail", store.Selection{ProjectID: pid, RepositoryID: "repo-1"}, repo, 200, 201},
		{"repository middle", store.Selection{ProjectID: pid, RepositoryID: "repo-1"}, repo, 17, 5},
		{"repository past the end", store.Selection{ProjectID: pid, RepositoryID: "repo-1"}, repo, 300, 10},
		{"thread", store.Selection{ProjectID: pid, RepositoryID: "repo-1", ThreadID: "t-a"}, threadA, 100, 201},
		{"thread start", store.Selection{ProjectID: pid, RepositoryID: "repo-1", ThreadID: "t-a"}, threadA, 0, 3},
		{"unknown repository", store.Selection{ProjectID: pid, RepositoryID: "repo-9"}, nil, 0, 10},
		{"unknown project", store.Selection{ProjectID: NewUUID(), RepositoryID: "repo-1"}, nil, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := must[int64](t, "count")(s.CountRecords(ctx, tc.sel))
			if n != int64(len(tc.all)) {
				t.Fatalf("count %d, want %d", n, len(tc.all))
			}
			got := must[[]store.Record](t, "records at")(s.RecordsAt(ctx, tc.sel, tc.offset, tc.limit))
			lo := min(int(tc.offset), len(tc.all))
			want := tc.all[lo:min(lo+tc.limit, len(tc.all))]
			if !slices.Equal(seqsOf(got), seqsOf(want)) {
				t.Fatalf("seqs %v\nwant %v", seqsOf(got), seqsOf(want))
			}
			for i := range got {
				if got[i].EventID != want[i].EventID || !bytes.Equal(got[i].Event, want[i].Event) || !got[i].ReceivedAt.Equal(want[i].ReceivedAt) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
}
