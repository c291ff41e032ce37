package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/handoff"
	"github.com/acrelay/acrelay/wire"
)

func init() { rootCmd.AddCommand(newHandoffCmd()) }

func newHandoffCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "handoff",
		Short: "Handoff contracts v1: validate locally; put, get and transition on a relay",
	}
	cmd.AddCommand(newHandoffValidateCmd(), newHandoffPutCmd(), newHandoffGetCmd(), newHandoffTransitionCmd())
	return cmd
}

func newHandoffValidateCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate FILE|-",
		Short: "Check a handoff contract against the strict JSON profile and the contract schema",
		Long: `Validate checks a handoff contract v1 (spec/handoff-contract-1.md): first
the strict JSON profile (duplicate members, fractions … are refused with
their reason code), then the contract JSON Schema (draft 2020-12) with
format assertions on, so a handoffId that is not a UUID or a createdAt that
is not an RFC 3339 date-time is a violation.

A valid contract prints "valid" and exits 0. Otherwise every schema
violation is printed on its own line as "<JSON pointer>: <message>" (the
whole document is "(document)") and the command exits 1; a strict-profile
refusal exits 1 with its reason; an unreadable file exits 2.

With --json the output is {"valid": bool, "issues": [{"pointer","message"}]}.`,
		Example: `  acrelay handoff validate contract.json
  curl -s "$RELAY/v1/handoffs/$ID" -H "Authorization: Bearer $TOKEN" | jq .contract | acrelay handoff validate -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readDocument(cmd, args[0])
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			_, issues, err := handoff.Validate(raw)
			if err != nil {
				return &exitError{code: exitRefused, err: describeRefusal(err)}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if issues == nil {
					issues = []handoff.Issue{}
				}
				body, err := json.Marshal(struct {
					Valid  bool            `json:"valid"`
					Issues []handoff.Issue `json:"issues"`
				}{len(issues) == 0, issues})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s\n", body)
			} else if len(issues) == 0 {
				fmt.Fprintln(out, "valid")
			}
			if len(issues) == 0 {
				return nil
			}
			if !asJSON {
				for _, i := range issues {
					ptr := i.Pointer
					if ptr == "" {
						ptr = "(document)"
					}
					fmt.Fprintf(out, "%s: %s\n", ptr, i.Message)
				}
			}
			return &exitError{code: exitRefused, err: fmt.Errorf("%s: %d schema violation(s)", wire.CodeContractInvalid, len(issues))}
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"valid","issues"} as JSON`)
	return cmd
}
