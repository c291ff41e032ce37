package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/store/sqlite"
)

// acrelay backup: an online snapshot of the embedded SQLite store, taken
// while a relay serves it. PostgreSQL is backed up with pg_dump (docs/operating.md
// "Backups and restore").
func newBackupCmd() *cobra.Command {
	var sc storeConfig
	var out string
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Write a consistent snapshot of the SQLite store while it serves (PostgreSQL: use pg_dump)",
		Example: `  acrelay backup --out /var/backups/acrelay-$(date +%F).db
  # restore: stop the relay, then
  cp /var/backups/acrelay-2026-07-19.db /var/lib/acrelay/acrelay.db && rm -f /var/lib/acrelay/acrelay.db-wal /var/lib/acrelay/acrelay.db-shm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if out == "" {
				return errors.New("--out: required (the snapshot's file, which must not exist)")
			}
			if sc.DatabaseURL != "" {
				return errors.New("--database-url: backup snapshots the SQLite store; back PostgreSQL up with pg_dump --format=custom (docs/operating.md \"Backups and restore\")")
			}
			path := filepath.Join(sc.DataDir, "acrelay.db")
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w in %s (pass --data-dir / ACRELAY_DATA_DIR)", errNoStore, sc.DataDir)
			}
			if err := sqlite.Backup(ctx, path, out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "acrelay: backup of %s written to %s\n", path, out)
			return nil
		},
	}
	addStoreFlags(cmd, &sc)
	cmd.Flags().StringVar(&out, "out", "", "file to write the snapshot to (must not exist)")
	return cmd
}

func init() { rootCmd.AddCommand(newBackupCmd()) }
