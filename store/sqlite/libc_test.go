package sqlite_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestLibcMatchesSQLite: the build selects exactly the modernc.org/libc
// that the selected modernc.org/sqlite requires. modernc's rule is that the
// two must match (sqlite is transpiled against one libc's ABI); a newer
// libc pulled in by another module, or by an upgrade of one without the
// other, breaks it silently. Fix go.mod until this passes.
func TestLibcMatchesSQLite(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to read the module graph")
	}
	selected := func(path string) string {
		t.Helper()
		out, err := exec.Command(goTool, "list", "-m", "-json", path).Output()
		if err != nil {
			t.Fatalf("go list -m %s: %v", path, err)
		}
		var m struct{ Version string }
		if err := json.Unmarshal(out, &m); err != nil || m.Version == "" {
			t.Fatalf("go list -m %s: %q (%v)", path, out, err)
		}
		return m.Version
	}
	sqliteVersion, libcVersion := selected("modernc.org/sqlite"), selected("modernc.org/libc")
	graph, err := exec.Command(goTool, "mod", "graph").Output()
	if err != nil {
		t.Fatalf("go mod graph: %v", err)
	}
	from := "modernc.org/sqlite@" + sqliteVersion
	var wanted string
	for line := range strings.Lines(string(graph)) {
		mod, req, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && mod == from && strings.HasPrefix(req, "modernc.org/libc@") {
			wanted = strings.TrimPrefix(req, "modernc.org/libc@")
		}
	}
	if wanted == "" {
		t.Fatalf("go mod graph: %s requires no modernc.org/libc", from)
	}
	if libcVersion != wanted {
		t.Errorf("modernc.org/libc %s is selected, but %s requires %s: set it in go.mod (and check `go mod graph | grep ' modernc.org/libc@'` for what raises it)",
			libcVersion, from, wanted)
	}
}
