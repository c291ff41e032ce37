package main

import (
	"encoding/json"
	"fmt"
	"io"

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
	cmd.AddCommand(newConformanceVectorsCmd())
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
failures. With --json it prints
{"groups":[{"name","passed","failed","errata"}],"failed"} on standard
output and the failure lines on standard error.

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
			} else if err := writeVectorReport(out, report); err != nil {
				return err
			}
			if n := report.Failed(); n > 0 {
				return &exitError{code: exitNonconforming, err: fmt.Errorf("%d vector checks failed", n)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"groups":[…],"failed":N} as JSON`)
	cmd.Flags().StringVar(&sharedDir, "shared-dir", "", "folder holding spec/agent-correspondence-0.1-vectors.json (default: "+shareddir.EnvVar+" or ../shared)")
	return cmd
}

// writeVectorReport prints the human form of a vector run: one line per
// group, the errata with explanations, notes, failures and a total.
func writeVectorReport(w io.Writer, r conformance.Report) error {
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
	ew.printf("\ntotal: %d passed, %d failed, %s\n", r.Passed(), r.Failed(), plural(len(r.Errata()), "erratum", "errata"))
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
