package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// acrelay healthcheck: for container healthchecks in images without curl.
func newHealthcheckCmd() *cobra.Command {
	var base string
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the relay's /healthz answers 200",
		Long: `healthcheck asks the relay at --url (or ACRELAY_URL; default
http://127.0.0.1:8080) for GET /healthz and exits 0 on 200, 1 otherwise.
The URL is the relay's base URL, as for every other command; a URL that
already ends in /healthz (the form older deploy manifests use) is taken
as it is.`,
		Example: "  acrelay healthcheck\n  ACRELAY_URL=http://127.0.0.1:9090 acrelay healthcheck",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := healthzURL(base)
			if err != nil {
				return err
			}
			c := &http.Client{Timeout: 3 * time.Second}
			res, err := c.Get(u)
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
	cmd.Flags().StringVar(&base, "url", envOr("ACRELAY_URL", "http://127.0.0.1:8080"), "relay base URL (env ACRELAY_URL)")
	return cmd
}

// healthzURL is base's /healthz: base with "/healthz" appended to its
// path, or base itself when its path already ends in /healthz.
func healthzURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("--url (ACRELAY_URL): want the relay's base URL, such as http://127.0.0.1:8080")
	}
	if !strings.HasSuffix(u.Path, "/healthz") {
		u.Path = strings.TrimRight(u.Path, "/") + "/healthz"
		u.RawPath = ""
	}
	return u.String(), nil
}

func init() { rootCmd.AddCommand(newHealthcheckCmd()) }
