package logwitness

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// ErrBadWitness: a --log-witness value that is not "<vkey> <url>" with a
// cosignature/v1 verifier key and an http(s) URL.
var ErrBadWitness = errors.New("log witness: want \"<vkey> <url>\": a cosignature/v1 verifier key (name+hash+key, key type 0x04, as litewitness prints it), a space and the witness's http(s) submission prefix")

// algCosignatureV1 is the signature type byte of a C2SP tlog-cosignature
// v1 (timestamped Ed25519) verifier key.
const algCosignatureV1 = 0x04

// Witness is one external witness as the operator configured it.
type Witness struct {
	// VerifierKey is the witness's key exactly as configured
	// ("name+hash+key"): its identity in the store.
	VerifierKey string
	// Name is the key's name, as in its cosignature lines.
	Name     string
	Verifier note.Verifier
	// URL is the submission prefix without a trailing "/":
	// URL + "/add-checkpoint" is POSTed to.
	URL string
}

// AddCheckpointURL is where checkpoints are submitted (C2SP tlog-witness
// "POST <submission prefix>/add-checkpoint").
func (w Witness) AddCheckpointURL() string { return w.URL + "/add-checkpoint" }

// ParseWitness parses a --log-witness value, "<vkey> <url>": the witness's
// verifier key exactly as litewitness prints it (a C2SP cosignature/v1
// key, signature type 0x04; x/mod's note.NewVerifier does not read it,
// transparency-dev/formats does), one space, and the submission prefix
// (http or https, no query or fragment; a trailing "/" is dropped). A
// plain http URL, loopback included, is the operator's choice. Errors
// wrap ErrBadWitness and name the faulty part without quoting it whole.
func ParseWitness(s string) (Witness, error) {
	vkey, raw, ok := strings.Cut(strings.TrimSpace(s), " ")
	raw = strings.TrimSpace(raw)
	if !ok || vkey == "" || raw == "" || strings.ContainsAny(raw, " \t") {
		return Witness{}, ErrBadWitness
	}
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return Witness{}, fmt.Errorf("%w: the key is not name+hash+key", ErrBadWitness)
	}
	hash, err := strconv.ParseUint(parts[1], 16, 32)
	key, kerr := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(parts[1]) != 8 || kerr != nil || len(key) != 33 {
		return Witness{}, fmt.Errorf("%w: the key's hash or key data", ErrBadWitness)
	}
	if key[0] != algCosignatureV1 {
		return Witness{}, fmt.Errorf("%w: key type 0x%02x, want 0x04 (cosignature/v1)", ErrBadWitness, key[0])
	}
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return Witness{}, fmt.Errorf("%w: %v", ErrBadWitness, err)
	}
	if v.KeyHash() != uint32(hash) {
		return Witness{}, fmt.Errorf("%w: the key hash %s does not match the name and key (want %08x)", ErrBadWitness, parts[1], v.KeyHash())
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Witness{}, fmt.Errorf("%w: the URL must be http(s)://host[/path] without credentials, query or fragment", ErrBadWitness)
	}
	return Witness{VerifierKey: vkey, Name: v.Name(), Verifier: v, URL: strings.TrimRight(raw, "/")}, nil
}
