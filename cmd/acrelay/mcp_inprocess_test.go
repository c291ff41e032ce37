package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

// inProcessMCP runs the MCP server of the fixture's agent in the test
// process (so -race sees it) and returns a Go SDK client session on it.
func inProcessMCP(t *testing.T, f *mcpFixture) (*mcp.ClientSession, *mcpServer) {
	t.Helper()
	c, err := client.New(f.url, f.agentToken)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := client.LoadPrivateKey(f.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := client.NewSigner(priv, f.project, correspondence.Sender{IdentityID: f.agentID, SigningKeyID: f.agentKeyID,
		DeviceID: uuid.NewString(), SessionID: uuid.NewString()})
	s := newMCPServer(c, signer, &memorySeq{}, slog.New(slog.DiscardHandler))
	t.Cleanup(s.stopFollowers)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, s
}

// TestMCPConcurrentCalls: tool calls at once never share a session_seq.
func TestMCPConcurrentCalls(t *testing.T) {
	f := newMCPFixture(t)
	cs, _ := inProcessMCP(t, f)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			name, args := "post_update", map[string]any{"repository_id": mcpRepo, "thread_id": "t", "kind": "progress", "summary": fmt.Sprint("step ", i)}
			if i%2 == 1 {
				name, args = "claim_paths", map[string]any{"repository_id": mcpRepo, "paths": []string{fmt.Sprint("src/p", i)}, "summary": "mine"}
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil || res.IsError {
				errs <- fmt.Sprint(err, res)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	seen := map[int64]bool{}
	for rec, err := range f.admin.Events(t.Context(), client.EventsQuery{RepositoryID: mcpRepo}) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[rec.Event.SessionSeq] {
			t.Fatalf("session_seq %d used twice", rec.Event.SessionSeq)
		}
		seen[rec.Event.SessionSeq] = true
	}
	if len(seen) != 12 { // 4 progress, 4 claims with their 4 intents
		t.Fatalf("%d events", len(seen))
	}
}

// TestMCPEveryEventTool posts each kind of the event tools once and
// checks what the relay stored.
func TestMCPEveryEventTool(t *testing.T) {
	f := newMCPFixture(t)
	f.otherClaimsParser(t)
	cs, _ := inProcessMCP(t, f)
	ctx := t.Context()
	call := func(name string, args map[string]any) postedView {
		t.Helper()
		args["repository_id"] = mcpRepo
		if _, ok := args["thread_id"]; !ok {
			args["thread_id"] = "task:parser"
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", name, err, textOf(t, res))
		}
		var pv postedView
		sc, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(sc, &pv); err != nil || pv.EventID == "" {
			var wrapped struct {
				Event postedView `json:"event"`
			}
			_ = json.Unmarshal(sc, &wrapped)
			pv = wrapped.Event
		}
		if !pv.Created || !strings.HasPrefix(pv.EventID, "sha256:") {
			t.Fatalf("%s: %s", name, sc)
		}
		return pv
	}
	rev := strings.Repeat("a", 40)
	target := f.otherSay.ID
	kinds := []string{}
	add := func(pv postedView) { kinds = append(kinds, pv.Kind) }
	add(call("post_update", map[string]any{"kind": "intent", "summary": "take the lexer", "paths": []string{"src/parser/lexer"}}))
	add(call("post_update", map[string]any{"kind": "observation", "summary": "tests are slow"}))
	add(call("offer_artifact", map[string]any{"artifact_kind": "git_commit", "revision": rev, "summary": "lexer rewrite"}))
	add(call("offer_artifact", map[string]any{"artifact_kind": "git_patch", "digest": "sha256:" + strings.Repeat("b", 64), "locator": "https://example.org/p.diff"}))
	for _, ack := range []string{"seen", "understood", "accepted", "applied", "rejected"} {
		args := map[string]any{"ack": ack, "target_event_id": target}
		if ack == "applied" {
			args["result_revision"] = rev
		}
		add(call("acknowledge", args))
	}
	add(call("conflict", map[string]any{"action": "raise", "target_event_ids": []string{f.otherClaim.ID, f.otherSay.ID}, "summary": "both touch the lexer"}))
	add(call("conflict", map[string]any{"action": "resolve", "target_event_ids": []string{f.otherClaim.ID}, "summary": "split by file"}))
	add(call("repair", map[string]any{"target_event_ids": []string{target}, "summary": "wrong path earlier"}))
	pause := call("availability", map[string]any{"kind": "pause", "until": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "detail": "lunch"})
	add(pause)
	add(call("availability", map[string]any{"kind": "rest"}))
	add(call("availability", map[string]any{"kind": "refusal", "target_event_id": target}))
	add(call("availability", map[string]any{"kind": "resume", "target_event_id": pause.EventID}))
	hid := uuid.NewString()
	contract := map[string]any{
		"contractVersion": "1.0", "handoffId": hid, "idempotencyKey": "lexer-" + hid,
		"createdAt": time.Now().UTC().Format("2006-01-02T15:04:05Z"),
		"issuer":    map[string]any{"id": "coding-agent", "role": "planner"}, "assignee": map[string]any{"id": "other-agent", "role": "executor"},
		"objective": "Finish the lexer.", "scope": map[string]any{"include": []string{"src/parser/lexer"}, "exclude": []string{}},
		"inputs": []any{}, "constraints": []string{}, "acceptance": []any{map[string]any{"id": "AC-1", "assertion": "tests pass", "evidenceRequired": false}},
		"permissions": map[string]any{"read": []string{"src/*"}, "write": []string{"src/parser/lexer"}, "network": []string{}, "secrets": []string{}},
		"budget":      map[string]any{"wallClockSeconds": 3600, "maxAttempts": 2},
		"escalation":  map[string]any{"on": []string{}, "route": "human:lead"}, "state": "proposed",
	}
	ho := call("handoff", map[string]any{"summary": "lexer half done", "next_safe_action": "run the lexer tests", "contract": contract})
	add(ho)
	add(call("close_thread", map[string]any{"summary": "done here"}))
	want := []string{"intent", "observation", "artifact.offer", "artifact.offer", "ack.seen", "ack.understood", "ack.accepted", "ack.applied",
		"ack.rejected", "conflict.raise", "conflict.resolve", "repair", "pause", "rest", "refusal", "resume", "handoff", "close"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("kinds %v", kinds)
	}
	// The contract was stored and names the handoff event.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/v1/handoffs/"+hid, nil)
	req.Header.Set("Authorization", "Bearer "+f.admin.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Events   []string `json:"events"`
		Contract struct {
			State string `json:"state"`
		} `json:"contract"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || got.Contract.State != "proposed" ||
		len(got.Events) != 1 || got.Events[0] != ho.EventID {
		t.Fatalf("contract: %d %+v %v", resp.StatusCode, got, err)
	}

	// read_events pages after a cursor and frames the other's words.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_events", Arguments: map[string]any{"repository_id": mcpRepo, "after": "1", "limit": 1}})
	if err != nil || res.IsError {
		t.Fatal(err)
	}
	text := textOf(t, res)
	if !strings.HasPrefix(text, "1 event(s) after 1, oldest first; next cursor 2 (more after it).\n#2 intent · event "+f.otherSay.ID) ||
		!strings.Contains(text, "  ⟦quoted from "+f.otherLabel()+", summary⟧ \""+injection+"\"\n") {
		t.Fatalf("read_events:\n%s", text)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_thread", Arguments: map[string]any{"repository_id": mcpRepo, "thread_id": "task:parser"}})
	if err != nil || res.IsError || !strings.HasPrefix(textOf(t, res), "20 event(s) after 0") {
		t.Fatalf("read_thread: %v %s", err, textOf(t, res))
	}
}

// TestMCPPostOutcomeUnknown: when the relay takes the request and the
// answer is lost (here a listener that reads it and hangs up), the tool
// error does not say "Nothing was posted": it names the event whose fate
// is unknown and says to look before posting again. A refused connection
// (nothing sent) still says nothing was posted.
func TestMCPPostOutcomeUnknown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = http.ReadRequest(bufio.NewReader(conn))
				conn.Close()
			}()
		}
	}()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String()
	refused.Close()

	priv, _ := client.GenerateKey()
	signer, _ := client.NewSigner(priv, uuid.NewString(), correspondence.Sender{IdentityID: uuid.NewString(), SigningKeyID: uuid.NewString(),
		DeviceID: uuid.NewString(), SessionID: uuid.NewString()})
	for _, tc := range []struct {
		url, want string
		unknown   bool
	}{
		{"http://" + ln.Addr().String(), "\nWhether the relay stored event sha256:", true},
		{refusedURL, "\nNothing was posted.", false},
	} {
		c, err := client.New(tc.url, "acr_test")
		if err != nil {
			t.Fatal(err)
		}
		c.Retry = client.RetryPolicy{MaxAttempts: 1}
		s := newMCPServer(c, signer, &memorySeq{}, slog.New(slog.DiscardHandler))
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.srv.Connect(t.Context(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(t.Context(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "post_update",
			Arguments: map[string]any{"repository_id": mcpRepo, "thread_id": "t", "kind": "progress", "summary": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		text := textOf(t, res)
		var te toolError
		sc, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(sc, &te)
		if !res.IsError || te.Code != "unavailable" || te.OutcomeUnknown != tc.unknown || !strings.Contains(text, tc.want) ||
			(tc.unknown && (!strings.HasPrefix(te.EventID, "sha256:") || !strings.Contains(text, te.EventID) || strings.Contains(text, "Nothing was posted"))) {
			t.Fatalf("%s: %+v\n%s", tc.url, te, text)
		}
		cs.Close()
		ss.Close()
		s.stopFollowers()
	}
}

// TestMCPClaimWithoutOverlapHasNoNotice: a claim no other identity's
// overlaps quotes nobody, so its result spends no tokens on the notice
// about quoted lines.
func TestMCPClaimWithoutOverlapHasNoNotice(t *testing.T) {
	f := newMCPFixture(t)
	cs, _ := inProcessMCP(t, f)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "claim_paths",
		Arguments: map[string]any{"repository_id": mcpRepo, "paths": []string{"web/solo"}, "ttl_seconds": 60}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	text := textOf(t, res)
	if !strings.HasSuffix(text, "\nNo active claim of another identity overlaps these paths.") || strings.Contains(text, "⟦quoted") {
		t.Fatalf("claim without overlap:\n%s", text)
	}
}

// TestMCPOwnKeyProblem: the start-up check names why the relay would
// refuse the agent's posts, from the registry as the relay lists it.
func TestMCPOwnKeyProblem(t *testing.T) {
	f := newMCPFixture(t)
	priv, err := client.LoadPrivateKey(f.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := client.NewSigner(priv, f.project, correspondence.Sender{IdentityID: f.agentID, SigningKeyID: f.agentKeyID,
		DeviceID: uuid.NewString(), SessionID: uuid.NewString()})
	c, _ := client.New(f.url, f.agentToken)
	_, keys, err := c.Identities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p := ownKeyProblem(keys, signer); p != "" {
		t.Fatalf("registered key: %s", p)
	}
	other, _ := client.GenerateKey()
	for _, tc := range []struct {
		name   string
		mutate func(s *client.Signer) *client.Signer
		want   string
	}{
		{"unknown key id", func(s *client.Signer) *client.Signer {
			o := *s
			o.Sender.SigningKeyID = uuid.NewString()
			return &o
		}, "the relay does not list this signing key"},
		{"another identity", func(s *client.Signer) *client.Signer {
			o := *s
			o.Sender.IdentityID = uuid.NewString()
			return &o
		}, "the relay lists this signing key under another identity"},
		{"another key file", func(s *client.Signer) *client.Signer {
			o, _ := client.NewSigner(other, f.project, s.Sender)
			return o
		}, "the key file is not the key the relay registered"},
	} {
		if p := ownKeyProblem(keys, tc.mutate(signer)); !strings.HasPrefix(p, tc.want) {
			t.Errorf("%s: %q", tc.name, p)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.url+"/v1/admin/keys/"+f.agentKeyID+"/revoke", nil)
	req.Header.Set("Authorization", "Bearer "+f.admin.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %v %v", err, resp)
	}
	resp.Body.Close()
	_, keys, _ = c.Identities(t.Context())
	if p := ownKeyProblem(keys, signer); !strings.HasPrefix(p, "the relay lists this signing key as revoked") {
		t.Fatalf("revoked: %q", p)
	}
}
