package token

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
)

// feedPrefix starts a feed capability: "acf_" + feed id (26 lowercase
// base32 chars) + "_" + 43 chars of base64url secret. It is shaped like a
// bearer token so it is hashed and compared the same way (Hash, Matches),
// but its prefix differs, so ID refuses it: a feed capability is never a
// bearer token.
const feedPrefix = "acf_"

// NewFeed returns a fresh feed id, the whole feed capability (shown once)
// and its SHA-256 hash (the only thing to store).
func NewFeed() (id, tok string, hash []byte) {
	var idb [16]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	if _, err := rand.Read(secret[:]); err != nil {
		panic(err)
	}
	id = idEncoding.EncodeToString(idb[:])
	tok = feedPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	return id, tok, Hash(tok)
}

// FeedID extracts the feed id from a feed capability. Error: ErrMalformed.
func FeedID(tok string) (string, error) {
	rest, ok := strings.CutPrefix(tok, feedPrefix)
	if !ok {
		return "", ErrMalformed
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 26 || len(secret) != 43 {
		return "", ErrMalformed
	}
	return id, nil
}
