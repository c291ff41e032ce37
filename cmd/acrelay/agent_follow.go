package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newFollowCmd()) }

func newFollowCmd() *cobra.Command {
	var rf relayFlags
	var q client.FollowQuery
	var cursorFile string
	var verifyLog bool
	var logKey string
	cmd := &cobra.Command{
		Use:   "follow",
		Short: "Follow a repository live, printing records as JSON lines",
		Long: `follow prints every record of a repository (or thread) as it arrives, one
JSON line each, until interrupted. It listens on the wake stream
(GET /v1/wake/voice, addressed to --identity-id, an active identity of the
project) and replays GET /events?after=<cursor> on each change, reconnecting
with Last-Event-ID after failures. Each record is printed once.

With --verify-log each record is checked against the project's
verifiable log before it is printed (its inclusion at a checkpoint signed
by the log key, each new checkpoint consistent with the one before); a
record that fails ends follow with exit status 1.

With --cursor-file the cursor is read at start and rewritten (atomically)
after each printed record, so a restarted follow resumes where it stopped.`,
		Example: `  acrelay follow --repository-id repo:example/app --identity-id 2222… \
    --cursor-file .acrelay-cursor --keyring keys.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.RepositoryID == "" || q.IdentityID == "" {
				return fmt.Errorf("--repository-id and --identity-id are required")
			}
			if cursorFile != "" && q.After == 0 {
				data, err := os.ReadFile(cursorFile)
				if err == nil {
					if q.After, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil || q.After < 0 {
						return fmt.Errorf("cursor file %s: not a received_seq", cursorFile)
					}
				} else if !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("cursor file: %w", err)
				}
			}
			c, err := rf.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var ic *client.InclusionChecker
			if verifyLog {
				if ic, err = inclusionChecker(ctx, c, logKey, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			for r, err := range c.Follow(ctx, q) {
				if err != nil {
					if ctx.Err() != nil {
						return nil // interrupted: a normal end
					}
					return err
				}
				if ic != nil {
					if err := ic.Check(ctx, r); err != nil {
						if ctx.Err() != nil {
							return nil
						}
						return &exitError{code: 1, err: fmt.Errorf("--verify-log: %w", err)}
					}
				}
				if err := writeJSONLine(cmd.OutOrStdout(), r); err != nil {
					return err
				}
				if cursorFile != "" {
					if err := client.WriteFileAtomic(cursorFile, []byte(strconv.FormatInt(r.Receipt.ReceivedSeq, 10)+"\n"), 0o600); err != nil {
						return fmt.Errorf("cursor file: %w", err)
					}
				}
			}
			return nil
		},
	}
	rf.add(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&q.RepositoryID, "repository-id", "", "repository id (required)")
	fs.StringVar(&q.ThreadID, "thread-id", "", "only this thread")
	fs.StringVar(&q.IdentityID, "identity-id", envOr("ACRELAY_IDENTITY_ID", ""), "active identity the wake stream is addressed to (env ACRELAY_IDENTITY_ID)")
	fs.Int64Var(&q.After, "after", 0, "start after this received_seq (overrides the cursor file)")
	fs.DurationVar(&q.PollInterval, "poll-interval", 10*time.Second, "replay pace when the relay has no wake stream")
	fs.StringVar(&cursorFile, "cursor-file", "", "file keeping the last printed received_seq")
	addVerifyLogFlags(cmd, &verifyLog, &logKey)
	return cmd
}
