package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newPostCmd()) }

// postLine is what post prints per event: the receipt and diagnostics,
// never the body.
type postLine struct {
	Created        bool              `json:"created"`
	EventID        string            `json:"event_id"`
	Receipt        map[string]string `json:"receipt"`
	MissingParents []string          `json:"missing_parents"`
	LineageStatus  string            `json:"lineage_status"`
	Warnings       []client.Warning  `json:"warnings"`
}

func newPostCmd() *cobra.Command {
	var rf relayFlags
	cmd := &cobra.Command{
		Use:   "post [FILE]",
		Short: "Post signed events to the relay",
		Long: `post reads one or more signed events (JSON values, e.g. one per line) from FILE
or stdin and posts each to POST /v1/correspondence/events, unchanged. A 503
or a network failure is retried with the same bytes (capped exponential
backoff with jitter); an event already stored answers 200 with its original
receipt, which counts as success. For each event it prints one JSON line:
{"created", "event_id", "receipt", "missing_parents", "lineage_status", "warnings"}.
A refusal prints the relay's error code, message and hint and stops.`,
		Example: `  acrelay sign --key agent.pem --kind progress --summary "Tests green" ... | acrelay post
  ACRELAY_URL=http://127.0.0.1:8080 ACRELAY_TOKEN=... acrelay post events.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := rf.client(nil)
			if err != nil {
				return err
			}
			name := "-"
			if len(args) == 1 {
				name = args[0]
			}
			data, err := readInput(name, cmd.InOrStdin())
			if err != nil {
				return err
			}
			dec := json.NewDecoder(bytes.NewReader(data))
			n := 0
			for {
				var raw json.RawMessage
				if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					return fmt.Errorf("event %d: not JSON: %w", n+1, err)
				}
				n++
				res, err := c.PostBytes(cmd.Context(), raw)
				if err != nil {
					return fmt.Errorf("event %d: %w", n, err)
				}
				r := res.Record
				line := postLine{Created: res.Created, EventID: r.Event.ID,
					Receipt:        map[string]string{"received_seq": strconv.FormatInt(r.Receipt.ReceivedSeq, 10), "received_at": r.Receipt.ReceivedAt},
					MissingParents: r.MissingParents, LineageStatus: string(r.LineageStatus), Warnings: res.Warnings}
				if line.MissingParents == nil {
					line.MissingParents = []string{}
				}
				if line.Warnings == nil {
					line.Warnings = []client.Warning{}
				}
				if err := writeJSONLine(cmd.OutOrStdout(), line); err != nil {
					return err
				}
			}
			if n == 0 {
				return errors.New("no event on input")
			}
			return nil
		},
	}
	rf.add(cmd, false)
	return cmd
}
