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
	// The copy holds what the database holds — WebSub secrets, peer
	// tokens — so it is created empty with mode 0600 (VACUUM INTO accepts
	// an empty file) and never exists world-readable, whatever the umask.
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("backup: %s exists", out)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(out)
		return fmt.Errorf("backup: %w", err)
	}
	// mode=ro: a backup never writes to (nor creates) the source.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		_ = os.Remove(out)
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
