package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Backup writes a consistent snapshot of the SQLite database at path to
// out with VACUUM INTO, on a connection of its own: it reads one
// snapshot of the WAL-mode database while a relay keeps appending to it
// (readers never block the writer), and the copy is a compacted database
// without a WAL, ready to be opened as it is. out must not exist; a
// partial file is removed on failure. Errors: ErrUnavailable when path
// cannot be read.
func Backup(ctx context.Context, path, out string) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("backup: %s exists", out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	// mode=ro: a backup never writes to (nor creates) the source.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return mapErr("backup", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, vacuumInto, out); err != nil {
		_ = os.Remove(out)
		return mapErr("backup", err)
	}
	return nil
}
