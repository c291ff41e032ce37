package main

import (
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

// BenchmarkMCPClaimPathsLatency measures, in one run against one real
// relay (SQLite), the latency of the claim_paths tool end to end — an MCP
// client (the Go SDK) calling `acrelay mcp` over stdio, which signs,
// posts the claim.open, reads the claims projection and the overlapping
// claim's thread — against the bare POST /v1/correspondence/events of the
// same event (same repository, paths and lifetime; signed beforehand),
// interleaved call by call. Each claim is released outside the timer so
// the projection stays the same size. It reports the p50 and p99 of both
// in milliseconds, and for scale the p50 of an MCP call of read_events
// (one empty page: the MCP round trip and one small GET), measured
// outside the timer (ns/op is the sum of one claim_paths and one POST and
// means little):
//
//	go test -run '^$' -bench MCPClaimPathsLatency -benchtime 300x ./cmd/acrelay/
func BenchmarkMCPClaimPathsLatency(b *testing.B) {
	f := newMCPFixture(b)
	f.otherClaimsParser(b)
	cmd := exec.Command(acrelayBinary(b), "mcp")
	cmd.Env = f.env()
	c := mcp.NewClient(&mcp.Implementation{Name: "acrelay-bench", Version: "0"}, nil)
	cs, err := c.Connect(b.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	priv, err := client.LoadPrivateKey(f.keyFile)
	if err != nil {
		b.Fatal(err)
	}
	signer, _ := client.NewSigner(priv, f.project, correspondence.Sender{IdentityID: f.agentID, SigningKeyID: f.agentKeyID,
		DeviceID: uuid.NewString(), SessionID: uuid.NewString()})
	sess := client.NewSession(signer, client.NewMemorySequencer(0))
	bare, _ := client.New(f.url, f.agentToken)
	paths := []string{"src/parser/lexer", "docs"}
	var mcpLat, postLat, readLat []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "claim_paths", Arguments: map[string]any{
			"repository_id": mcpRepo, "paths": paths, "ttl_seconds": 600}})
		mcpLat = append(mcpLat, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("claim_paths: %v %+v", err, res)
		}
		b.StopTimer()
		// The MCP round trip with one small GET behind it, for scale.
		start = time.Now()
		if r, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "read_events", Arguments: map[string]any{
			"repository_id": mcpRepo, "thread_id": "none", "limit": 1}}); err != nil || r.IsError {
			b.Fatalf("read_events: %v", err)
		}
		readLat = append(readLat, time.Since(start))
		claimID := res.StructuredContent.(map[string]any)["claim_id"].(string)
		if r, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "release_claim", Arguments: map[string]any{
			"repository_id": mcpRepo, "claim_id": claimID}}); err != nil || r.IsError {
			b.Fatalf("release: %v", err)
		}
		at := client.At{RepositoryID: mcpRepo, ThreadID: "bench", Scope: correspondence.Scope{Paths: paths}, Parents: []string{}}
		ev, err := sess.Sign(at, client.ClaimOpen(uuid.NewString(), time.Now().Add(600*time.Second)))
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := ev.CanonicalJSON()
		b.StartTimer()
		start = time.Now()
		_, err = bare.PostBytes(b.Context(), raw)
		postLat = append(postLat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		rel, _ := sess.Sign(client.At{RepositoryID: mcpRepo, ThreadID: "bench"}, client.ClaimRelease(ev, ""))
		if _, err := bare.Post(b.Context(), rel); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(mcpLat, 50)), "claim_paths-p50-ms")
	b.ReportMetric(ms(percentile(mcpLat, 99)), "claim_paths-p99-ms")
	b.ReportMetric(ms(percentile(postLat, 50)), "post-p50-ms")
	b.ReportMetric(ms(percentile(postLat, 99)), "post-p99-ms")
	b.ReportMetric(ms(percentile(readLat, 50)), "read_events-p50-ms")
}

// percentile is the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}
