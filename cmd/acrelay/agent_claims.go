package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newClaimsCmd(), newVoiceCmd()) }

func newClaimsCmd() *cobra.Command {
	var rf relayFlags
	var q client.ClaimsQuery
	cmd := &cobra.Command{
		Use:   "claims",
		Short: "Print the active claims of a repository",
		Long: `claims prints GET /v1/correspondence/claims as the relay served it: the
active-claims projection (spec §8) with evaluated_at, cursor,
projection_status and claims; --path keeps the claims overlapping a prefix.`,
		Example: `  acrelay claims --repository-id repo:example/app
  acrelay claims --repository-id repo:example/app --path src/parser`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.RepositoryID == "" {
				return fmt.Errorf("--repository-id is required")
			}
			c, err := rf.client(nil)
			if err != nil {
				return err
			}
			res, err := c.Claims(cmd.Context(), q)
			if err != nil {
				return err
			}
			return writeRawLine(cmd.OutOrStdout(), trimNL(res.Raw))
		},
	}
	rf.add(cmd, false)
	cmd.Flags().StringVar(&q.RepositoryID, "repository-id", "", "repository id (required)")
	cmd.Flags().StringVar(&q.ThreadID, "thread-id", "", "only this thread")
	cmd.Flags().StringVar(&q.Path, "path", "", "only claims overlapping this path prefix")
	return cmd
}

func newVoiceCmd() *cobra.Command {
	var rf relayFlags
	var repo, thread string
	cmd := &cobra.Command{
		Use:   "voice",
		Short: "Print the coordination snapshot of a repository",
		Long: `voice prints GET /v1/correspondence/voice as the relay served it: the newest
records, active claims and conflicts (missing parents, session forks,
overlapping claims). With --keyring the recent events are verified first.`,
		Example: `  acrelay voice --repository-id repo:example/app --keyring keys.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				return fmt.Errorf("--repository-id is required")
			}
			c, err := rf.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			res, err := c.Voice(cmd.Context(), repo, thread)
			if err != nil {
				return err
			}
			return writeRawLine(cmd.OutOrStdout(), trimNL(res.Raw))
		},
	}
	rf.add(cmd, true)
	cmd.Flags().StringVar(&repo, "repository-id", "", "repository id (required)")
	cmd.Flags().StringVar(&thread, "thread-id", "", "only this thread")
	return cmd
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
