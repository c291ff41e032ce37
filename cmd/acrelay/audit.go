package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/client"
)

// acrelay audit: check a project's verifiable log from the outside
// (spec/tlog.md §Auditing) with the client SDK's Log.Audit.
func newAuditCmd() *cobra.Command {
	var (
		rf        relayFlags
		projectID string
		stateFile string
		logKey    string
		feedCap   string
		all       bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Audit a project's verifiable log: checkpoint signature, consistency, every record read",
		Long: `audit reads a project's verifiable log (GET /v1/log/{project_id}/…, C2SP
tlog-tiles) and checks, in order:

  1. the checkpoint is signed by the relay's log key (--log-key, else the
     key pinned in --state, else the relay's /v1/log-key, trusted on first
     use and then pinned) and names the project's origin;
  2. the tree extends the last checkpoint kept in --state (a consistency
     proof from the relay's tiles): a relay that rewrote, dropped or
     reordered a record it had already logged fails here;
  3. every entry read — the entry bundles holding those added since the
     state's checkpoint, or all of them with --all (streamed bundle by
     bundle) — hashes to the tree's leaf, and each new one is the record
     with received_seq = index + 1 in the relay's canonical {event,
     receipt} form (with --keyring, its signature too).

On success the state file (when given) keeps the new checkpoint. On any
failure it prints what failed and exits 1, leaving the state unchanged; a
contradiction between two checkpoints prints both signed notes (split-view
evidence, checkable by anyone with the log key).

A public project needs no token; a private one needs a read token, or
--feed with a feed capability, which checks the checkpoint and its
consistency but reads no entry (bundles hold every repository's records,
a capability reads one; follow its feed with --verify-log instead).`,
		Example: `  acrelay audit --state audit.json   # ACRELAY_URL, ACRELAY_TOKEN; the token's project
  acrelay audit --feed 'https://relay.example/v1/feeds/acf_…atom?repository_id=…' --project 1111…1111
  acrelay audit --url https://relay.example --project 1111…1111 --state audit.json
  acrelay audit --url https://relay.example --project 1111…1111 --state audit.json --all \
    --log-key 'relay.example+1a2b3c4d+AbC…'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if feedCap != "" {
				capability, base, err := parseFeedArg(feedCap)
				if err != nil {
					return err
				}
				feedCap = capability
				if rf.url == "" {
					rf.url = base
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			c, err := rf.optionalTokenClient()
			if err != nil {
				return err
			}
			if projectID == "" {
				if c.Token == "" {
					return errors.New("--project is required without a token (with a project token it defaults to the token's project)")
				}
				who, err := c.Whoami(ctx)
				if err != nil {
					return fmt.Errorf("--project not given, and the token's project is unknown: %w", err)
				}
				if who.ProjectID == "" {
					return errors.New("--project is required with the operator token")
				}
				projectID = who.ProjectID
			}
			return runAudit(ctx, out, cmd.ErrOrStderr(), c, auditArgs{projectID, stateFile, logKey, feedCap, all})
		},
	}
	rf.add(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&projectID, "project", "", "project id (default: the project of the token)")
	fs.StringVar(&stateFile, "state", "", "file keeping the pinned log key and the last verified checkpoint")
	fs.StringVar(&logKey, "log-key", "", "the relay's log verifier key (name+hash+key); default: the one pinned in --state, else the relay's")
	fs.StringVar(&feedCap, "feed", "", "read through this feed capability instead of a token: the url POST /v1/feeds answered (its relay is then the default --url), or its acf_… segment")
	fs.BoolVar(&all, "all", false, "read and check every entry, not only those since the state's checkpoint")
	return cmd
}

func init() { rootCmd.AddCommand(newAuditCmd()) }

// parseFeedArg reads --feed: the whole capability URL that POST /v1/feeds
// answers (https://relay/v1/feeds/acf_….atom?repository_id=…, or its
// .json or a path under it), or only its acf_… segment. It returns the
// capability segment and, for a URL, the relay's base URL. Errors: a URL
// that is not under /v1/feeds/.
func parseFeedArg(arg string) (capability, base string, err error) {
	if !strings.Contains(arg, "/") {
		return strings.TrimSuffix(strings.TrimSuffix(arg, ".atom"), ".json"), "", nil
	}
	u, err := url.Parse(arg)
	if err != nil {
		return "", "", fmt.Errorf("--feed: not a URL (%v)", err)
	}
	const prefix = "/v1/feeds/"
	i := strings.Index(u.Path, prefix)
	if i < 0 {
		return "", "", errors.New("--feed: the URL is not a feed capability (/v1/feeds/acf_….atom)")
	}
	seg, _, _ := strings.Cut(u.Path[i+len(prefix):], "/")
	seg = strings.TrimSuffix(strings.TrimSuffix(seg, ".atom"), ".json")
	if seg == "" {
		return "", "", errors.New("--feed: the URL names no capability")
	}
	if u.Scheme != "" && u.Host != "" {
		base = u.Scheme + "://" + u.Host + u.Path[:i]
	}
	return seg, base, nil
}

type auditArgs struct {
	projectID, stateFile, logKey, feedCap string
	all                                   bool
}

// optionalTokenClient is client without requiring a token: public
// projects and feed capabilities are read without one.
func (f *relayFlags) optionalTokenClient() (*client.Client, error) {
	if err := f.applyProfile(); err != nil {
		return nil, err
	}
	if f.url == "" {
		return nil, errors.New("no relay URL: set --url or ACRELAY_URL")
	}
	tok, err := f.resolveToken()
	if err != nil && (f.token != "" || f.tokenFile != "" || os.Getenv("ACRELAY_TOKEN_FILE") != "") {
		return nil, err
	}
	c, err := client.New(f.url, tok)
	if err != nil {
		return nil, err
	}
	if f.keyring != "" {
		if c.Keys, err = client.LoadKeyring(f.keyring); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// auditFail is a failed check: printed as FAIL and exit status 1.
func auditFail(out io.Writer, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(out, "FAIL         %s\n", msg)
	return &exitError{code: 1, err: errors.New("audit: " + msg)}
}

func runAudit(ctx context.Context, out, stderr io.Writer, c *client.Client, a auditArgs) error {
	state := &client.AuditState{}
	if a.stateFile != "" {
		var err error
		if state, err = client.LoadAuditState(a.stateFile); err != nil {
			return err
		}
	}
	key := a.logKey
	switch {
	case key != "" && state.LogKey != "" && key != state.LogKey:
		return auditFail(out, "--log-key %s is not the key pinned in %s (%s)", key, a.stateFile, state.LogKey)
	case key == "":
		key = state.LogKey
	}
	if key == "" {
		k, err := c.LogKey(ctx)
		if err != nil {
			return fmt.Errorf("read the relay's log key: %w", err)
		}
		key = k
		fmt.Fprintf(stderr, "acrelay: note: trusting the relay's log key on first use: %s (pin it with --log-key or --state)\n", key)
	}
	v, err := note.NewVerifier(key)
	if err != nil {
		return fmt.Errorf("log key: %w", err)
	}
	var l *client.Log
	if a.feedCap != "" {
		l = c.FeedLog(a.feedCap, a.projectID, v)
	} else {
		l = c.Log(a.projectID, v)
	}
	l.Origin = state.Origin
	var prev *client.Checkpoint
	if state.Checkpoint != "" {
		if prev, err = client.ParseCheckpoint([]byte(state.Checkpoint), v); err != nil {
			return auditFail(out, "the checkpoint kept in %s: %v", a.stateFile, err)
		}
	}
	fmt.Fprintf(out, "log key      %s\n", key)
	rep, err := l.Audit(ctx, prev, client.AuditOptions{All: a.all, NoEntries: a.feedCap != ""})
	if cp := rep.Checkpoint; cp != nil {
		fmt.Fprintf(out, "origin       %s\n", cp.Origin)
		fmt.Fprintf(out, "checkpoint   size %d, root %s: signature verified\n", cp.Size, base64.StdEncoding.EncodeToString(cp.Root[:]))
	}
	var sv *client.SplitView
	switch {
	case err == nil:
	case errors.As(err, &sv):
		ev, _ := json.MarshalIndent(sv, "", "  ")
		fmt.Fprintf(out, "evidence     %s\n", ev)
		return auditFail(out, "%v", err)
	case rep.Checkpoint == nil:
		return auditFail(out, "%v", err)
	}
	if prev != nil {
		if rep.Consistent && prev.Size == rep.Checkpoint.Size {
			fmt.Fprintf(out, "consistency  size %d unchanged, same root\n", prev.Size)
		} else if rep.Consistent {
			fmt.Fprintf(out, "consistency  size %d → %d: proved\n", prev.Size, rep.Checkpoint.Size)
		} else if err != nil {
			return auditFail(out, "consistency from size %d: %v", prev.Size, err)
		}
	} else {
		fmt.Fprintf(out, "consistency  first audit: no earlier checkpoint\n")
	}
	if err != nil {
		fmt.Fprintf(out, "entries      %d of received_seq %d..%d checked before the failure\n", rep.Checked, rep.From+1, rep.To)
		return auditFail(out, "%v", err)
	}
	if a.feedCap != "" {
		fmt.Fprintf(out, "entries      not read: entry bundles hold every repository, a feed capability reads one\n")
	} else if rep.To > rep.From {
		fmt.Fprintf(out, "entries      received_seq %d..%d: %d checked (leaf hash, canonical record, received_seq)\n", rep.From+1, rep.To, rep.Checked)
	} else {
		fmt.Fprintf(out, "entries      none new\n")
	}
	if a.stateFile != "" {
		entries := state.Entries
		if a.feedCap == "" && (a.all || prev == nil || state.Entries >= prev.Size) {
			entries = rep.Checkpoint.Size
		}
		ns := client.AuditState{Origin: rep.Checkpoint.Origin, LogKey: key, Checkpoint: string(rep.Checkpoint.Note),
			Entries: entries, CheckedAt: time.Now().UTC().Format(time.RFC3339)}
		if err := ns.Save(a.stateFile); err != nil {
			return fmt.Errorf("save the audit state: %w", err)
		}
	}
	fmt.Fprintf(out, "OK\n")
	return nil
}
