package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/tlog"
)

// TestServeSequencer: `acrelay serve` integrates posted records into the
// project's tree and signs its checkpoint with the log key that
// `log-key show` prints; on PostgreSQL two processes share one key and one
// tree (one sequencer at a time), and verify-log finds the tree intact.
func TestServeSequencer(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			if testing.Short() {
				t.Skip("builds and runs the binary; skipped with -short")
			}
			var args []string
			procs := 1
			if engine == "postgres" {
				args, procs = postgresArgs(t), 2
			} else {
				args = []string{"--data-dir", t.TempDir()}
			}
			bin := acrelayBinary(t)
			const op = "tlog-operator-token"
			var relays []*relayProc
			for range procs {
				relays = append(relays, startRelay(t, bin, append(args, "--public-url", "https://relay.test/r"), "ACRELAY_OPERATOR_TOKEN="+op))
			}
			p := registerProject(t, relays[0].url, op)
			const n = 20
			for i := range n {
				p.post(t, relays[i%procs].url, fmt.Sprintf("event %d", i))
			}
			ctx := context.Background()
			st, err := openStore(ctx, storeConfig{DataDir: flagValue(args, "--data-dir"), DatabaseURL: flagValue(args, "--database-url"),
				SQLiteSync: "fdatasync", SQLiteMaxBatch: 128}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var head store.TreeHead
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if head, err = st.TreeHead(ctx, p.id); err != nil || head.Size == n {
					break
				}
			}
			if err != nil || head.Size != n {
				t.Fatalf("tree head %d, %v; want %d", head.Size, err, n)
			}
			show, err := exec.Command(bin, append([]string{"log-key", "show"}, args...)...).Output()
			if err != nil {
				t.Fatalf("log-key show: %v", err)
			}
			vkey := strings.TrimSpace(string(show))
			if !strings.HasPrefix(vkey, "relay.test/r+") {
				t.Fatalf("verifier key %q", vkey)
			}
			skey, err := st.LogKey(ctx, func() (string, error) { t.Fatal("no stored key"); return "", nil })
			if err != nil {
				t.Fatal(err)
			}
			key, err := tlog.OpenLogKey(skey)
			if err != nil || key.VerifierKey != vkey {
				t.Fatalf("stored key's verifier %q, shown %q (%v)", key.VerifierKey, vkey, err)
			}
			c, _, err := tlog.OpenCheckpoint(head.Checkpoint, key.Verifier, "relay.test/r/"+p.id)
			if err != nil || c.Size != n || c.Root != head.Root {
				t.Fatalf("checkpoint %+v, %v", c, err)
			}
			stdout, _, err := runAgent(t, newVerifyLogCmd(), "", args...)
			if err != nil || !strings.Contains(stdout, fmt.Sprintf("%d event(s) verified, %d tree leaf/leaves checked", n, n)) {
				t.Fatalf("verify-log: %v\n%s", err, stdout)
			}
		})
	}
}

// flagValue returns the value following name in args, "" without one.
func flagValue(args []string, name string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1]
		}
	}
	return ""
}
