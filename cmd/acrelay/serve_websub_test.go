package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebSubLeaseFlags: the hub's lease settings are checked (each at
// least 1s, min ≤ default ≤ max) before anything starts, from flags and
// from ACRELAY_WEBSUB_*.
func TestWebSubLeaseFlags(t *testing.T) {
	never := filepath.Join(t.TempDir(), "never")
	serve := []string{"serve", "--data-dir", never, "--addr", "127.0.0.1:0", "--log-level", "error"}
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		wantErr string
	}{
		{"min above default", nil, []string{"--websub-lease-min", "300h"}, "want min ≤ default ≤ max"},
		{"default above max", nil, []string{"--websub-lease-default", "241h"}, "want min ≤ default ≤ max"},
		{"zero", nil, []string{"--websub-lease-min", "0s"}, "--websub-lease-min (ACRELAY_WEBSUB_LEASE_MIN) 0s: want at least 1s"},
		{"env max below default", []string{"ACRELAY_WEBSUB_LEASE_MAX", "1h"}, nil, "want min ≤ default ≤ max"},
		{"env not a duration", []string{"ACRELAY_WEBSUB_LEASE_DEFAULT", "10"}, nil, "ACRELAY_WEBSUB_LEASE_DEFAULT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for _, n := range []string{"ACRELAY_WEBSUB_LEASE_MIN", "ACRELAY_WEBSUB_LEASE_DEFAULT", "ACRELAY_WEBSUB_LEASE_MAX"} {
				t.Setenv(n, "")
			}
			if tc.env != nil {
				t.Setenv(tc.env[0], tc.env[1])
			}
			root := newTestRoot(newServeCmd())
			root.SetArgs(append(append([]string{}, serve...), tc.args...))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if got := (serveConfig{WebSubAllowHosts: " 127.0.0.1, ,::1"}).webSubAllowHosts(); strings.Join(got, "|") != "127.0.0.1|::1" {
		t.Fatalf("allow hosts = %q", got)
	}
}
