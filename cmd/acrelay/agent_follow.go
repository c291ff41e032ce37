package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/wire"
)

func init() { rootCmd.AddCommand(newFollowCmd()) }

func newFollowCmd() *cobra.Command {
	var rf relayFlags
	var q client.FollowQuery
	var cursorFile string
	var verifyLog bool
	var logKey string
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "follow",
		Short: "Follow a repository live, printing each record as it arrives",
		Long: `follow prints every record of a repository (or thread) as it arrives, until
interrupted: one line of text each on a terminal (who, what kind, which
thread, its summary), one JSON line each ({event, receipt, …}) when the
output is piped or with --format json. While the relay is away it says
"reconnecting…" on stderr (a JSON line {"status":"reconnecting",…} on
stderr with --format json) and "reconnected" when it is back.

It listens on the wake stream (GET /v1/wake/voice, addressed to
--identity-id, an active identity of the project: an unknown one is an
error) and replays GET /events?after=<cursor> on each change, reconnecting
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
			text, err := format.text(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			names := &identityNames{c: c}
			stderr := cmd.ErrOrStderr()
			q.Reconnecting = func(err error, wait time.Duration) {
				if text {
					fmt.Fprintf(stderr, "acrelay: relay unreachable (%v); reconnecting… (next try in %s)\n", briefError(err), wait.Round(100*time.Millisecond))
					return
				}
				_ = writeJSONLine(stderr, map[string]any{"status": "reconnecting", "error": briefError(err).Error(), "retry_in_seconds": wait.Seconds()})
			}
			q.Connected = func() {
				if text {
					fmt.Fprintln(stderr, "acrelay: reconnected")
					return
				}
				_ = writeJSONLine(stderr, map[string]any{"status": "connected"})
			}
			for r, err := range c.Follow(ctx, q) {
				if err != nil {
					if ctx.Err() != nil {
						return nil // interrupted: a normal end
					}
					if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Code == wire.CodeIdentityNotFound {
						return &identityError{id: q.IdentityID, err: err}
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
				if text {
					if _, err := fmt.Fprintln(cmd.OutOrStdout(), recordLine(ctx, names, r)); err != nil {
						return err
					}
				} else if err := writeJSONLine(cmd.OutOrStdout(), r); err != nil {
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
	format.add(cmd)
	return cmd
}

// identityError is follow's answer to a 404 identity_not_found: the
// --identity-id the wake stream was addressed to is no identity of the
// token's project.
type identityError struct {
	id  string
	err error
}

func (e *identityError) Error() string {
	return "--identity-id " + e.id + " is no identity of this token's project: give the id of one of its active identities (acrelay demo prints two)"
}

func (e *identityError) Unwrap() error { return e.err }

// briefError is err without the request URL a *url.Error repeats (the
// wake stream's, long and the same every time).
func briefError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
