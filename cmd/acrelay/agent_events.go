package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newEventsCmd()) }

func newEventsCmd() *cobra.Command {
	var rf relayFlags
	var q client.EventsQuery
	var all bool
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Read records of a repository (text on a terminal, JSON lines when piped)",
		Long: `events reads GET /v1/correspondence/events and prints one record per line
in ascending received_seq: on a terminal (or with --format text) a line of
text — #received_seq, time, sender's display name, kind, [thread], summary;
piped (or with --format json) the record as JSON, {event, receipt,
missing_parents, lineage_status}.
Without --all it reads one page and prints the next cursor on stderr; with
--all it follows next_after until has_more is false. With --keyring every
record is verified (signature and event id) and a mismatch stops the read.`,
		Example: `  acrelay events --repository-id repo:example/app --all --keyring keys.json
  acrelay events --repository-id repo:example/app --thread-id task:parser --after 42 --limit 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.RepositoryID == "" {
				return fmt.Errorf("--repository-id is required")
			}
			c, err := rf.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			text, err := format.text(out)
			if err != nil {
				return err
			}
			names := &identityNames{c: c}
			write := func(r client.Record) error {
				if text {
					_, err := fmt.Fprintln(out, recordLine(cmd.Context(), names, r))
					return err
				}
				return writeJSONLine(out, r)
			}
			if all {
				for r, err := range c.Events(cmd.Context(), q) {
					if err != nil {
						return err
					}
					if err := write(r); err != nil {
						return err
					}
				}
				return nil
			}
			p, err := c.EventsPage(cmd.Context(), q)
			if err != nil {
				return err
			}
			for _, r := range p.Records {
				if err := write(r); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "next_after=%d has_more=%t\n", p.NextAfter, p.HasMore)
			return nil
		},
	}
	rf.add(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&q.RepositoryID, "repository-id", "", "repository id (required)")
	fs.StringVar(&q.ThreadID, "thread-id", "", "only this thread")
	fs.Int64Var(&q.After, "after", 0, "exclusive received_seq cursor")
	fs.IntVar(&q.Limit, "limit", 0, "page size 1–200 (default: the relay's, 100)")
	fs.BoolVar(&all, "all", false, "read every page")
	format.add(cmd)
	return cmd
}
