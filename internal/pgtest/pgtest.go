// Package pgtest gives tests a throwaway PostgreSQL database on the server
// named by ACRELAY_TEST_DATABASE_URL (scripts/test.sh provisions one), and
// skips them with a clear message when it is not set.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the admin URL of the test server.
const EnvVar = "ACRELAY_TEST_DATABASE_URL"

// SkipReason is the message of tests skipped for want of a server.
const SkipReason = EnvVar + " not set; scripts/test.sh provisions a throwaway PostgreSQL"

// FreshDatabase creates an empty database acrelay_test_<random>, drops it
// (WITH FORCE) at cleanup, and returns its URL. It skips tb when EnvVar is
// unset.
func FreshDatabase(tb testing.TB) string {
	tb.Helper()
	admin := os.Getenv(EnvVar)
	if admin == "" {
		tb.Skip(SkipReason)
	}
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatal(EnvVar + " does not parse as a URL")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "acrelay_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("connect to %s: %v", EnvVar, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			tb.Errorf("drop database: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database: %v", err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
