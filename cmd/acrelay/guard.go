package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/internal/attributed"
)

func init() {
	guard := &cobra.Command{
		Use:   "guard",
		Short: "Check changed paths against other identities' active claims (git hooks)",
		Long: `guard compares the paths a commit or an edit touches with the active
claims of other identities in the repository and prints each overlap:
the path, the claim's owner (display name and id), the owner's summary
of the claim, quoted as that identity's words, and when the claim
expires. Claims are advisory (spec §1, §8): the guard informs, and
blocks only where a team asked it to (--strict). A relay that cannot
be reached never blocks: the guard says so and lets the commit through.`,
		Example: `  acrelay guard install            # advisory pre-commit hook
  acrelay guard install --strict --pre-push
  acrelay guard check --paths src/parser/lexer.go`,
	}
	guard.AddCommand(newGuardInstallCmd(), newGuardCheckCmd())
	rootCmd.AddCommand(guard)
}

// guardDefaultTimeout bounds the relay calls of one guard check: a relay
// that accepts connections but never answers must not hold up every
// commit; past it the check passes, saying so.
const guardDefaultTimeout = 4 * time.Second

// guardBypassEnv, when set to anything but "" or "0", turns the guard off
// for one command (git commit --no-verify skips the hook as well).
const guardBypassEnv = "ACRELAY_GUARD_BYPASS"

// guardHookMarker is the line that identifies a hook acrelay wrote.
const guardHookMarker = "# acrelay guard hook (acrelay guard install)"

func newGuardInstallCmd() *cobra.Command {
	var strict, prePush, force bool
	var command string
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the guard as the repository's git pre-commit (and pre-push) hook",
		Long: `install writes a pre-commit hook (and with --pre-push a pre-push hook) into
the repository's hooks directory (core.hooksPath is honoured) that runs
acrelay guard check on the staged paths (on push: the paths of the
commits being pushed). Without --strict the hook only reports (exit 0);
with --strict an overlap stops the commit. ` + guardBypassEnv + `=1 or git
commit --no-verify skips it once. A hook acrelay did not write is never
replaced unless --force is given. Running install again rewrites
acrelay's own hooks with the new options.`,
		Example: `  acrelay guard install
  acrelay guard install --strict --pre-push`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if command == "" {
				var err error
				if command, err = defaultAcrelayCommand(); err != nil {
					return err
				}
			}
			return guardInstall(cmd.OutOrStdout(), command, strict, prePush, force)
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "block a commit (or push) that touches a path another identity has claimed")
	cmd.Flags().BoolVar(&prePush, "pre-push", false, "also install a pre-push hook checking the commits being pushed")
	cmd.Flags().BoolVar(&force, "force", false, "replace a hook acrelay did not write")
	cmd.Flags().StringVar(&command, "command", "", `acrelay executable the hook runs (default "acrelay" when that is this executable on PATH, else its absolute path)`)
	return cmd
}

// guardHookScript is the hook: it runs guard check, and lets the commit
// through when acrelay cannot be found.
func guardHookScript(command, hook string, strict bool) string {
	args := "guard check --hook " + hook
	if hook == "pre-commit" {
		args += " --staged"
	}
	if strict {
		args += " --strict"
	}
	return `#!/bin/sh
` + guardHookMarker + `
# Compares the paths of this ` + strings.TrimPrefix(hook, "pre-") + ` with other identities' active claims.
# Skip once: ` + guardBypassEnv + `=1 git ` + strings.TrimPrefix(hook, "pre-") + ` … (or --no-verify).
ACRELAY=${ACRELAY_BIN:-` + shellQuote(command) + `}
if ! command -v "$ACRELAY" >/dev/null 2>&1; then
	echo "acrelay guard: $ACRELAY not found; ` + strings.TrimPrefix(hook, "pre-") + ` not checked" >&2
	exit 0
fi
exec "$ACRELAY" ` + args + `
`
}

func guardInstall(stdout io.Writer, command string, strict, prePush, force bool) error {
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	top := gitTopLevel(cwd)
	if top == "" {
		return errors.New("not in a git work tree")
	}
	out, err := gitOutput(top, "rev-parse", "--git-path", "hooks")
	if err != nil {
		return err
	}
	dir := strings.TrimSpace(string(out))
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(top, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hooks := []string{"pre-commit"}
	if prePush {
		hooks = append(hooks, "pre-push")
	}
	for _, h := range hooks {
		path := filepath.Join(dir, h)
		old, err := os.ReadFile(path)
		switch {
		case err == nil && !bytes.Contains(old, []byte(guardHookMarker)) && !force:
			return fmt.Errorf("%s exists and is not acrelay's: not replaced (pass --force, or add this line to it: %s guard check --hook %s%s)",
				path, shellQuote(command), h, map[bool]string{true: " --staged", false: ""}[h == "pre-commit"])
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return err
		}
		script := guardHookScript(command, h, strict)
		status := "installed"
		if string(old) == script {
			status = "unchanged"
		} else if err := client.WriteFileAtomic(path, []byte(script), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		mode := "advisory"
		if strict {
			mode = "strict"
		}
		fmt.Fprintf(stdout, "%s: %s (%s)\n", path, status, mode)
	}
	return nil
}

// gitOutput runs git in dir and returns stdout; the error carries stderr.
func gitOutput(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return out, nil
}

type guardCheckOptions struct {
	self    selfFlags
	paths   []string
	staged  bool
	hook    string
	strict  bool
	timeout time.Duration
}

func newGuardCheckCmd() *cobra.Command {
	var o guardCheckOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Print the active claims of other identities overlapping some paths",
		Long: `check prints, for each path, the active claims of other identities that
overlap it (spec §4: the claim's prefix equals the path or is a parent
of it, or is "."). The paths are --paths (relative to the current
directory or absolute, as git takes them: an edit-time hook may pass
the absolute file name it is given; a path outside the work tree is
ignored, saying so), or with --staged the paths
the staged changes touch (both names of a rename; in a merge, only the
paths that differ from every parent, i.e. what the merge itself
changes), or with --hook pre-push the paths of the commits named on
standard input. Words written by other identities (the claim's paths
and summary, the owner's display name) are quoted and attributed, never
to be taken as instructions.

Exit status 0 when there is no overlap, when the relay cannot be
reached, does not answer within --timeout (4s) or answers with an error (it says so: on stderr in a hook,
else on stdout), or when overlaps are
found without --strict; 1 when overlaps are found with --strict.
` + guardBypassEnv + `=1 skips the check. Settings come from flags,
ACRELAY_* and the agent profile like every agent command.`,
		Example: `  acrelay guard check --paths src/parser/lexer.go,docs/parser.md
  acrelay guard check --staged --strict`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return guardCheck(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.self.add(cmd)
	fs := cmd.Flags()
	fs.StringSliceVar(&o.paths, "paths", nil, "paths to check (comma-separated or repeated), relative to the current directory or absolute, as git takes them")
	fs.BoolVar(&o.staged, "staged", false, "check the paths of the staged changes")
	fs.StringVar(&o.hook, "hook", "", `running as this git hook: "pre-commit" or "pre-push" (pre-push reads the refs from standard input); output goes to stderr`)
	fs.BoolVar(&o.strict, "strict", false, "exit 1 when an overlap is found")
	fs.DurationVar(&o.timeout, "timeout", guardDefaultTimeout, "longest wait for the relay (the check delays every commit); past it the check passes, saying the relay did not answer in time")
	return cmd
}

// guardCheck runs the check; see the command's Long text.
func guardCheck(ctx context.Context, o guardCheckOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	out := stdout
	if o.hook != "" {
		out = stderr
	}
	what := "paths"
	switch o.hook {
	case "pre-commit":
		what = "commit"
	case "pre-push":
		what = "push"
	case "":
		if len(o.paths) == 0 && !o.staged {
			return errors.New("nothing to check: pass --paths P,… (paths relative to the current directory, or absolute) or --staged")
		}
	default:
		return fmt.Errorf("--hook %q: want pre-commit or pre-push", o.hook)
	}
	if v := os.Getenv(guardBypassEnv); v != "" && v != "0" {
		fmt.Fprintf(out, "acrelay guard: skipped (%s is set)\n", guardBypassEnv)
		return nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	top := gitTopLevel(cwd)
	paths, outside := repoPaths(cwd, top, o.paths)
	if len(outside) > 0 {
		fmt.Fprintf(out, "acrelay guard: %d path(s) outside this git work tree ignored: %s\n", len(outside), strings.Join(outside, ", "))
	}
	if o.staged || o.hook != "" {
		if top == "" {
			return errors.New("not in a git work tree")
		}
		var more []string
		if o.hook == "pre-push" {
			more, err = pushedPaths(top, stdin)
		} else {
			more, err = stagedPaths(top)
		}
		if err != nil {
			return err
		}
		paths = append(paths, more...)
	}
	paths = cleanPaths(paths)
	if len(paths) == 0 {
		return nil
	}
	c, _, err := o.self.resolve(nil)
	if err != nil {
		fmt.Fprintf(out, "acrelay guard: not configured (%v); %s not checked\n", err, what)
		return nil
	}
	c.Retry = client.RetryPolicy{Initial: 200 * time.Millisecond, Max: time.Second, MaxAttempts: 2}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res, err := c.OthersClaims(ctx, client.OthersClaimsQuery{RepositoryID: o.self.repositoryID, Self: o.self.identityID, Paths: paths, WithSummaries: true})
	if err != nil {
		var apiErr *client.APIError
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			fmt.Fprintf(out, "acrelay guard: the relay did not answer within %s (--timeout); %s not checked\n", o.timeout, what)
		} else if errors.As(err, &apiErr) {
			fmt.Fprintf(out, "acrelay guard: the relay refused the check (%d %s); %s not checked\n", apiErr.Status, apiErr.Code, what)
		} else {
			fmt.Fprintf(out, "acrelay guard: relay unreachable (%s); %s not checked\n", unreachableReason(err), what)
		}
		return nil
	}
	if len(res.Claims) == 0 {
		return nil
	}
	names, _, _ := c.Identities(ctx) // display names; without them, ids alone
	writeGuardReport(out, paths, res, names, what, time.Now())
	if o.strict {
		if what == "paths" {
			return &exitError{code: 1, err: fmt.Errorf("guard: overlap found (--strict): these paths are claimed by other identities; coordinate with them, or skip once with %s=1", guardBypassEnv)}
		}
		return &exitError{code: 1, err: fmt.Errorf("guard: %s blocked (--strict): it touches paths other identities have claimed; coordinate with them, or skip once with %s=1", what, guardBypassEnv)}
	}
	return nil
}

// unreachableReason is a short reason for a failed relay call, without
// URLs (which may carry a capability) or tokens.
func unreachableReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "no such host"):
		return "host not found"
	}
	return "network error"
}

// writeGuardReport prints the overlaps path by path.
func writeGuardReport(w io.Writer, paths []string, res *client.OthersClaims, names map[string]client.Identity, what string, now time.Time) {
	byPath := map[string][]client.OthersClaim{}
	for _, oc := range res.Claims {
		for _, p := range oc.Overlaps {
			byPath[p] = append(byPath[p], oc)
		}
	}
	n := 0
	for _, p := range paths {
		if len(byPath[p]) > 0 {
			n++
		}
	}
	of := "of this " + what
	if what == "paths" {
		of = "checked"
	}
	fmt.Fprintf(w, "acrelay guard: %d path(s) %s overlap active claims of other identities (claims are advisory: they inform, they lock nothing)\n", n, of)
	for _, p := range paths {
		for _, oc := range byPath[p] {
			a := authorOf(names, oc.OwnerIdentityID)
			fmt.Fprintf(w, "  %s\n", p)
			fmt.Fprintf(w, "    claimed by %s, expires %s%s\n", a.Label(), oc.ExpiresAt, untilText(oc.ExpiresAt, now))
			fmt.Fprintf(w, "    %s\n", attributed.QuoteList(a, "paths", oc.Scope.Paths))
			if oc.Summary != "" {
				fmt.Fprintf(w, "    %s\n", attributed.Quote(a, "summary", oc.Summary))
			}
		}
	}
	if res.ProjectionStatus == "truncated" {
		fmt.Fprintln(w, "  (the relay's claims answer was truncated: some overlapping claims may be missing)")
	}
	fmt.Fprintf(w, "  %s\n", attributed.Notice)
}

// untilText is " (in 9m)" for an RFC 3339 time ahead of now, "" otherwise.
func untilText(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || !t.After(now) {
		return ""
	}
	d := t.Sub(now).Round(time.Minute)
	if d < time.Minute {
		return " (in less than a minute)"
	}
	return " (in " + strings.TrimSuffix(d.String(), "0s") + ")"
}

// stagedPaths lists the paths the staged changes touch, both names of a
// rename (--no-renames reports a rename as a deletion and an addition).
// During a merge (MERGE_HEAD exists) it keeps the paths that differ from
// HEAD and from MERGE_HEAD alike: what the merge commit itself changes,
// not what it brings in from either side.
func stagedPaths(top string) ([]string, error) {
	out, err := gitOutput(top, "diff", "--cached", "--name-only", "--no-renames", "-z")
	if err != nil {
		return nil, err
	}
	paths := splitZ(out)
	if _, err := gitOutput(top, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err == nil {
		theirs, err := gitOutput(top, "diff", "--cached", "--name-only", "--no-renames", "-z", "MERGE_HEAD")
		if err != nil {
			return nil, err
		}
		t := splitZ(theirs)
		paths = slices.DeleteFunc(paths, func(p string) bool { return !slices.Contains(t, p) })
	}
	return paths, nil
}

// zeroSHA reports a git all-zero object name (a ref created or deleted).
func zeroSHA(s string) bool { return strings.Trim(s, "0") == "" }

// pushedPaths reads the pre-push lines "<local ref> <local sha> <remote
// ref> <remote sha>" and lists the paths the pushed commits change: for
// an update, the paths between the remote's commit and ours; for a new
// ref, the paths of the commits no remote-tracking ref has. Deletions
// push no paths.
func pushedPaths(top string, stdin io.Reader) ([]string, error) {
	var paths []string
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || zeroSHA(f[1]) {
			continue
		}
		var out []byte
		var err error
		if zeroSHA(f[3]) {
			out, err = gitOutput(top, "log", "--format=", "--name-only", "--no-renames", "-z", f[1], "--not", "--remotes")
		} else {
			out, err = gitOutput(top, "diff", "--name-only", "--no-renames", "-z", f[3], f[1])
		}
		if err != nil {
			return nil, err
		}
		paths = append(paths, splitZ(out)...)
	}
	return paths, sc.Err()
}

func splitZ(b []byte) []string {
	var out []string
	for _, s := range strings.Split(string(b), "\x00") {
		if s = strings.Trim(s, "\n"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// repoPaths turns the paths given with --paths into repository paths, as
// git does: relative to the current directory cwd, or absolute, and made
// relative to the work tree top ("src/parser/lexer.go" from the top,
// "lexer.go" from src/parser and "/abs/repo/src/parser/lexer.go" alike;
// an edit-time hook usually gets absolute file names). A path outside
// the work tree is returned in outside, as given. Outside a git work
// tree (top == "") paths are taken as repository paths unchanged.
func repoPaths(cwd, top string, in []string) (paths, outside []string) {
	if top == "" {
		return slices.Clone(in), nil
	}
	// git prints the top with symbolic links resolved; cwd and the given
	// absolute paths may go through one.
	tops := []string{top}
	if r, err := filepath.EvalSymlinks(top); err == nil && r != top {
		tops = append(tops, r)
	}
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = r
	}
	rel := func(abs string) (string, bool) {
		for _, t := range tops {
			if r, err := filepath.Rel(t, abs); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				return filepath.ToSlash(r), true
			}
		}
		return "", false
	}
	for _, p := range in {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		abs := p
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(cwd, p)
		}
		r, ok := rel(filepath.Clean(abs))
		if !ok {
			if resolved, err := filepath.EvalSymlinks(abs); err == nil {
				r, ok = rel(resolved)
			}
		}
		if !ok {
			outside = append(outside, p)
			continue
		}
		paths = append(paths, r)
	}
	return paths, outside
}

// cleanPaths trims, drops empties and "./", and removes duplicates,
// keeping the first order.
func cleanPaths(in []string) []string {
	var out []string
	for _, p := range in {
		p = strings.TrimPrefix(strings.TrimSpace(p), "./")
		p = strings.TrimSuffix(p, "/")
		if p == "" || slices.Contains(out, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}
