package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/logwitness"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/tlog"
)

// Submitting the projects' checkpoints to external C2SP witnesses
// (issue 34, package logwitness): serve's flags, and the submitter run
// under a relay-wide lease.

// logWitnessLease is the relay-wide lease (lease.Single) under which one
// process at a time submits checkpoints to the witnesses.
const logWitnessLease = "tlog-witness-submitter"

// logWitnessConfig is serve's witness settings.
type logWitnessConfig struct {
	Witnesses []string // "<vkey> <url>", repeatable
	Projects  string
	Interval  time.Duration
	// WitnessLogs: "<origin> <vkey>" of each log this relay witnesses
	// (POST /v1/witness/add-checkpoint).
	WitnessLogs []string
}

func addLogWitnessFlags(cmd *cobra.Command, fs *pflag.FlagSet, c *logWitnessConfig) {
	fs.StringArrayVar(&c.Witnesses, "log-witness", nil, "submit the projects' checkpoints to this C2SP tlog-witness: \"<vkey> <url>\", its cosignature/v1 verifier key as litewitness prints it, a space, and its submission prefix (/add-checkpoint is appended); repeatable, a list in --config (ACRELAY_LOG_WITNESS: one)")
	bindEnv(cmd, "log-witness", "ACRELAY_LOG_WITNESS")
	fs.StringVar(&c.Projects, "log-witness-projects", logwitness.ScopePublic, "which projects' checkpoints go to the witnesses: public, all (a private project's checkpoint tells the witness its size and activity), or comma-separated project ids (ACRELAY_LOG_WITNESS_PROJECTS)")
	bindEnv(cmd, "log-witness-projects", "ACRELAY_LOG_WITNESS_PROJECTS")
	fs.DurationVar(&c.Interval, "log-witness-interval", logwitness.DefaultInterval, "the shortest time between two submissions of one project's checkpoints to one witness: a busy log costs 3600/interval requests per hour per witness (mind a public witness's quota), a quiet log's latest checkpoint is submitted within it (ACRELAY_LOG_WITNESS_INTERVAL)")
	bindEnv(cmd, "log-witness-interval", "ACRELAY_LOG_WITNESS_INTERVAL")
	fs.StringArrayVar(&c.WitnessLogs, "witness-log", nil, "witness this C2SP log (POST /v1/witness/add-checkpoint): \"<origin> <vkey>\", the log's checkpoint origin, a space, and a note verifier key it signs with; repeatable (one line per key of a log), a list in --config (ACRELAY_WITNESS_LOG: one)")
	bindEnv(cmd, "witness-log", "ACRELAY_WITNESS_LOG")
}

// witnessLogs parses --witness-log: origin → the verifiers of its keys.
func (c logWitnessConfig) witnessLogs() (map[string][]note.Verifier, error) {
	out := map[string][]note.Verifier{}
	for _, v := range c.WitnessLogs {
		origin, vkey, ok := strings.Cut(strings.TrimSpace(v), " ")
		vkey = strings.TrimSpace(vkey)
		if !ok || origin == "" || vkey == "" || strings.ContainsAny(vkey, " \t") {
			return nil, fmt.Errorf("--witness-log (ACRELAY_WITNESS_LOG): want \"<origin> <vkey>\"")
		}
		lv, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("--witness-log (ACRELAY_WITNESS_LOG) for origin %q: the key: %w", origin, err)
		}
		out[origin] = append(out[origin], lv)
	}
	return out, nil
}

// witnesses parses --log-witness.
func (c logWitnessConfig) witnesses() ([]logwitness.Witness, error) {
	var out []logwitness.Witness
	seen := map[string]bool{}
	for _, v := range c.Witnesses {
		if strings.TrimSpace(v) == "" {
			continue
		}
		w, err := logwitness.ParseWitness(v)
		if err != nil {
			return nil, fmt.Errorf("--log-witness (ACRELAY_LOG_WITNESS): %w", err)
		}
		if seen[w.Name] {
			return nil, fmt.Errorf("--log-witness (ACRELAY_LOG_WITNESS): witness %q named twice", w.Name)
		}
		seen[w.Name] = true
		out = append(out, w)
	}
	if c.Interval < time.Second {
		return nil, fmt.Errorf("--log-witness-interval (ACRELAY_LOG_WITNESS_INTERVAL) %s: want at least 1s", c.Interval)
	}
	switch p := strings.TrimSpace(c.Projects); p {
	case logwitness.ScopePublic, logwitness.ScopeAll:
	case "":
		return nil, fmt.Errorf("--log-witness-projects (ACRELAY_LOG_WITNESS_PROJECTS): empty; want public, all or project ids")
	}
	return out, nil
}

// logWitnessStore is what the submitter and its lease use.
type logWitnessStore interface {
	logwitness.Store
	lease.Store
}

// runLogWitnesses keeps the relay-wide lease logWitnessLease until ctx
// ends and, while this process holds it, submits checkpoints.
func runLogWitnesses(ctx context.Context, st logWitnessStore, c logWitnessConfig, ws []logwitness.Witness, key tlog.LogKey,
	holder *lease.Identity, ttl time.Duration, reg prometheus.Registerer, logger *slog.Logger) {
	m := logwitness.NewMetrics(st, ws)
	reg.MustRegister(m)
	if len(ws) == 0 {
		return
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name
	}
	logger.Info("log witnesses", "witnesses", strings.Join(names, ","), "projects", c.Projects, "interval", c.Interval)
	sub := logwitness.New(st, logwitness.Options{Witnesses: ws, LogVerifier: key.Verifier, Scope: c.Projects, Interval: c.Interval,
		Logger: logger, OnSubmit: m.Observe})
	job := lease.NewSingle(st, lease.Options{Name: logWitnessLease, Holder: holder, TTL: ttl, Logger: logger})
	job.RunDo(ctx, sub.Run)
}

// witnessNames are the witnesses' key names (relay.Config.LogWitnessNames).
func witnessNames(ws []logwitness.Witness) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Name
	}
	return out
}

// newLogCmd is `acrelay log`: the verifiable log's operator views.
func newLogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log",
		Short: "The verifiable log's operator views (its witnesses)",
	}
	var sc storeConfig
	var project string
	ws := &cobra.Command{
		Use:   "witnesses",
		Short: "Per project and external witness (--log-witness): the last cosigned size and time, the size the witness is known to hold, the last error",
		Example: `  acrelay log witnesses
  acrelay log witnesses --project 4b0f… --database-url postgres://acrelay@db/acrelay`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			st, err := openStore(ctx, sc, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer st.Close()
			states, err := st.LogWitnessStates(ctx, project)
			if err != nil {
				return err
			}
			views, err := st.SplitViews(ctx, project)
			if err != nil {
				return err
			}
			return printLogWitnesses(cmd.OutOrStdout(), states, views)
		},
	}
	addStoreFlags(ws, &sc)
	ws.Flags().StringVar(&project, "project", "", "only this project")
	cmd.AddCommand(ws)
	return cmd
}

// printLogWitnesses writes one line per project and witness, then the
// split-view evidence external witnesses left.
func printLogWitnesses(w io.Writer, states []store.LogWitnessState, views []store.SplitView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tWITNESS\tCOSIGNED\tCOSIGNED_AT\tKNOWN\tLAST_ERROR")
	for _, s := range states {
		name, _, _ := strings.Cut(s.Witness, "+")
		at, lastErr := "-", "-"
		if !s.CosignedAt.IsZero() {
			at = s.CosignedAt.UTC().Format(time.RFC3339)
		}
		if s.LastError != "" {
			lastErr = s.ErrorAt.UTC().Format(time.RFC3339) + " " + s.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", s.ProjectID, name, s.CosignedSize, at, s.KnownSize, lastErr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range views {
		if name, ok := strings.CutPrefix(v.PeerID, store.LogWitnessPeerPrefix); ok {
			fmt.Fprintf(w, "SPLIT VIEW: witness %s refused project %s's checkpoint as inconsistent at %s (evidence %d: the request sent and the witness's answer are kept in the store)\n",
				name, v.ProjectID, v.DetectedAt.UTC().Format(time.RFC3339), v.ID)
		}
	}
	return nil
}

func init() { rootCmd.AddCommand(newLogCmd()) }
