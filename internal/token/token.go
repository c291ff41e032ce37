// Package token makes and checks bearer tokens. A token is
// "acr_" + token id (26 lowercase base32 chars) + "_" + 43 chars of
// base64url secret. Only SHA-256(token) is stored; checks compare hashes in
// constant time. The id lets the relay find the one stored hash to compare
// without a lookup keyed on secret material.
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"strings"
)

// ErrMalformed reports a string that is not shaped like an acrelay token.
var ErrMalformed = errors.New("malformed token")

const prefix = "acr_"

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns a fresh token id, the whole token string (shown once) and its
// SHA-256 hash (the only thing to store).
func New() (id, tok string, hash []byte) {
	var idb [16]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	if _, err := rand.Read(secret[:]); err != nil {
		panic(err)
	}
	id = idEncoding.EncodeToString(idb[:])
	tok = prefix + id + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	return id, tok, Hash(tok)
}

// Hash returns SHA-256(tok).
func Hash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// ID extracts the token id from a token string. Error: ErrMalformed.
func ID(tok string) (string, error) {
	rest, ok := strings.CutPrefix(tok, prefix)
	if !ok {
		return "", ErrMalformed
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 26 || len(secret) != 43 {
		return "", ErrMalformed
	}
	return id, nil
}

// Matches reports in constant time whether tok hashes to hash.
func Matches(tok string, hash []byte) bool {
	return subtle.ConstantTimeCompare(Hash(tok), hash) == 1
}
