package main

// handoff put|get|transition: plain HTTP against the relay's handoff API
// (spec/handoff-contract-1.md "HTTP"). The relay is the authority; these
// commands only check locally what would be refused anyway (schema, id
// form) so that nothing invalid is sent.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/handoff"
	"github.com/acrelay/acrelay/wire"
)

// handoffRemote is what the three commands share: relay URL and token
// (the agent commands' flags and environment) and one HTTP client.
type handoffRemote struct {
	relay relayFlags
}

// do sends one request and returns the body of a 2xx answer and its
// headers; any other status is a *client.APIError wrapped in an exitError.
func (h *handoffRemote) do(ctx context.Context, method, path string, body []byte, header http.Header) ([]byte, http.Header, error) {
	if err := h.relay.applyProfile(); err != nil {
		return nil, nil, &exitError{code: exitInput, err: err}
	}
	if h.relay.url == "" {
		return nil, nil, &exitError{code: exitInput, err: errors.New("no relay URL: set --url or ACRELAY_URL")}
	}
	tok, err := h.relay.resolveToken()
	if err != nil {
		return nil, nil, &exitError{code: exitInput, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(h.relay.url, "/")+path, rd)
	if err != nil {
		return nil, nil, &exitError{code: exitInput, err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, &exitError{code: exitInput, err: fmt.Errorf("%s %s: %w", method, path, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes))
	if err != nil {
		return nil, nil, &exitError{code: exitInput, err: fmt.Errorf("%s %s: read answer: %w", method, path, err)}
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, &exitError{code: exitRefused, err: client.ParseAPIError(resp.StatusCode, b)}
	}
	return b, resp.Header, nil
}

func handoffPath(id string) (string, error) {
	if !handoff.ValidHandoffID(id) {
		return "", &exitError{code: exitInput, err: errors.New(wire.CodeHandoffIDInvalid + ": the handoff id must be a canonical lowercase UUID")}
	}
	return "/v1/handoffs/" + url.PathEscape(id), nil
}

func printBody(cmd *cobra.Command, b []byte) {
	out := cmd.OutOrStdout()
	out.Write(bytes.TrimRight(b, "\n"))
	fmt.Fprintln(out)
}

func newHandoffPutCmd() *cobra.Command {
	h := &handoffRemote{}
	cmd := &cobra.Command{
		Use:   "put FILE|-",
		Short: "Create a handoff contract on the relay (or replay it idempotently)",
		Long: `Put validates the contract locally (as "handoff validate" does) and, when
it is valid, sends it with PUT /v1/handoffs/{handoffId}. The relay's answer
{"contract","version","overdue","events"} is printed. 201 is a creation, 200
an idempotent replay of identical content; idempotency_key_reused and
handoff_exists (409) and contract_invalid (422) exit 1.`,
		Example: `  ACRELAY_URL=http://127.0.0.1:8080 ACRELAY_TOKEN_FILE=token acrelay handoff put contract.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readDocument(cmd, args[0])
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			c, issues, err := handoff.Validate(raw)
			if err != nil {
				return &exitError{code: exitRefused, err: describeRefusal(err)}
			}
			if len(issues) > 0 {
				for _, i := range issues {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s\n", i)
				}
				return &exitError{code: exitRefused, err: fmt.Errorf("%s: %d schema violation(s); nothing sent", wire.CodeContractInvalid, len(issues))}
			}
			path, err := handoffPath(c.HandoffID)
			if err != nil {
				return err
			}
			b, _, err := h.do(cmd.Context(), http.MethodPut, path, raw, nil)
			if err != nil {
				return err
			}
			printBody(cmd, b)
			return nil
		},
	}
	h.relay.add(cmd, false)
	return cmd
}

func newHandoffGetCmd() *cobra.Command {
	h := &handoffRemote{}
	var etagOnly bool
	cmd := &cobra.Command{
		Use:   "get HANDOFF_ID",
		Short: "Print a handoff contract's current version from the relay",
		Long: `Get prints the answer of GET /v1/handoffs/{handoffId}:
{"contract","version","overdue","events"}. With --etag it prints only the
version's ETag, the value "handoff transition --if-match" expects.`,
		Example: `  acrelay handoff get 7c9e6679-7425-40de-944b-e07fc1f90ae7 | jq .contract.state`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := handoffPath(args[0])
			if err != nil {
				return err
			}
			b, hdr, err := h.do(cmd.Context(), http.MethodGet, path, nil, nil)
			if err != nil {
				return err
			}
			if etagOnly {
				fmt.Fprintln(cmd.OutOrStdout(), hdr.Get("ETag"))
				return nil
			}
			printBody(cmd, b)
			return nil
		},
	}
	h.relay.add(cmd, false)
	cmd.Flags().BoolVar(&etagOnly, "etag", false, "print only the ETag of the current version")
	return cmd
}

func newHandoffTransitionCmd() *cobra.Command {
	h := &handoffRemote{}
	var resultFile, ifMatch string
	cmd := &cobra.Command{
		Use:   "transition HANDOFF_ID STATE",
		Short: "Move a handoff contract to another state on the relay",
		Long: `Transition sends POST /v1/handoffs/{handoffId}/transitions with
{"to": STATE, "result"?} under If-Match. Without --if-match it first reads
the current version's ETag, so the move applies to the version just read
(412 if another writer moved it in between). --result names a JSON file
(or - for standard input) holding the result object
{"summary","changedArtifacts","evidenceUris","unresolvedRisks"}; moving to
succeeded needs one (result_required), with evidenceUris when an
acceptance criterion requires evidence (evidence_required).`,
		Example: `  acrelay handoff transition 7c9e6679-7425-40de-944b-e07fc1f90ae7 running
  acrelay handoff transition 7c9e6679-7425-40de-944b-e07fc1f90ae7 succeeded --result result.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := handoffPath(args[0])
			if err != nil {
				return err
			}
			body := []canonicaljson.Member{{Name: "to", Value: canonicaljson.StringValue(args[1])}}
			if resultFile != "" {
				raw, err := readDocument(cmd, resultFile)
				if err != nil {
					return &exitError{code: exitInput, err: err}
				}
				result, err := canonicaljson.ParseObject(raw)
				if err != nil {
					return &exitError{code: exitRefused, err: describeRefusal(err)}
				}
				body = append(body, canonicaljson.Member{Name: "result", Value: result})
			}
			payload, err := canonicaljson.Canonical(canonicaljson.ObjectValue(body...))
			if err != nil {
				return &exitError{code: exitRefused, err: describeRefusal(err)}
			}
			if ifMatch == "" {
				_, hdr, err := h.do(cmd.Context(), http.MethodGet, path, nil, nil)
				if err != nil {
					return err
				}
				if ifMatch = hdr.Get("ETag"); ifMatch == "" {
					return &exitError{code: exitRefused, err: errors.New("the relay sent no ETag; pass --if-match")}
				}
			}
			b, _, err := h.do(cmd.Context(), http.MethodPost, path+"/transitions", payload, http.Header{"If-Match": {ifMatch}})
			if err != nil {
				return err
			}
			printBody(cmd, b)
			return nil
		},
	}
	h.relay.add(cmd, false)
	cmd.Flags().StringVar(&resultFile, "result", "", "JSON file (or -) with the result object")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "ETag of the version to move (default: read it first)")
	return cmd
}
