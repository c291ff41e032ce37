package doclinks

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/acrelay/acrelay"

// TestArchitectureLayers: docs/architecture.md's "Layers" drawing is the
// code's: every package of the module is on one row (or in the test
// helpers line), and every module import of a package's non-test files
// names a package on a lower row.
func TestArchitectureLayers(t *testing.T) {
	root := repoRoot(t)
	page, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, helpers, err := layers(string(page))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range modulePackages(t, root) {
		if _, ok := rows[p]; !ok && !slices.Contains(helpers, p) {
			t.Errorf("package %s is not drawn in docs/architecture.md's Layers", p)
		}
	}
	for p, row := range rows {
		imports, err := moduleImports(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		for _, imp := range imports {
			if slices.Contains(helpers, imp) {
				continue
			}
			irow, ok := rows[imp]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is not drawn", p, imp)
			case irow <= row:
				t.Errorf("%s (row %d) imports %s (row %d): imports must point to a lower row", p, row+1, imp, irow+1)
			}
		}
	}
}

// TestLayers: rows are numbered top down, the helpers line is apart, and
// a page without the drawing is an error.
func TestLayers(t *testing.T) {
	rows, helpers, err := layers("# A\n\n## Layers\n\ntext\n\n```\ncmd/x\nrelay  store/sqlite\nstore\ntest helpers: internal/pgtest  internal/teststore\n```\n\n```\nother\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"cmd/x": 0, "relay": 1, "store/sqlite": 1, "store": 2}
	if fmt.Sprint(rows) != fmt.Sprint(want) || !slices.Equal(helpers, []string{"internal/pgtest", "internal/teststore"}) {
		t.Fatalf("layers = %v %q, want %v and the two helpers", rows, helpers, want)
	}
	if _, _, err := layers("# A\n\n## Layers\n\nno drawing\n"); err == nil {
		t.Fatal("no drawing: want an error")
	}
}

// layers reads the first fenced block after "## Layers": one row of
// package paths per line, top down (row 0 first), and the line starting
// "test helpers:".
func layers(page string) (rows map[string]int, helpers []string, err error) {
	_, section, ok := strings.Cut(page, "\n## Layers\n")
	if !ok {
		return nil, nil, fmt.Errorf("no Layers section")
	}
	_, block, ok := strings.Cut(section, "\n```\n")
	if !ok {
		return nil, nil, fmt.Errorf("no drawing in the Layers section")
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		return nil, nil, fmt.Errorf("the Layers drawing is not closed")
	}
	rows = map[string]int{}
	n := 0
	for _, line := range strings.Split(block, "\n") {
		if rest, ok := strings.CutPrefix(line, "test helpers:"); ok {
			helpers = append(helpers, strings.Fields(rest)...)
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, p := range fields {
			rows[p] = n
		}
		n++
	}
	return rows, helpers, nil
}

// moduleImports lists the module packages that the non-test .go files of
// dir import (every build tag's files: a superset of any one build's).
func moduleImports(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, is := range f.Imports {
			path, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return nil, err
			}
			if rel, ok := strings.CutPrefix(path, modulePath+"/"); ok && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	return out, nil
}
