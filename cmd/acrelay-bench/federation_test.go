package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// TestFederationBench: a tiny run of acrelay-bench federation backfills
// every record on B, measures both rates and the live latency, and
// reports no refused record.
func TestFederationBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two relay processes")
	}
	bin := benchBinary(t)
	cmd := exec.Command(bin, "federation", "--events", "300", "--clients", "4", "--probes", "5", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acrelay-bench federation: %v\n%s", err, stderr.String())
	}
	var r federationResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if r.Events != 300 || r.Probes != 5 || r.LocalPerSecond <= 0 || r.BackfillPerSecond <= 0 || r.Ratio <= 0 ||
		r.P50Millis <= 0 || r.P99Millis < r.P50Millis || r.Errors != 0 {
		t.Errorf("result %+v", r)
	}
}
