package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// TestProjectVisibilityCommands: project create --public, then project
// visibility, read back from the store.
func TestProjectVisibilityCommands(t *testing.T) {
	data := servedStore(t)
	run := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		rootCmd.SetOut(&out)
		rootCmd.SetErr(io.Discard)
		rootCmd.SetArgs(append(args, "--data-dir", data, "--json"))
		err := rootCmd.Execute()
		return strings.TrimSpace(out.String()), err
	}
	visibility := func(pid string) string {
		t.Helper()
		st, err := openStore(context.Background(), storeConfig{DataDir: data, SQLiteSync: "fdatasync", SQLiteMaxBatch: 128}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		v, err := st.ProjectVisibility(context.Background(), pid)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const pid = "33333333-3333-4333-8333-333333333333"
	out, err := run("project", "create", "--public", "--project-id", pid)
	if err != nil || out != `{"project_id":"`+pid+`","visibility":"public"}` {
		t.Fatalf("create --public: %q, %v", out, err)
	}
	// rootCmd is shared and flags keep their values: reset for later tests.
	if c, _, err := rootCmd.Find([]string{"project", "create"}); err != nil || c.Flags().Set("public", "false") != nil {
		t.Fatalf("reset --public: %v", err)
	}
	if v := visibility(pid); v != store.VisibilityPublic {
		t.Fatalf("visibility %q", v)
	}
	out, err = run("project", "visibility", "--project", pid, "private")
	if err != nil || out != `{"project_id":"`+pid+`","visibility":"private"}` {
		t.Fatalf("visibility private: %q, %v", out, err)
	}
	if v := visibility(pid); v != store.VisibilityPrivate {
		t.Fatalf("visibility %q", v)
	}
	if _, err := run("project", "visibility", "--project-id", pid, "everyone"); err == nil {
		t.Fatal("an unknown visibility was accepted")
	}
	if _, err := run("project", "visibility", "--project-id", "44444444-4444-4444-8444-444444444444", "public"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown project: %v", err)
	}
}
