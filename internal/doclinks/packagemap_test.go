package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmePackageMap: README.md's "Repository layout" table names every
// package of the module (what `go list ./...` lists) and nothing else, so
// the map a newcomer reads is the code's.
func TestReadmePackageMap(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := layoutPackages(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := modulePackages(t, root)
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s is not in README.md's Repository layout", p)
		}
	}
	for _, p := range listed {
		if !slices.Contains(pkgs, p) {
			t.Errorf("README.md's Repository layout names %s, which is not a package of the module", p)
		}
	}
}

// TestLayoutPackages: the names are the code spans of the table's first
// column, and a README without the section is an error.
func TestLayoutPackages(t *testing.T) {
	got, err := layoutPackages("# x\n\n## Repository layout\n\n| package | what |\n|---|---|\n" +
		"| `store`, `store/sqlite` | the `Store` interface |\n| `relay` | HTTP |\n\n## Dependencies\n\n| `pgx` | driver |\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"store", "store/sqlite", "relay"}; !slices.Equal(got, want) {
		t.Fatalf("layoutPackages = %q, want %q", got, want)
	}
	if _, err := layoutPackages("# x\n"); err == nil {
		t.Fatal("no Repository layout section: want an error")
	}
}

var layoutName = regexp.MustCompile("`([^`]+)`")

// layoutPackages returns the package paths (relative to the module) named
// in the first column of README's "## Repository layout" table.
func layoutPackages(readme string) ([]string, error) {
	_, section, ok := strings.Cut(readme, "\n## Repository layout\n")
	if !ok {
		return nil, os.ErrNotExist
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var out []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		for _, m := range layoutName.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, m[1])
		}
	}
	return out, nil
}

// modulePackages lists the module's package directories as `go list
// ./...` does: every directory holding a .go file, except testdata, names
// starting with . or _, and nested modules (deploy/kubernetes/validate).
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != root && err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
