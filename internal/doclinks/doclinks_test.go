package doclinks

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the directory holding go.mod, two levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// markdownFiles lists the repository's .md files, skipping .git and
// testdata (test inputs may hold deliberately broken links).
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// inlineLink matches [text](target) and ![alt](target); the target ends at
// the first space or closing parenthesis (no titles are used here).
var inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// codeSpan matches `code`, whose brackets are not links.
var codeSpan = regexp.MustCompile("`[^`]*`")

type link struct {
	line   int
	target string
}

type doc struct {
	links   []link
	anchors map[string]bool
}

// parse reads a Markdown file's links and heading ids, outside fenced
// code blocks and code spans.
func parse(t *testing.T, path string) doc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if h, ok := heading(line); ok {
			id := slug(h)
			if k := seen[id]; k > 0 {
				d.anchors[id+"-"+strconv.Itoa(k)] = true
			} else {
				d.anchors[id] = true
			}
			seen[id]++
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			d.links = append(d.links, link{line: n, target: m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// heading returns the text of an ATX heading ("## Title").
func heading(line string) (string, bool) {
	i := 0
	for i < len(line) && line[i] == '#' {
		i++
	}
	if i == 0 || i > 6 || i == len(line) || line[i] != ' ' {
		return "", false
	}
	return strings.TrimSpace(line[i:]), true
}

// slug is GitHub's heading id: lower case, spaces to hyphens, and every
// character other than a letter, a digit, '-' or '_' dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Matrix: a project room that follows the log":           "matrix-a-project-room-that-follows-the-log",
		"WebSub (embedded hub and courier)":                     "websub-embedded-hub-and-courier",
		"The Go SDK in 20 lines":                                "the-go-sdk-in-20-lines",
		"1. Hash a predicate envelope and cite it in an event":  "1-hash-a-predicate-envelope-and-cite-it-in-an-event",
		"Create a contract, point a `handoff` event at it":      "create-a-contract-point-a-handoff-event-at-it",
		"Append throughput (durable SQLite ingest, 16 clients)": "append-throughput-durable-sqlite-ingest-16-clients",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestParseFindsBrokenLinks shows the check can fail: a file with a link
// to a missing file and to a missing anchor yields both.
func TestParseFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.md")
	body := "# A\n\n## Two words\n\n[ok](#two-words) [bad](#nope) [file](missing.md) `[code](x.md)`\n```\n[fenced](y.md)\n```\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	d := parse(t, p)
	var got []string
	for _, l := range d.links {
		got = append(got, l.target)
	}
	if strings.Join(got, " ") != "#two-words #nope missing.md" {
		t.Fatalf("links = %q", got)
	}
	problems := check(dir, p, d, map[string]doc{p: d})
	want := []string{`a.md:5: "#nope": no heading with id "nope" in a.md`, `a.md:5: "missing.md": no such file`}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

// check returns one line per broken link of the document at path.
func check(root, path string, d doc, docs map[string]doc) []string {
	rel := func(p string) string {
		r, err := filepath.Rel(root, p)
		if err != nil {
			return p
		}
		return r
	}
	var problems []string
	for _, l := range d.links {
		tgt := l.target
		if strings.Contains(tgt, "://") || strings.HasPrefix(tgt, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(tgt, "#")
		dest := path
		if file != "" {
			dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
			if _, err := os.Stat(dest); err != nil {
				problems = append(problems, rel(path)+":"+strconv.Itoa(l.line)+": "+strconv.Quote(tgt)+": no such file")
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(dest, ".md") {
			continue
		}
		target, ok := docs[dest]
		if !ok {
			continue
		}
		if !target.anchors[anchor] {
			problems = append(problems, rel(path)+":"+strconv.Itoa(l.line)+": "+strconv.Quote(tgt)+": no heading with id "+strconv.Quote(anchor)+" in "+rel(dest))
		}
	}
	return problems
}

// TestMarkdownLinksResolve checks every Markdown file of the repository.
func TestMarkdownLinksResolve(t *testing.T) {
	root := repoRoot(t)
	docs := map[string]doc{}
	files := markdownFiles(t, root)
	for _, p := range files {
		docs[p] = parse(t, p)
	}
	links := 0
	for _, p := range files {
		links += len(docs[p].links)
		for _, problem := range check(root, p, docs[p], docs) {
			t.Error(problem)
		}
	}
	// README.md links to the docs pages: finding none means the parser broke.
	if readme := docs[filepath.Join(root, "README.md")]; len(readme.links) < 10 {
		t.Errorf("README.md: %d links found, want at least 10", len(readme.links))
	}
	t.Logf("%d Markdown files, %d links", len(files), links)
}
