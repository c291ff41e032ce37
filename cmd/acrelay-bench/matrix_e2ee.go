//go:build goolm

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/sqlstatestore"
	_ "modernc.org/sqlite" // the reader's crypto store
)

// decryptor is the reading client's own end-to-end encryption (a mautrix
// goolm OlmMachine on a SQLite file in dir), as a room member's client
// has: it takes the room keys the relay shares from the client's /sync
// and decrypts the relay's m.room.encrypted events.
type decryptor struct {
	mach *crypto.OlmMachine
	db   *sql.DB
}

func newDecryptor(ctx context.Context, cli *mautrix.Client, dir string) (*decryptor, error) {
	sdb, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "reader-crypto.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(1)
	db, err := dbutil.NewWithDB(sdb, "sqlite")
	if err != nil {
		sdb.Close()
		return nil, err
	}
	pk := make([]byte, 32)
	_, _ = rand.Read(pk)
	nop := zerolog.Nop()
	cs := crypto.NewSQLCryptoStore(db, dbutil.ZeroLogger(nop), "", cli.DeviceID, pk)
	ss := sqlstatestore.NewSQLStateStore(db, dbutil.ZeroLogger(nop), false)
	if err := cs.DB.Upgrade(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := ss.Upgrade(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	mach := crypto.NewOlmMachine(cli, &nop, cs, ss)
	if err := mach.Load(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := mach.ShareKeys(ctx, -1); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("reader's device keys: %w", err)
	}
	return &decryptor{mach: mach, db: sdb}, nil
}

func (d *decryptor) process(ctx context.Context, resp *mautrix.RespSync, since string) {
	d.mach.ProcessSyncResponse(ctx, resp, since)
}

func (d *decryptor) decrypt(ctx context.Context, ev *event.Event) (*event.Event, error) {
	if err := ev.Content.ParseRaw(ev.Type); err != nil {
		return nil, err
	}
	return d.mach.DecryptMegolmEvent(ctx, ev)
}

func (d *decryptor) close() { d.db.Close() }
