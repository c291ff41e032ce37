// Command acrelay is the relay server and the agent toolkit for
// agent-correspondence/v0.1. Each subcommand lives in its own file and
// registers itself on rootCmd in an init function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "acrelay",
	Short:         "Federated relay and agent toolkit for agent-correspondence/v0.1",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// exitError carries a process exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "acrelay:", err)
		if ee, ok := err.(*exitError); ok {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// envOr returns the environment variable's value, or def when unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
