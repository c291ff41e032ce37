package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/envelope"
)

func init() { rootCmd.AddCommand(newEnvelopeCmd()) }

// Exit statuses of the document commands (envelope hash, handoff validate).
const (
	exitRefused = 1 // the document was read and refused
	exitInput   = 2 // the document could not be read
)

// maxDocumentBytes bounds what the document commands read from a file or
// standard input.
const maxDocumentBytes = 16 << 20

func newEnvelopeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Predicate envelopes v1: canonical form and hash",
	}
	cmd.AddCommand(newEnvelopeHashCmd())
	return cmd
}

func newEnvelopeHashCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hash FILE|-",
		Short: "Print a predicate envelope's hash and canonical bytes",
		Long: `Hash checks a predicate envelope v1 (camelCase JSON, strict profile) and
prints its SHA-256 as uppercase hex on the first line and its canonical
RFC 8785 bytes on the second (spec/predicate-envelope-1.md).

With --json it prints one JSON object {"canonical","digest","hash"}, where
digest is "sha256:<lowercase hash>" as cited in an artifact.offer.

A refused envelope exits with status 1 and its reason code (for example
unregistered_predicate or fractional_number); an unreadable file exits 2.`,
		Example: `  acrelay envelope hash renew.json
  cat renew.json | acrelay envelope hash --json -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readDocument(cmd, args[0])
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			canonical, hash, err := envelope.Canonicalize(raw)
			if err != nil {
				return &exitError{code: exitRefused, err: describeRefusal(err)}
			}
			out := cmd.OutOrStdout()
			if !asJSON {
				_, err = fmt.Fprintf(out, "%s\n%s\n", hash, canonical)
				return err
			}
			body, err := canonicaljson.Canonical(canonicaljson.ObjectValue(
				canonicaljson.Member{Name: "canonical", Value: canonicaljson.StringValue(string(canonical))},
				canonicaljson.Member{Name: "digest", Value: canonicaljson.StringValue(envelope.Digest(hash))},
				canonicaljson.Member{Name: "hash", Value: canonicaljson.StringValue(hash)},
			))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s\n", body)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"canonical","digest","hash"} as JSON`)
	return cmd
}

// readDocument reads the named file, or standard input when name is "-",
// up to maxDocumentBytes.
func readDocument(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > maxDocumentBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes", name, maxDocumentBytes)
	}
	return b, nil
}

// describeRefusal words a strict-profile or envelope refusal for the
// terminal: "refused: <reason> at <where>: <fixed detail>", so scripts can
// match the reason code; the input is never quoted.
func describeRefusal(err error) error {
	var pe *canonicaljson.ProfileError
	var re *envelope.RefusalError
	if errors.As(err, &pe) || errors.As(err, &re) {
		return fmt.Errorf("refused: %w", err)
	}
	return err
}
