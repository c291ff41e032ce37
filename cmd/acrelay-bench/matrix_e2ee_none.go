//go:build !goolm

package main

import (
	"context"
	"errors"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
)

// decryptor: see matrix_e2ee.go (goolm builds only).
type decryptor struct{}

func newDecryptor(context.Context, *mautrix.Client, string) (*decryptor, error) {
	return nil, errors.New("--encrypted needs acrelay-bench built with -tags goolm")
}

func (*decryptor) process(context.Context, *mautrix.RespSync, string) {}

func (*decryptor) decrypt(context.Context, *event.Event) (*event.Event, error) {
	return nil, errors.New("no encryption in this build")
}

func (*decryptor) close() {}
