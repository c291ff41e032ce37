package client

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/acrelay/acrelay/correspondence"
)

// ErrKeyFormat reports a key file that is neither a PKCS#8 PEM Ed25519
// private key nor a 32-byte seed in hex or unpadded base64url.
var ErrKeyFormat = errors.New("key is not a PKCS#8 PEM Ed25519 private key or a 32-byte hex/base64url seed")

// GenerateKey returns a fresh Ed25519 private key from crypto/rand.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return priv, nil
}

// MarshalPrivateKeyPEM encodes priv as a PEM block of type "PRIVATE KEY"
// holding PKCS#8 DER (RFC 8410), the key file format of `acrelay keygen`.
func MarshalPrivateKeyPEM(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKey reads an Ed25519 private key from data: a PEM "PRIVATE
// KEY" block (PKCS#8), or a 32-byte seed written as 64 hex digits or 43
// characters of unpadded base64url (surrounding whitespace ignored).
// Error: ErrKeyFormat. The error never quotes the input.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(data); blk != nil {
		if blk.Type != "PRIVATE KEY" {
			return nil, ErrKeyFormat
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, ErrKeyFormat
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, ErrKeyFormat
		}
		return priv, nil
	}
	s := string(bytes.TrimSpace(data))
	var seed []byte
	switch len(s) {
	case 2 * ed25519.SeedSize:
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, ErrKeyFormat
		}
		seed = b
	case 43:
		b, err := base64.RawURLEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, ErrKeyFormat
		}
		seed = b
	default:
		return nil, ErrKeyFormat
	}
	if len(seed) != ed25519.SeedSize {
		return nil, ErrKeyFormat
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// LoadPrivateKey reads a key file with ParsePrivateKey. Errors: the
// os error of reading path, or ErrKeyFormat wrapped with the path.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	priv, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return priv, nil
}

// Signer signs events as one sender of one project (spec §3, §6). It holds
// the private key; the key is never logged or serialized by this package.
type Signer struct {
	ProjectID string
	Sender    correspondence.Sender
	priv      ed25519.PrivateKey
}

// NewSigner returns a Signer for priv (64 bytes) that signs as sender in
// project projectID. Error when priv has the wrong length.
func NewSigner(priv ed25519.PrivateKey, projectID string, sender correspondence.Sender) (*Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("new signer: private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	return &Signer{ProjectID: projectID, Sender: sender, priv: priv}, nil
}

// PublicKey returns the Ed25519 public key matching the Signer's key.
func (s *Signer) PublicKey() ed25519.PublicKey {
	return s.priv.Public().(ed25519.PublicKey)
}

// PublicKeyB64URL returns the public key as 43 characters of unpadded
// base64url, the form the admin key route takes (spec §10).
func (s *Signer) PublicKeyB64URL() string {
	return correspondence.EncodePublicKey(s.PublicKey())
}

// Sign sets ev's project_id and sender to the Signer's, then signs it and
// sets its signature and event_id (spec §6). Everything else in ev is
// signed as given.
func (s *Signer) Sign(ev *correspondence.Event) error {
	ev.ProjectID = s.ProjectID
	ev.Sender = s.Sender
	return ev.Sign(s.priv)
}

// SignAsIs signs ev exactly as given (project_id and sender included),
// for events whose sender ids come from the caller, such as `acrelay sign`
// reading a core event. The key must belong to ev.Sender.SigningKeyID for
// the relay to accept it.
func (s *Signer) SignAsIs(ev *correspondence.Event) error {
	return ev.Sign(s.priv)
}
