package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/storetest"
)

const skipReason = "ACRELAY_TEST_DATABASE_URL not set; scripts/test.sh provisions a throwaway PostgreSQL"

// freshDatabase creates an empty database acrelay_test_<random> on the
// server of ACRELAY_TEST_DATABASE_URL, drops it (WITH FORCE) at cleanup,
// and returns its URL. It skips when the variable is unset.
func freshDatabase(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("ACRELAY_TEST_DATABASE_URL")
	if admin == "" {
		t.Skip(skipReason)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal("ACRELAY_TEST_DATABASE_URL does not parse as a URL")
	}
	var b [6]byte
	rand.Read(b[:])
	name := "acrelay_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to ACRELAY_TEST_DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop database: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

func openFresh(t testing.TB) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), freshDatabase(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
}
