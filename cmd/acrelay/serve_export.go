package main

import (
	"fmt"
	"os"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/store"
)

// exportRunner builds the export courier's runner (--export-dir: every
// project's records appended as JSON lines to DIR/<project_id>.jsonl),
// creating the directory; nil when the courier is off. base gives the
// runner's holder, lease, logger and OnResult.
func exportRunner(cfg serveConfig, st store.Store, base couriers.Options) (*couriers.Runner, error) {
	if cfg.ExportDir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(cfg.ExportDir, 0o700); err != nil {
		return nil, fmt.Errorf("export dir: %w", err)
	}
	return couriers.NewRunner(st, couriers.Export{Dir: cfg.ExportDir, Feed: st}, base), nil
}
