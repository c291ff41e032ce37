package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/internal/pgtest"
)

// TestTLogBench: acrelay-bench tlog runs a relay without and with the
// verifiable log, knows the checkpoint lag of every record, and measures
// the tree's bytes (the tile payload of 300 records: 256 + 44 leaf hashes
// and one hash above them, 32 bytes each).
func TestTLogBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relay processes")
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			args := []string{"tlog", "--events", "200", "--clients", "4", "--rounds", "1", "--size-events", "300", "--json"}
			if engine == "postgres" {
				url := os.Getenv(pgtest.EnvVar)
				if url == "" {
					t.Skip(pgtest.SkipReason)
				}
				args = append(args, "--database-url", pgtest.FreshDatabase(t))
			}
			cmd := exec.Command(benchBinary(t), args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("acrelay-bench tlog: %v\n%s\n%s", err, out, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 4 { // without, with, the size run, the figures
				t.Fatalf("%d lines:\n%s", len(lines), out)
			}
			var r tlogBenchResult
			if err := json.Unmarshal([]byte(lines[3]), &r); err != nil {
				t.Fatalf("figures %q: %v", lines[3], err)
			}
			if r.Engine != engine || r.LagRecords != 200 || r.SizeRecords != 300 || r.TreePayloadPerRecord != 32.1 ||
				r.TreeBytesPerRecord < 32.1 || r.Ratio <= 0 || r.WithPerSecond <= 0 || r.WithoutPerSecond <= 0 ||
				r.LagP50Millis < 0 || r.LagP50Millis > r.LagP99Millis || r.LagP99Millis > r.LagMaxMillis {
				t.Fatalf("figures %+v", r)
			}
		})
	}
}
