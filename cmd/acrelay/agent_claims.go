package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newClaimsCmd(), newVoiceCmd()) }

func newClaimsCmd() *cobra.Command {
	var rf relayFlags
	var q client.ClaimsQuery
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "claims",
		Short: "Print the active claims of a repository",
		Long: `claims prints GET /v1/correspondence/claims: on a terminal (or with
--format text) one line per claim — owner's display name, claim id,
generation, paths, expiry, conflict; piped (or with --format json) the
answer as the relay served it, the active-claims projection (spec §8) with
evaluated_at, cursor, projection_status and claims. --path keeps the
claims overlapping a prefix.`,
		Example: `  acrelay claims --repository-id repo:example/app
  acrelay claims --repository-id repo:example/app --path src/parser`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.RepositoryID == "" {
				return fmt.Errorf("--repository-id is required")
			}
			text, err := format.text(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			c, err := rf.client(nil)
			if err != nil {
				return err
			}
			res, err := c.Claims(cmd.Context(), q)
			if err != nil {
				return err
			}
			if text {
				return writeClaimsText(cmd.Context(), cmd.OutOrStdout(), &identityNames{c: c}, q.RepositoryID, res, time.Now())
			}
			return writeRawLine(cmd.OutOrStdout(), trimNL(res.Raw))
		},
	}
	rf.add(cmd, false)
	cmd.Flags().StringVar(&q.RepositoryID, "repository-id", "", "repository id (required)")
	cmd.Flags().StringVar(&q.ThreadID, "thread-id", "", "only this thread")
	cmd.Flags().StringVar(&q.Path, "path", "", "only claims overlapping this path prefix")
	format.add(cmd)
	return cmd
}

func newVoiceCmd() *cobra.Command {
	var rf relayFlags
	var repo, thread string
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "voice",
		Short: "Print the coordination snapshot of a repository",
		Long: `voice prints GET /v1/correspondence/voice: the newest records, active claims
and conflicts (missing parents, session forks, overlapping claims). On a
terminal (or with --format text) as text, naming owners by display name
and conflicts by whose claim; piped (or with --format json) the answer as
the relay served it. With --keyring the recent events are verified first.`,
		Example: `  acrelay voice --repository-id repo:example/app --keyring keys.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				return fmt.Errorf("--repository-id is required")
			}
			text, err := format.text(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			c, err := rf.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			res, err := c.Voice(cmd.Context(), repo, thread)
			if err != nil {
				return err
			}
			if text {
				return writeVoiceText(cmd.Context(), cmd.OutOrStdout(), &identityNames{c: c}, repo, res, time.Now())
			}
			return writeRawLine(cmd.OutOrStdout(), trimNL(res.Raw))
		},
	}
	rf.add(cmd, true)
	cmd.Flags().StringVar(&repo, "repository-id", "", "repository id (required)")
	cmd.Flags().StringVar(&thread, "thread-id", "", "only this thread")
	format.add(cmd)
	return cmd
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
