package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// FuzzStdioLineFilter: whatever arrives on stdin, the filter hands on only
// lines that are JSON-RPC messages (or batches) the SDK decodes, one per
// input line, and answers every other non-blank line with exactly one
// error line: Parse error for what is not JSON (or too long), Invalid
// Request for JSON that is not a message.
func FuzzStdioLineFilter(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\nnot json\n\n[1]\r\n{"))
	f.Add([]byte("\x00\xff\n  {} {}\n42\n[]\n[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		filt := newStdioLineFilter(bytes.NewReader(in), &out, slog.New(slog.DiscardHandler))
		filt.max = 64
		got, err := io.ReadAll(filt)
		if err != nil {
			t.Fatal(err)
		}
		var wantJSON, wantNotJSON int
		for _, l := range bytes.Split(in, []byte("\n")) {
			tooLong := len(l) > filt.max
			l = bytes.TrimSpace(l)
			switch {
			case tooLong:
				wantNotJSON++
			case len(l) == 0:
			case json.Valid(l):
				wantJSON++
			default:
				wantNotJSON++
			}
		}
		passed := 0
		for _, l := range bytes.SplitAfter(got, []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			if l[len(l)-1] != '\n' || !json.Valid(l) {
				t.Fatalf("handed on %q", l)
			}
			if l[0] != '[' {
				if _, err := jsonrpc.DecodeMessage(l); err != nil {
					t.Fatalf("handed on %q: %v", l, err)
				}
			}
			passed++
		}
		answers := strings.SplitAfter(out.String(), "\n")
		answers = answers[:len(answers)-1]
		var parse, invalid int
		for _, a := range answers {
			switch a {
			case parseErrorLine:
				parse++
			case invalidRequestLine:
				invalid++
			default:
				t.Fatalf("answered %q", a)
			}
		}
		if parse != wantNotJSON || passed+invalid != wantJSON {
			t.Fatalf("%q: passed %d, invalid %d (JSON lines %d), parse errors %d (want %d)", in, passed, invalid, wantJSON, parse, wantNotJSON)
		}
	})
}
