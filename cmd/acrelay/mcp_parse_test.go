package main

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"
)

func TestParseResourceURI(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want resourceRef
		ok   bool
	}{
		{"acrelay://repositories/repo%3Aexample%2Fapp/voice", resourceRef{repo: "repo:example/app", kind: "voice"}, true},
		{"acrelay://repositories/r/claims", resourceRef{repo: "r", kind: "claims"}, true},
		{"acrelay://repositories/r/threads/task%3Aparser", resourceRef{repo: "r", kind: "thread", thread: "task:parser"}, true},
		{"acrelay://repositories/r/threads/", resourceRef{}, false},
		{"acrelay://repositories//voice", resourceRef{}, false},
		{"acrelay://repositories/r/other", resourceRef{}, false},
		{"acrelay://repositories/r%zz/voice", resourceRef{}, false},
		{"file:///etc/passwd", resourceRef{}, false},
	} {
		got, err := parseResourceURI(tc.uri)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: got %+v, %v", tc.uri, got, err)
		}
	}
}

// FuzzParseResourceURI: any repository and thread id, percent-encoded as
// the URI templates expand them, parse back to themselves.
func FuzzParseResourceURI(f *testing.F) {
	f.Add("repo:example/app", "task:parser")
	f.Add("%", "/")
	f.Fuzz(func(t *testing.T, repo, thread string) {
		if repo == "" || thread == "" {
			return
		}
		uri := resourcePrefix + url.PathEscape(repo) + "/threads/" + url.PathEscape(thread)
		got, err := parseResourceURI(uri)
		if err != nil || got != (resourceRef{repo: repo, kind: "thread", thread: thread}) {
			t.Fatalf("%q: %+v %v", uri, got, err)
		}
	})
}

// FuzzDecodeArgs: whatever the arguments, decoding never panics and a
// refusal is a toolError with a stable code.
func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte(`{"repository_id":"r","paths":["a"],"ttl_seconds":600}`))
	f.Add([]byte(`{"after":"0012"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"paths":"x","extra":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var a struct {
			RepositoryID string   `json:"repository_id"`
			Paths        []string `json:"paths"`
			TTLSeconds   *int64   `json:"ttl_seconds"`
			After        seqArg   `json:"after"`
		}
		err := decodeArgs(json.RawMessage(raw), &a)
		if err == nil {
			return
		}
		var te *toolError
		if !errors.As(err, &te) || (te.Code != "body_invalid" && te.Code != "after_invalid") || te.Message == "" {
			t.Fatalf("%q: %v", raw, err)
		}
	})
}
