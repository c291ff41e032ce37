package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/acrelay/acrelay/lease"
)

// TestRestartReclaimsLeases (SQLite): a relay SIGKILLed under load and
// started again on the same data directory resumes delivery within 2 s,
// with the default 15 s courier lease. Its holder identity is kept in the
// data directory, so it reclaims its dead predecessor's leases under new
// fences instead of waiting for them to expire; no acknowledged record is
// lost. Three crashes in a row.
func TestRestartReclaimsLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	const op = "reclaim-operator-token"
	data, dir := t.TempDir(), t.TempDir()
	args := []string{"--data-dir", data, "--export-dir", dir} // the default lease: 15s
	r := startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, r.url, op)
	file := filepath.Join(dir, p.id+".jsonl")
	var ids []string
	ids = append(ids, p.post(t, r.url, "first"))
	waitLines(t, file, ids, 10*time.Second)
	first, err := os.ReadFile(filepath.Join(data, lease.IdentityFile))
	if err != nil || len(first) == 0 {
		t.Fatalf("no holder identity in the data directory: %q %v", first, err)
	}
	for round := range 3 {
		// Under load: the courier is exporting while the process dies.
		for i := range 30 {
			ids = append(ids, p.post(t, r.url, "round "+strconv.Itoa(round)+" event "+strconv.Itoa(i)))
		}
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		_ = r.cmd.Wait()
		r = startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
		ready := time.Now()
		ids = append(ids, p.post(t, r.url, "after restart "+strconv.Itoa(round)))
		waitLines(t, file, ids, 2*time.Second)
		t.Logf("round %d: every acknowledged record exported %v after the restarted relay answered (lease 15s)",
			round, time.Since(ready).Round(time.Millisecond))
	}
	if now, _ := os.ReadFile(filepath.Join(data, lease.IdentityFile)); string(now) != string(first) {
		t.Fatalf("holder identity changed across restarts: %q → %q", first, now)
	}
}
