package tlog

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// ErrBadCheckpoint: a signed note whose text is not a C2SP tlog-checkpoint
// body of this log (wrong line count, size or root spelling, or another
// origin). A bad or unknown signature is note's own error, wrapped.
var ErrBadCheckpoint = errors.New("not a checkpoint of this log")

// Checkpoint is the body of a C2SP tlog-checkpoint: the log's origin line,
// the tree size (leaves) and the RFC 6962 root hash of that size.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// EmptyRoot is the root hash of the empty tree, SHA-256 of the empty
// string (RFC 6962 §2.1), which a size-0 checkpoint carries (C2SP
// tlog-witness). x/mod's tlog.TreeHash(0, …) returns the zero Hash
// instead: never put that in a checkpoint.
var EmptyRoot = tlog.Hash(sha256.Sum256(nil))

// Origin returns a project's checkpoint origin (spec §Checkpoints):
// "<public-url host and path>/<project_id>", the host lowercased, the
// scheme, query, fragment and any trailing "/" of the path dropped.
// "https://Relay.Example/acrelay/" and "p1" give "relay.example/acrelay/p1".
func Origin(publicURL, projectID string) string {
	return KeyName(publicURL) + "/" + projectID
}

// KeyName returns the name for the relay's log key: the host (lowercased)
// and path of its public URL without a trailing "/", as in Origin, e.g.
// "relay.example/acrelay". It is a valid note key name when publicURL is a
// URL without spaces or "+".
func KeyName(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		s, _, _ := strings.Cut(publicURL, "?")
		s, _, _ = strings.Cut(s, "#")
		if _, after, ok := strings.Cut(s, "://"); ok {
			s = after
		}
		return strings.TrimRight(s, "/")
	}
	return strings.ToLower(u.Host) + strings.TrimRight(u.EscapedPath(), "/")
}

// NewLogKey returns a new Ed25519 signer key and its verifier key
// ("name+hash+key", note.GenerateKey's encoding) for the relay's log key.
// name must be a valid note key name (non-empty, no space or "+").
func NewLogKey(name string) (skey, vkey string, err error) {
	if name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, '+') || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
		return "", "", fmt.Errorf("log key name %q: empty, or holds a space or \"+\"", name)
	}
	skey, vkey, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", fmt.Errorf("log key %q: %w", name, err)
	}
	return skey, vkey, nil
}

// Text returns the checkpoint body: "<origin>\n<size>\n<base64 root>\n".
func (c Checkpoint) Text() string {
	return c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Root[:]) + "\n"
}

// SignCheckpoint returns the signed note of c (C2SP tlog-checkpoint: the
// body, a blank line, one signature line by s). The origin must be
// non-empty without a newline and the size ≥ 0, else ErrBadCheckpoint.
func SignCheckpoint(s note.Signer, c Checkpoint) ([]byte, error) {
	if c.Origin == "" || strings.ContainsAny(c.Origin, "\n") || c.Size < 0 {
		return nil, fmt.Errorf("%w: origin %q size %d", ErrBadCheckpoint, c.Origin, c.Size)
	}
	msg, err := note.Sign(&note.Note{Text: c.Text()}, s)
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	return msg, nil
}

// OpenCheckpoint verifies msg's signature by v (note.Open: other
// signatures, such as witnesses' cosignatures, are left in
// n.UnverifiedSigs) and parses its body, which must be exactly a checkpoint
// of origin: three lines, a canonical decimal size and a base64 32-byte
// root. Extension lines are refused (this log writes none). Errors wrap
// note's (*note.UnverifiedNoteError, *note.InvalidSignatureError, …) or are
// ErrBadCheckpoint.
func OpenCheckpoint(msg []byte, v note.Verifier, origin string) (Checkpoint, *note.Note, error) {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: %w", err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != origin {
		return Checkpoint{}, nil, fmt.Errorf("%w: origin %q, want %q", ErrBadCheckpoint, c.Origin, origin)
	}
	return c, n, nil
}

// ParseCheckpoint parses a checkpoint body (the note's text, signatures
// already checked) as Checkpoint.Text writes it; anything else is
// ErrBadCheckpoint.
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return Checkpoint{}, fmt.Errorf("%w: want 3 lines", ErrBadCheckpoint)
	}
	origin := strings.TrimSuffix(lines[0], "\n")
	size, ok := decimal(strings.TrimSuffix(lines[1], "\n"), 1<<63-1)
	if origin == "" || !ok {
		return Checkpoint{}, fmt.Errorf("%w: origin or size", ErrBadCheckpoint)
	}
	root, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(root) != tlog.HashSize {
		return Checkpoint{}, fmt.Errorf("%w: root hash", ErrBadCheckpoint)
	}
	c := Checkpoint{Origin: origin, Size: size}
	copy(c.Root[:], root)
	if !bytes.Equal([]byte(c.Text()), []byte(text)) {
		return Checkpoint{}, fmt.Errorf("%w: not canonical", ErrBadCheckpoint)
	}
	return c, nil
}
