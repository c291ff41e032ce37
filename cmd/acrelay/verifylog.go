package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// acrelay verify-log: re-verify the stored log (spec §6, §7) without
// trusting the store's bookkeeping: every event's bytes are canonical,
// parse, carry the row's project and event id, hash to that id and verify
// under the stored key of their sender; received_seq runs 1..N without a
// gap in each project; and each project's verifiable-log tree, as far as
// it is integrated, holds exactly those records (verifylog_tree.go).
func newVerifyLogCmd() *cobra.Command {
	var sc storeConfig
	var projectID string
	cmd := &cobra.Command{
		Use:   "verify-log",
		Short: "Re-verify every stored event's signature and event id, received_seq order, and the verifiable-log tree against the records",
		Example: `  acrelay verify-log
  acrelay verify-log --project 11111111-1111-4111-8111-111111111111`,
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
			events, leaves, problems, err := verifyLog(ctx, st, projectID, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if problems > 0 {
				return &exitError{code: 1, err: fmt.Errorf("verify-log: %d problem(s) in %d event(s)", problems, events)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "acrelay: verify-log: %d event(s) verified, %d tree leaf/leaves checked against them, no problem\n", events, leaves)
			return nil
		},
	}
	addStoreFlags(cmd, &sc)
	cmd.Flags().StringVar(&projectID, "project", "", "verify only this project (default: every project)")
	return cmd
}

func init() { rootCmd.AddCommand(newVerifyLogCmd()) }

// verifyPage is how many records verifyLog reads at once.
const verifyPage = 500

// verifyLog checks the log of projectID ("" for every project), writing
// one line per problem to w; it returns the events read and the problems
// found. Its error is the store's (nothing was judged then).
func verifyLog(ctx context.Context, st store.Store, projectID string, w io.Writer) (events, leaves, problems int, err error) {
	report := func(pid string, seq int64, format string, args ...any) {
		problems++
		fmt.Fprintf(w, "project %s received_seq %d: %s\n", pid, seq, fmt.Sprintf(format, args...))
	}
	key, err := verifyLogKey(ctx, st)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("log key: %w", err)
	}
	projects := []string{projectID}
	if projectID == "" {
		projects = nil
		for after := ""; ; {
			page, err := st.ProjectIDs(ctx, after, verifyPage)
			if err != nil {
				return events, leaves, problems, fmt.Errorf("list projects: %w", err)
			}
			projects = append(projects, page...)
			if len(page) < verifyPage {
				break
			}
			after = page[len(page)-1]
		}
	} else if _, err := st.GetProject(ctx, projectID); err != nil {
		return 0, 0, 0, fmt.Errorf("--project %s: %w", projectID, err)
	}
	keys := map[string]store.SigningKey{} // project\x00signing_key_id
	for _, pid := range projects {
		head, err := st.TreeHead(ctx, pid)
		if err != nil {
			return events, leaves, problems, fmt.Errorf("project %s: tree head: %w", pid, err)
		}
		tc := &treeCheck{ctx: ctx, st: st, pid: pid, key: key, head: head,
			report: func(seq int64, format string, args ...any) { report(pid, seq, format, args...) },
			tree: func(format string, args ...any) {
				problems++
				fmt.Fprintf(w, "project %s tree of %d leaves: %s\n", pid, head.Size, fmt.Sprintf(format, args...))
			}}
		var seq int64 // the last received_seq seen
		for {
			recs, err := st.RecordsAfter(ctx, pid, seq, verifyPage)
			if err != nil {
				return events, leaves, problems, fmt.Errorf("project %s: records after %d: %w", pid, seq, err)
			}
			for _, rec := range recs {
				events++
				tc.add(rec)
				if rec.ReceivedSeq != seq+1 {
					report(pid, rec.ReceivedSeq, "received_seq follows %d: want %d (a gap or a repeat)", seq, seq+1)
				}
				seq = rec.ReceivedSeq
				for _, p := range verifyRecord(ctx, st, rec, keys) {
					report(pid, rec.ReceivedSeq, "event %s: %s", rec.EventID, p)
				}
			}
			if len(recs) < verifyPage {
				break
			}
		}
		if head.Size > 0 {
			tc.finish()
			leaves += int(head.Size)
		}
	}
	return events, leaves, problems, nil
}

// verifyRecord returns what is wrong with one stored record, nothing when
// it verifies.
func verifyRecord(ctx context.Context, st store.Store, rec store.Record, keys map[string]store.SigningKey) []string {
	ev, err := correspondence.ParseEvent(rec.Event)
	if err != nil {
		return []string{fmt.Sprintf("stored bytes do not parse as an event: %v", err)}
	}
	var out []string
	if c, err := ev.CanonicalJSON(); err != nil || !bytes.Equal(c, rec.Event) {
		out = append(out, "stored bytes are not the event's canonical JSON")
	}
	if ev.ProjectID != rec.ProjectID {
		out = append(out, fmt.Sprintf("project_id %s in the event differs from the row's", ev.ProjectID))
	}
	if ev.ID != rec.EventID {
		out = append(out, fmt.Sprintf("event_id %s in the event differs from the row's", ev.ID))
	}
	if signed, err := ev.SignedJCS(); err != nil || correspondence.EventIDOf(signed) != ev.ID {
		out = append(out, "event_id does not match the signed event")
	}
	id := rec.ProjectID + "\x00" + ev.Sender.SigningKeyID
	k, ok := keys[id]
	if !ok {
		k, err = st.GetKey(ctx, rec.ProjectID, ev.Sender.SigningKeyID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return append(out, fmt.Sprintf("signing key %s is not stored", ev.Sender.SigningKeyID))
		case err != nil:
			return append(out, fmt.Sprintf("signing key %s unreadable: %v", ev.Sender.SigningKeyID, err))
		}
		keys[id] = k
	}
	if k.IdentityID != ev.Sender.IdentityID {
		out = append(out, fmt.Sprintf("signing key %s belongs to identity %s, not the sender %s", k.ID, k.IdentityID, ev.Sender.IdentityID))
	}
	pub, err := correspondence.DecodePublicKey(k.PublicKey)
	if err != nil {
		return append(out, fmt.Sprintf("signing key %s: stored public key does not decode", k.ID))
	}
	// A revoked key still verifies what it signed before its revocation.
	switch err := ev.Verify(pub); {
	case errors.Is(err, correspondence.ErrEventIDMismatch):
		// reported above
	case err != nil:
		out = append(out, fmt.Sprintf("signature does not verify under signing key %s: %v", k.ID, err))
	}
	return out
}
