package ingest_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoHTTP: ingest chooses codes (Refusal), never HTTP statuses: neither
// it nor anything it imports brings in net/http (STYLE.md §3).
func TestNoHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "goolm", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 || !slices.Contains(deps, "github.com/acrelay/acrelay/store") {
		t.Fatalf("go list -deps gave %d packages: %q", len(deps), deps)
	}
	if slices.Contains(deps, "net/http") {
		t.Error("ingest depends on net/http")
	}
}
