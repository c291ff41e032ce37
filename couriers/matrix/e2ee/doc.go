// Package e2ee is the relay device's end-to-end encryption for Matrix
// rooms (issue 31): a mautrix OlmMachine (crypto with the pure-Go goolm
// olm, so CGO_ENABLED=0 builds) whose olm/megolm state lives in the
// relay's own database (mautrix's crypto_* and mx_* tables, through
// go.mau.fi/util/dbutil on the store's SQLite file or PostgreSQL pool;
// never a second database file), encrypted at rest with a pickle key that
// is a secret of the deployment (store.MatrixPickleKey: 32 random bytes
// made at the first start, kept in the database like the log key, so
// `acrelay backup` carries it; never logged).
//
// It is built only with the goolm tag: mautrix's crypto without it needs
// libolm through cgo. Without the tag, Open returns ErrNotBuilt and the
// courier refuses encrypted rooms (couriers/matrix.ErrEncryptionUnavailable).
package e2ee
