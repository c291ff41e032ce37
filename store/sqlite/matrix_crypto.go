package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

const (
	selectMatrixCryptoSecret = `SELECT value FROM matrix_crypto_secrets WHERE name = ?`
	insertMatrixCryptoSecret = `INSERT INTO matrix_crypto_secrets (name, value, created_at) VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ON CONFLICT (name) DO NOTHING`
)

var _ store.MatrixCrypto = (*DB)(nil)

// MatrixCryptoSecret returns a Matrix crypto secret, created once
// (store.MatrixCrypto).
func (db *DB) MatrixCryptoSecret(ctx context.Context, name string, create func() (string, error)) (string, error) {
	var v string
	err := db.rd.QueryRowContext(ctx, selectMatrixCryptoSecret, name).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", mapErr("matrix crypto secret", err)
	}
	created, err := create()
	if err != nil {
		return "", fmt.Errorf("matrix crypto secret %s: %w", name, err)
	}
	if _, err := db.w.ExecContext(ctx, insertMatrixCryptoSecret, name, created); err != nil {
		return "", mapErr("matrix crypto secret", err)
	}
	// Another process may have stored its secret first: the stored one counts.
	if err := db.w.QueryRowContext(ctx, selectMatrixCryptoSecret, name).Scan(&v); err != nil {
		return "", mapErr("matrix crypto secret", err)
	}
	return v, nil
}

// MatrixCryptoDB opens the store's database file once more, for mautrix's
// crypto store (store.MatrixCrypto): one connection (mautrix's dbutil
// runs its own transactions; SQLite has one writer), the store's busy
// timeout, WAL, foreign keys and immediate transactions, so that its
// writes wait for the relay's writer instead of failing. Dialect "sqlite".
func (db *DB) MatrixCryptoDB(ctx context.Context) (*sql.DB, string, error) {
	c, err := sql.Open("sqlite", db.path+fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_txlock=immediate",
		db.busy.Milliseconds()))
	if err != nil {
		return nil, "", mapErr("open matrix crypto db", err)
	}
	c.SetMaxOpenConns(1)
	if err := c.PingContext(ctx); err != nil {
		c.Close()
		return nil, "", mapErr("open matrix crypto db", err)
	}
	return c, "sqlite", nil
}
