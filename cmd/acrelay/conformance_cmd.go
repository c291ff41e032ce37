package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/conformance"
	"github.com/acrelay/acrelay/internal/shareddir"
)

func init() { rootCmd.AddCommand(newConformanceCmd()) }

// Exit statuses of the conformance commands.
const (
	exitNonconforming = 1 // at least one check failed
	exitSetup         = 2 // the run could not start (unreadable vector file, bad flags)
)

func newConformanceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Check this build against the protocol vectors, or a relay over HTTP",
	}
	cmd.AddCommand(newConformanceVectorsCmd(), newConformanceHTTPCmd())
	return cmd
}

func newConformanceVectorsCmd() *cobra.Command {
	var (
		asJSON    bool
		sharedDir string
	)
	cmd := &cobra.Command{
		Use:   "vectors",
		Short: "Run every vector group of seed 000, the public vector file and seed 001",
		Long: `Vectors runs the protocol vectors through this build's protocol core:
seed 000 and seed 001 (predicate envelopes) are embedded in the binary; the
public vector file spec/agent-correspondence-0.1-vectors.json is read from
the shared folder (--shared-dir, else ` + shareddir.EnvVar + `, else ../shared beside
the module) when one is found.

It prints one line per group, then the errata (seed 000's two damaged
entries, recognised by content, with what was checked instead), then any
failures, and a total line: "total: N passed, N failed, N errata", followed
by "; not run: …" naming what was skipped and how to run it (the public
vector file, when no shared folder was found). With --json it prints
{"groups":[{"name","passed","failed","errata"}],"failed","not_run"?} on
standard output and the failure lines on standard error.

Exit status: 0 when every check passes, 1 on any failure, 2 when a vector
file named by --shared-dir cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := sharedDir
			if dir == "" {
				// Absent shared folder: run the embedded seeds only, with a note.
				dir, _ = shareddir.Find()
			}
			report, err := conformance.RunVectors(dir)
			if err != nil {
				return &exitError{code: exitSetup, err: err}
			}
			return printReport(cmd, report, asJSON, "vector")
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"groups":[…],"failed":N} as JSON`)
	cmd.Flags().StringVar(&sharedDir, "shared-dir", "", "folder holding spec/agent-correspondence-0.1-vectors.json (default: "+shareddir.EnvVar+" or ../shared)")
	return cmd
}

// printReport prints a report as text or JSON and turns failures into
// exit status 1. what names the checks in the error ("vector", "HTTP").
func printReport(cmd *cobra.Command, report conformance.Report, asJSON bool, what string) error {
	out := cmd.OutOrStdout()
	if asJSON {
		b, err := json.Marshal(report)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
			return err
		}
		writeFailures(cmd.ErrOrStderr(), report)
	} else if err := writeReport(out, report); err != nil {
		return err
	}
	if n := report.Failed(); n > 0 {
		return &exitError{code: exitNonconforming, err: fmt.Errorf("%d %s checks failed", n, what)}
	}
	return nil
}

// writeReport prints the human form of a run: one line per group, the
// errata with explanations, notes, failures and a total.
func writeReport(w io.Writer, r conformance.Report) error {
	ew := &errWriter{w: w}
	for _, g := range r.Groups {
		ew.printf("%s: %d passed, %d failed, %s\n", g.Title(), g.Passed, g.Failed, plural(len(g.Errata), "erratum", "errata"))
	}
	if errata := r.Errata(); len(errata) > 0 {
		ew.printf("\nerrata:\n")
		for _, e := range errata {
			ew.printf("  %s %s: %s\n", e.Group, e.Entry, e.Explanation)
		}
	}
	for _, n := range r.Notes {
		ew.printf("\nnote: %s\n", n)
	}
	if r.Failed() > 0 {
		ew.printf("\nfailures:\n")
		writeFailures(ew, r)
	}
	// The total keeps its "N passed, N failed" prefix for scripts; what was
	// not run follows, so 88 passes are not mistaken for the whole suite.
	ew.printf("\ntotal: %d passed, %d failed, %s", r.Passed(), r.Failed(), plural(len(r.Errata()), "erratum", "errata"))
	if len(r.NotRun) > 0 {
		ew.printf("; not run: %s", strings.Join(r.NotRun, "; "))
	}
	ew.printf("\n")
	return ew.err
}

func writeFailures(w io.Writer, r conformance.Report) {
	for _, g := range r.Groups {
		for _, f := range g.Failures {
			fmt.Fprintf(w, "  %s: %s\n", g.Title(), f)
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// errWriter keeps the first write error so a report can be printed
// without checking every line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

func newConformanceHTTPCmd() *cobra.Command {
	var (
		asJSON                bool
		baseURL, tok, tokFile string
	)
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Check a running relay over HTTP, black-box",
		Long: `HTTP runs the black-box suite against a relay: given its URL and a project
token with the admin scope, it registers a fresh identity and Ed25519 key,
creates a read+append and a read-only token, posts every body_matrix kind in
a fresh repository, and checks retry semantics, refusal codes, replay and
paging, negotiation, Vary/Cache-Control/ETag/304/HEAD, Link and
Link-Template, a claim lineage through /claims and /voice; it ends by
deactivating the identity and revoking both tokens. It prints one line per
group like "conformance vectors" (--json: the same JSON shape).

The token comes from --token, --token-file, ` + envConformanceToken + ` or
` + envConformanceToken + `_FILE; it is never printed.

Exit status: 0 when every check passes, 1 on any failure, 2 without a URL
or token.`,
		Example: `  acrelay conformance http --url http://127.0.0.1:8080 --token-file admin.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if baseURL == "" {
				return &exitError{code: exitSetup, err: errors.New("--url is required")}
			}
			secret, err := secretFrom(tok, tokFile, envConformanceToken)
			if err != nil {
				return &exitError{code: exitSetup, err: err}
			}
			report := conformance.RunHTTP(cmd.Context(), baseURL, secret)
			return printReport(cmd, report, asJSON, "HTTP")
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"groups":[…],"failed":N} as JSON`)
	cmd.Flags().StringVar(&baseURL, "url", envOr("ACRELAY_CONFORMANCE_URL", ""), "relay base URL (env ACRELAY_CONFORMANCE_URL)")
	cmd.Flags().StringVar(&tok, "token", "", "project token with the admin scope (env "+envConformanceToken+")")
	cmd.Flags().StringVar(&tokFile, "token-file", "", "file holding the token (env "+envConformanceToken+"_FILE)")
	return cmd
}

const envConformanceToken = "ACRELAY_CONFORMANCE_TOKEN"

// secretFrom returns a secret from the flag, the flag's file, the
// environment variable env, or the file named by env_FILE, in that order.
func secretFrom(flagValue, flagFile, env string) (string, error) {
	file := flagFile
	switch {
	case flagValue != "":
		return flagValue, nil
	case file != "":
	case os.Getenv(env) != "":
		return os.Getenv(env), nil
	case os.Getenv(env+"_FILE") != "":
		file = os.Getenv(env + "_FILE")
	default:
		return "", errors.New("a token is required (--token, --token-file or " + env + ")")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errors.New("the token file is empty")
	}
	return s, nil
}
