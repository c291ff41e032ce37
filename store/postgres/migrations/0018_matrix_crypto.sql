-- Why: end-to-end encrypted Matrix rooms (issue 31): the deployment's Matrix crypto secrets (the pickle key that encrypts the relay device's olm/megolm state at rest, the cross-signing recovery key), kept in the relay's own database like the log key so that `acrelay backup` carries them with the crypto state they unlock. The olm/megolm state itself is in mautrix's crypto_* and mx_* tables, which mautrix's dbutil creates and upgrades with its own version tables (crypto_version, mx_version): its schema is mautrix's, versioned with the library.
--
-- Query paths and the index that serves each:
--   MatrixCryptoSecret     PK (name)

-- +goose Up
CREATE TABLE matrix_crypto_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE matrix_crypto_secrets;
