package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/handoff"
)

// standInRelay answers the handoff routes of spec/handoff-contract-1.md
// for one contract, using the handoff package for validation and moves.
// The relay's own handoff routes do not exist yet; when they do, these
// tests should run against relay.Server instead.
type standInRelay struct {
	mu       sync.Mutex
	contract *handoff.Contract
	version  int
	requests []string // "METHOD path If-Match body"
}

func (s *standInRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	s.requests = append(s.requests, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", r.Method, r.URL.Path, r.Header.Get("If-Match"), body)))
	fail := func(status int, code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":%q,"message":"stand-in"}`, code)
	}
	if r.Header.Get("Authorization") != "Bearer tok" {
		fail(http.StatusUnauthorized, "unauthorized")
		return
	}
	answer := func(status int) {
		b, _ := json.Marshal(map[string]any{"contract": s.contract, "version": s.version, "overdue": false, "events": []string{}})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, s.version))
		w.WriteHeader(status)
		w.Write(b)
	}
	id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/handoffs/"), "/")
	switch {
	case r.Method == http.MethodPut && rest == "":
		c, issues, err := handoff.Validate(body)
		if err != nil || issues != nil || c.HandoffID != id {
			fail(http.StatusUnprocessableEntity, "contract_invalid")
			return
		}
		s.contract, s.version = &c, 1
		answer(http.StatusCreated)
	case s.contract == nil || s.contract.HandoffID != id:
		fail(http.StatusNotFound, "not_found")
	case r.Method == http.MethodGet && rest == "":
		answer(http.StatusOK)
	case r.Method == http.MethodPost && rest == "transitions":
		if r.Header.Get("If-Match") == "" {
			fail(http.StatusPreconditionRequired, "precondition_required")
			return
		}
		if r.Header.Get("If-Match") != fmt.Sprintf(`"v%d"`, s.version) {
			fail(http.StatusPreconditionFailed, "precondition_failed")
			return
		}
		var req struct {
			To     string          `json:"to"`
			Result *handoff.Result `json:"result"`
		}
		json.Unmarshal(body, &req)
		next, err := handoff.Transition(*s.contract, req.To, req.Result)
		var te *handoff.TransitionError
		if errors.As(err, &te) {
			fail(http.StatusConflict, te.Code)
			return
		}
		s.contract, s.version = &next, s.version+1
		answer(http.StatusOK)
	default:
		fail(http.StatusNotFound, "not_found")
	}
}

func TestHandoffRemote(t *testing.T) {
	relay := &standInRelay{}
	srv := httptest.NewServer(relay)
	t.Cleanup(srv.Close)
	t.Setenv("ACRELAY_TOKEN", "tok")
	const id = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	valid, err := os.ReadFile("../../handoff/testdata/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	contractFile := filepath.Join(dir, "contract.json")
	resultFile := filepath.Join(dir, "result.json")
	os.WriteFile(contractFile, valid, 0o600)
	os.WriteFile(resultFile, []byte(`{"summary":"renewed","evidenceUris":["https://example.org/r/1"]}`), 0o600)

	steps := []struct {
		name    string
		args    []string
		stdin   string
		code    int
		out     string // substring of stdout
		errText string // substring of the error
		request string // the last request the relay saw
		sends   int    // requests this step sends
	}{
		{name: "put", args: []string{"put", contractFile}, out: `"version":1`, request: "PUT /v1/handoffs/" + id, sends: 1},
		{name: "put invalid is not sent", args: []string{"put", "-"}, stdin: strings.Replace(string(valid), `"maxAttempts": 3`, `"maxAttempts": 0`, 1),
			code: exitRefused, errText: "contract_invalid: 1 schema violation(s); nothing sent", request: "PUT /v1/handoffs/" + id, sends: 0},
		{name: "get", args: []string{"get", id}, out: `"state":"proposed"`, request: "GET /v1/handoffs/" + id, sends: 1},
		{name: "get etag", args: []string{"get", "--etag", id}, out: `"v1"` + "\n", request: "GET /v1/handoffs/" + id, sends: 1},
		{name: "get bad id is not sent", args: []string{"get", strings.ToUpper(id)}, code: exitInput, errText: "handoff_id_invalid", request: "GET /v1/handoffs/" + id, sends: 0},
		{name: "transition reads the ETag first", args: []string{"transition", id, "accepted"}, out: `"state":"accepted"`,
			request: `POST /v1/handoffs/` + id + `/transitions "v1" {"to":"accepted"}`, sends: 2},
		{name: "stale if-match", args: []string{"transition", "--if-match", `"v1"`, id, "running"}, code: exitRefused,
			errText: "relay answered 412 precondition_failed", request: `POST /v1/handoffs/` + id + `/transitions "v1" {"to":"running"}`, sends: 1},
		{name: "illegal move", args: []string{"transition", id, "succeeded", "--result", resultFile}, code: exitRefused,
			errText: "relay answered 409 transition_not_allowed",
			request: `POST /v1/handoffs/` + id + `/transitions "v2" {"result":{"evidenceUris":["https://example.org/r/1"],"summary":"renewed"},"to":"succeeded"}`, sends: 2},
		{name: "result from stdin outside the profile", args: []string{"transition", id, "failed", "--result", "-"}, stdin: `{"summary":"a","summary":"b"}`,
			code: exitRefused, errText: "duplicate_object_name", request: `POST /v1/handoffs/` + id + `/transitions "v2" {"result":{"evidenceUris":["https://example.org/r/1"],"summary":"renewed"},"to":"succeeded"}`, sends: 0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			args := append([]string{"--url", srv.URL}, st.args[1:]...)
			var cmd = map[string]func() *cobra.Command{
				"put": newHandoffPutCmd, "get": newHandoffGetCmd, "transition": newHandoffTransitionCmd,
			}[st.args[0]]()
			relay.mu.Lock()
			before := len(relay.requests)
			relay.mu.Unlock()
			out, err := runCmd(t, cmd, st.stdin, args...)
			if got := exitCode(err); got != st.code {
				t.Fatalf("exit %d (%v), want %d", got, err, st.code)
			}
			if st.errText != "" && !strings.Contains(err.Error(), st.errText) {
				t.Fatalf("error %q lacks %q", err, st.errText)
			}
			if !strings.Contains(out, st.out) {
				t.Fatalf("output %q lacks %q", out, st.out)
			}
			relay.mu.Lock()
			last, sent := relay.requests[len(relay.requests)-1], len(relay.requests)-before
			relay.mu.Unlock()
			if sent != st.sends {
				t.Fatalf("sent %d requests, want %d", sent, st.sends)
			}
			if !strings.HasPrefix(last, st.request) {
				t.Fatalf("last request %q, want prefix %q", last, st.request)
			}
		})
	}

	// Without a token nothing is sent.
	t.Setenv("ACRELAY_TOKEN", "")
	_, err = runCmd(t, newHandoffGetCmd(), "", "--url", srv.URL, id)
	if exitCode(err) != exitInput || !strings.Contains(err.Error(), "no bearer token") {
		t.Fatalf("no token: %v", err)
	}
}
