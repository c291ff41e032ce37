package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/internal/dendritetest"
)

// TestServeListenerBindFailure runs the real binary with one listener's
// address taken: serve exits 1 at once, saying which flag, variable and
// address could not be bound (the appservice listener used to log and go
// on). The appservice case needs Dendrite (serve checks the as_token
// first); without it that case skips.
func TestServeListenerBindFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	cases := []struct {
		name   string
		args   func(t *testing.T) []string
		prefix string
	}{
		{"main", func(*testing.T) []string { return []string{"--addr", busy} }, "--addr (ACRELAY_ADDR) "},
		{"metrics", func(*testing.T) []string { return []string{"--metrics-addr", busy} }, "--metrics-addr (ACRELAY_METRICS_ADDR) "},
		{"pprof", func(*testing.T) []string { return []string{"--pprof-addr", busy} }, "--pprof-addr (ACRELAY_PPROF_ADDR) "},
		{"matrix appservice", func(t *testing.T) []string {
			if err := dendritetest.Available(dendritetest.BinDir()); err != nil {
				t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
			}
			reg, err := exec.Command(bin, "matrix", "registration", "--url", "http://"+busy, "--homeserver-name", "acrelay.test").Output()
			if err != nil {
				t.Fatalf("matrix registration: %v", err)
			}
			regPath := filepath.Join(t.TempDir(), "reg.yaml")
			if err := os.WriteFile(regPath, reg, 0o600); err != nil {
				t.Fatal(err)
			}
			hs := dendritetest.Start(t, dendritetest.Options{AppserviceYAML: string(reg)})
			return []string{"--matrix-homeserver", hs.URL, "--matrix-registration", regPath}
		}, "--matrix-appservice-addr (ACRELAY_MATRIX_APPSERVICE_ADDR) "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--data-dir", filepath.Join(t.TempDir(), "data"), "--addr", freeAddr(t)}, tc.args(t)...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), "ACRELAY_OPERATOR_TOKEN=bind-test-operator-token")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("serve with %s taken: %v, want exit status 1; stderr:\n%s", busy, err, stderr.String())
			}
			want := "acrelay: " + tc.prefix + busy + ": cannot listen: listen tcp " + busy + ": bind: address already in use\n"
			if !strings.HasSuffix(stderr.String(), want) {
				t.Errorf("stderr ends %q, want %q", tail(stderr.String()), want)
			}
		})
	}
}

func tail(s string) string {
	if i := strings.LastIndex(strings.TrimSuffix(s, "\n"), "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestFirstStartTokensSurviveBindFailure: a first start on an empty store
// whose address is taken exits 1 without spending the tokens that are
// shown once; the next start, on a free address, prints them (found by a
// hostile newcomer: the failed start had created the project and its
// token, and no later start printed any).
func TestFirstStartTokensSurviveBindFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	failed := exec.CommandContext(ctx, bin, "serve", "--data-dir", data, "--addr", taken.Addr().String())
	var out bytes.Buffer
	failed.Stdout, failed.Stderr = &out, &out
	var ee *exec.ExitError
	if err := failed.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve on a taken address: %v, want exit status 1:\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "project token:") {
		t.Fatalf("a start that could not listen printed the first start's tokens:\n%s", out.String())
	}

	addr := freeAddr(t)
	next := exec.CommandContext(ctx, bin, "serve", "--data-dir", data, "--addr", addr, "--log-level", "warn")
	stdout := &syncBuffer{}
	next.Stdout, next.Stderr = stdout, io.Discard
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Process.Kill(); _ = next.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stdout.String(), "operator token:") {
		if time.Now().After(deadline) {
			t.Fatalf("the next start printed no first-start tokens:\n%s", stdout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"first start — created a default project", "project_id:", "project token:"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the next start's output lacks %q:\n%s", want, stdout.String())
		}
	}
}
