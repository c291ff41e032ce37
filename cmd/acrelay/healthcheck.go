package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// acrelay healthcheck: for container healthchecks in images without curl.
func newHealthcheckCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:     "healthcheck",
		Short:   "Exit 0 when the relay's /healthz answers 200",
		Example: "  acrelay healthcheck --url http://127.0.0.1:8080/healthz",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &http.Client{Timeout: 3 * time.Second}
			res, err := c.Get(url)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return &exitError{code: 1, err: fmt.Errorf("healthz answered %d", res.StatusCode)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080/healthz", "health URL")
	return cmd
}

func init() { rootCmd.AddCommand(newHealthcheckCmd()) }
