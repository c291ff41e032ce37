package witness

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	acrtlog "github.com/acrelay/acrelay/tlog"
)

// AddCheckpointPath is the route of this relay as a C2SP tlog-witness of
// other logs: POST <submission prefix>/add-checkpoint under the prefix
// /v1/witness.
const AddCheckpointPath = "/v1/witness/add-checkpoint"

// MaxProofLines is the most consistency proof lines a request may carry
// (C2SP tlog-witness: "The client MUST NOT send more than 63").
const MaxProofLines = 63

// ErrBadRequest: an add-checkpoint body that is not "old <N>\n", up to 63
// base64 hash lines, an empty line and a checkpoint (400).
var ErrBadRequest = errors.New("not an add-checkpoint request")

// AddCheckpoint is a parsed C2SP tlog-witness add-checkpoint request.
type AddCheckpoint struct {
	// OldSize is the size the client says the witness last cosigned.
	OldSize int64
	// Proof is the RFC 6962 consistency proof from OldSize to the
	// checkpoint's size.
	Proof tlog.TreeProof
	// Note is the checkpoint, a signed note (not yet verified).
	Note []byte
}

// ParseAddCheckpoint parses an add-checkpoint body (C2SP tlog-witness
// "add-checkpoint"): "old <size>" in canonical decimal, zero to 63
// lines of one base64 32-byte hash each, an empty line, then the note
// (the rest of the body, non-empty). Errors: ErrBadRequest.
func ParseAddCheckpoint(body []byte) (AddCheckpoint, error) {
	bad := func(what string) (AddCheckpoint, error) {
		return AddCheckpoint{}, fmt.Errorf("%w: %s", ErrBadRequest, what)
	}
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return bad("no old size line")
	}
	n, ok := strings.CutPrefix(string(line), "old ")
	size, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || size < 0 || strconv.FormatInt(size, 10) != n {
		return bad("the old size line is not \"old <decimal>\"")
	}
	req := AddCheckpoint{OldSize: size}
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return bad("no empty line before the checkpoint")
		}
		if len(line) == 0 {
			break
		}
		if len(req.Proof) == MaxProofLines {
			return bad("more than 63 proof lines")
		}
		h, err := base64.StdEncoding.Strict().DecodeString(string(line))
		if err != nil || len(h) != tlog.HashSize {
			return bad("a proof line is not a base64 32-byte hash")
		}
		req.Proof = append(req.Proof, tlog.Hash(h))
	}
	if len(rest) == 0 {
		return bad("no checkpoint")
	}
	req.Note = rest
	return req, nil
}

// ParseForeign parses the body of another log's checkpoint (C2SP
// tlog-checkpoint): its origin, size and root lines; extension lines
// after them are allowed (this relay's own checkpoints have none, other
// logs' may). Errors: acrtlog.ErrBadCheckpoint.
func ParseForeign(text string) (Checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return Checkpoint{}, fmt.Errorf("%w: want origin, size and root lines", acrtlog.ErrBadCheckpoint)
	}
	c, err := acrtlog.ParseCheckpoint(lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n")
	if err != nil {
		return Checkpoint{}, err
	}
	return c, nil
}
