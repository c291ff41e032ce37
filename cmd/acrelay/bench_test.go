package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestBenchRounds runs the load tool end to end, small (it starts its own
// relay processes): two rounds of group commit interleaved with one
// transaction per event, then the median of each. It checks the shape of
// what the tool reports, not how fast this machine is.
func TestBenchRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four relay processes")
	}
	bin := acrelayBinary(t)
	cmd := exec.Command(bin, "bench", "--events", "200", "--clients", "4", "--rounds", "2", "--compare-one-tx", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acrelay bench: %v\n%s", err, stderr.String())
	}
	var results []benchResult
	var ratio string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "{") {
			var r benchResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("result line %q: %v", line, err)
			}
			results = append(results, r)
			continue
		}
		ratio = line
	}
	// Round 1 (group, one-tx), round 2 (group, one-tx), then the medians.
	wantLabels := []string{
		"sqlite group commit", "sqlite one-tx-per-event", "sqlite group commit", "sqlite one-tx-per-event",
		"sqlite group commit, median of 2 rounds", "sqlite one-tx-per-event, median of 2 rounds",
	}
	if len(results) != len(wantLabels) {
		t.Fatalf("%d result lines, want %d:\n%s", len(results), len(wantLabels), out)
	}
	for i, r := range results {
		if r.Label != wantLabels[i] {
			t.Errorf("line %d label %q, want %q", i, r.Label, wantLabels[i])
		}
		if r.Events != 200 || r.Clients != 4 || r.Errors != 0 {
			t.Errorf("line %d: %d events, %d clients, %d errors; want 200, 4, 0", i, r.Events, r.Clients, r.Errors)
		}
		if r.EventsPerSecond <= 0 || r.CeilingPerSec <= 0 || r.P99Millis < r.P50Millis || r.RatioToCeiling <= 0 {
			t.Errorf("line %d: implausible figures %+v", i, r)
		}
		if wantRounds := map[bool]int{true: 2, false: 0}[i >= 4]; r.Rounds != wantRounds {
			t.Errorf("line %d: rounds %d, want %d", i, r.Rounds, wantRounds)
		}
	}
	// Each median lies within its rounds.
	for i := 0; i < 2; i++ {
		a, b, m := results[i].EventsPerSecond, results[i+2].EventsPerSecond, results[i+4].EventsPerSecond
		if m != (a+b)/2 {
			t.Errorf("median events/s %v of %v and %v, want their mean", m, a, b)
		}
	}
	if !strings.HasPrefix(ratio, "group commit / one-tx-per-event = ") {
		t.Errorf("last line %q, want the group commit / one-tx ratio", ratio)
	}
}
