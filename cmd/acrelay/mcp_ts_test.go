package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/internal/attributed"
)

// TestMCPTypeScriptClient: the official TypeScript MCP SDK from npm, an
// MCP client nobody here wrote, spawns `acrelay mcp` over stdio (ACRELAY_*
// variables only, HOME empty) against a real relay where another identity
// claimed src/parser first, with an instruction in its summary.
func TestMCPTypeScriptClient(t *testing.T) {
	modules := os.Getenv("ACRELAY_MCP_NPM_MODULES")
	if modules == "" {
		t.Skip("the TypeScript MCP SDK is not provisioned: set ACRELAY_MCP_NPM_MODULES (scripts/test.sh provisions it with scripts/provision_mcp_npm.sh)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH (scripts/provision_mcp_npm.sh installs it)")
	}
	f := newMCPFixture(t)
	f.otherClaimsParser(t)
	env := map[string]string{}
	for _, kv := range f.env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	envJSON, _ := json.Marshal(env)
	script, _ := filepath.Abs("testdata/mcp_ts_client.cjs")
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NODE_PATH=" + modules, "ACRELAY_BIN=" + acrelayBinary(t),
		"ACRELAY_MCP_TEST_ENV=" + string(envJSON), "ACRELAY_MCP_TEST_REPO=" + mcpRepo}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	type result struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	var out struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Capabilities struct {
			Resources struct {
				Subscribe bool `json:"subscribe"`
			} `json:"resources"`
		} `json:"capabilities"`
		Tools []struct {
			Name, Type, Description string
		} `json:"tools"`
		Claim, Voice, Bad, WrongType result
		Unknown                      *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"unknown"`
		Stderr string `json:"stderr"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if out.Server.Name != "acrelay" || !out.Capabilities.Resources.Subscribe {
		t.Fatalf("server %+v capabilities %+v", out.Server, out.Capabilities)
	}
	if len(out.Tools) > 16 || len(out.Tools) != len(toolOrder) {
		t.Fatalf("%d tools", len(out.Tools))
	}
	for i, tl := range out.Tools {
		if tl.Type != "object" || tl.Description == "" || !toolNames[tl.Name] {
			t.Fatalf("tool %d: %+v", i, tl)
		}
	}
	if out.Claim.IsError || len(out.Claim.Content) != 1 {
		t.Fatalf("claim_paths: %+v", out.Claim)
	}
	var claim claimResult
	if err := json.Unmarshal(out.Claim.StructuredContent, &claim); err != nil {
		t.Fatal(err)
	}
	text := out.Claim.Content[0].Text
	cf, _ := f.otherClaim.Claim()
	if !strings.Contains(text, "Your claim "+claim.ClaimID+" is active until "+claim.ExpiresAt) ||
		!strings.Contains(text, "- claim "+cf.ClaimID+" (generation 1, event "+f.otherClaim.ID+") held by "+f.otherLabel()) ||
		len(claim.Overlapping) != 1 || claim.Overlapping[0].EventID != f.otherClaim.ID {
		t.Fatalf("claim_paths does not name both claims:\n%s", text)
	}
	framed := attributed.Quote(attributedOther(f), "summary", injection)
	if !strings.Contains(text, "\n    "+framed+"\n") || strings.Count(text, injection) != 1 {
		t.Fatalf("the other's instruction is not framed as its quoted report:\n%s", text)
	}
	f.checkAgentClaim(t, claim.ClaimID, claim.EventID)
	if v := out.Voice.Content[0].Text; out.Voice.IsError || !strings.Contains(v, `["src/parser"]`) {
		t.Fatalf("voice:\n%s", v)
	}
	if out.Bad.IsError != true || !strings.HasPrefix(out.Bad.Content[0].Text, "event_invalid: ") ||
		!strings.Contains(out.Bad.Content[0].Text, "/scope/paths/0 path_invalid") {
		t.Fatalf("a path with ..: %+v", out.Bad)
	}
	if !out.WrongType.IsError || !strings.HasPrefix(out.WrongType.Content[0].Text, "body_invalid: argument paths: want an array of strings") {
		t.Fatalf("wrong type: %+v", out.WrongType)
	}
	if out.Unknown == nil || out.Unknown.Code != -32602 || !strings.Contains(out.Unknown.Message, `not_found: unknown tool "push_to_main"`) {
		t.Fatalf("unknown tool: %+v", out.Unknown)
	}
	if strings.Contains(out.Stderr, f.agentToken) {
		t.Fatal("the token is in the server's log")
	}
	// Only the claim and nothing of the refused calls was posted: the
	// other's two events and the agent's claim.
	if n := f.eventCount(t); n != 3 {
		t.Fatalf("%d events", n)
	}
}

func attributedOther(f *mcpFixture) attributed.Author {
	return attributed.Author{IdentityID: f.other.Signer.Sender.IdentityID, DisplayName: "other-agent"}
}
