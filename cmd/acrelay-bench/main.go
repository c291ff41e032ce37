// Command acrelay-bench is the load tool of acrelay and its comparison
// bounds: it starts acrelay relays (the binary of --relay-bin) and the
// bound servers (its own hidden http-bound subcommand), posts signed
// events and reports throughput, latency and ratios measured in the same
// run. It is not shipped in the acrelay binary operators run.
package main

import (
	"os"
)

var rootCmd = newBenchCmd()

func init() { rootCmd.AddCommand(newBenchBoundCmd()) }

func main() {
	if err := rootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
