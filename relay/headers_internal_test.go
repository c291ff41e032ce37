package relay

import (
	"net/url"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// selectionQueryValues is the url.Values encoding selectionQuery writes
// without the map.
func selectionQueryValues(sel store.Selection) string {
	v := url.Values{}
	if sel.ProjectID != "" {
		v.Set("project_id", sel.ProjectID)
	}
	v.Set("repository_id", sel.RepositoryID)
	if sel.ThreadID != "" {
		v.Set("thread_id", sel.ThreadID)
	}
	return v.Encode()
}

func TestSelectionQuery(t *testing.T) {
	for _, sel := range []store.Selection{
		{RepositoryID: "repo:a"},
		{ProjectID: "0192e4a0-0000-7000-8000-000000000001", RepositoryID: "repo:a b&c=d/é", ThreadID: "t#1?"},
		{ProjectID: "p", RepositoryID: "", ThreadID: "t"},
	} {
		if got, want := selectionQuery(sel), selectionQueryValues(sel); got != want {
			t.Errorf("selectionQuery(%+v) = %q, want %q", sel, got, want)
		}
	}
}

func TestMarshalTemplateFast(t *testing.T) {
	for _, tc := range [][3]string{
		{"http://relay.test/v1/log/p/proof/inclusion{?received_seq,tree_size}", relLogInclusionProof, mediaJSON},
		{`a"b\c`, "r", "t"},
		{"", "", ""},
		{"é", "r", "t"}, // not printable ASCII: marshalTemplate's answer ("")
	} {
		if got, want := marshalTemplateFast(tc[0], tc[1], tc[2]), marshalTemplate(tc[0], tc[1], tc[2]); got != want {
			t.Errorf("marshalTemplateFast%q = %q, want %q", tc, got, want)
		}
	}
}

// FuzzHeaderWriters: the hand-written selection query and Link-Template
// member equal the url.Values and httpsfv encodings.
func FuzzHeaderWriters(f *testing.F) {
	f.Add("p", "repo:a", "t", `x"\`)
	f.Fuzz(func(t *testing.T, project, repo, thread, tpl string) {
		sel := store.Selection{ProjectID: project, RepositoryID: repo, ThreadID: thread}
		if got, want := selectionQuery(sel), selectionQueryValues(sel); got != want {
			t.Fatalf("selectionQuery = %q, want %q", got, want)
		}
		if got, want := marshalTemplateFast(tpl, repo, thread), marshalTemplate(tpl, repo, thread); got != want {
			t.Fatalf("marshalTemplateFast = %q, want %q", got, want)
		}
	})
}
