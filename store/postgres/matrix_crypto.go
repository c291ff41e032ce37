package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/acrelay/acrelay/store"
)

const (
	selectMatrixCryptoSecret = `SELECT value FROM matrix_crypto_secrets WHERE name = $1`
	insertMatrixCryptoSecret = `INSERT INTO matrix_crypto_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`
)

var _ store.MatrixCrypto = (*DB)(nil)

// MatrixCryptoSecret returns a Matrix crypto secret, created once
// (store.MatrixCrypto): the insert is ON CONFLICT DO NOTHING, and the row
// read after it is the secret every process uses.
func (db *DB) MatrixCryptoSecret(ctx context.Context, name string, create func() (string, error)) (string, error) {
	var v string
	err := db.pool.QueryRow(ctx, selectMatrixCryptoSecret, name).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", mapErr("matrix crypto secret", err)
	}
	created, err := create()
	if err != nil {
		return "", fmt.Errorf("matrix crypto secret %s: %w", name, err)
	}
	if _, err := db.pool.Exec(ctx, insertMatrixCryptoSecret, name, created); err != nil {
		return "", mapErr("matrix crypto secret", err)
	}
	if err := db.pool.QueryRow(ctx, selectMatrixCryptoSecret, name).Scan(&v); err != nil {
		return "", mapErr("matrix crypto secret", err)
	}
	return v, nil
}

// MatrixCryptoDB returns a database/sql handle over the store's pgx pool
// for mautrix's crypto store (store.MatrixCrypto); dialect "pgx". Closing
// it leaves the pool open.
func (db *DB) MatrixCryptoDB(ctx context.Context) (*sql.DB, string, error) {
	return stdlib.OpenDBFromPool(db.pool), "pgx", nil
}
