package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
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

// Marshal is the add-checkpoint body of r, as a client sends it (C2SP
// tlog-witness): "old <size>", one base64 line per proof hash, an empty
// line, the note. ParseAddCheckpoint(r.Marshal()) is r.
func (r AddCheckpoint) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString("old " + strconv.FormatInt(r.OldSize, 10) + "\n")
	for _, h := range r.Proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	b.WriteString("\n")
	b.Write(r.Note)
	return b.Bytes()
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

// Outcomes of Add besides a cosignature, each answered with the C2SP
// tlog-witness status named.
var (
	// ErrLogUnknown: the checkpoint's origin is not a log this witness
	// witnesses (404).
	ErrLogUnknown = errors.New("the checkpoint's origin is not a log this witness witnesses")
	// ErrLogSignature: no signature on the checkpoint verifies with a
	// key trusted for its origin (403).
	ErrLogSignature = errors.New("no signature on the checkpoint verifies with a key trusted for its origin")
)

// ConflictError: the request's old size is not the size of the
// checkpoint last cosigned for the origin, Size (409, Size as
// text/x.tlog.size). Also the answer when another writer moved the state
// between the read and the compare-and-set.
type ConflictError struct{ Size int64 }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("old is not %d, the size last cosigned for the origin (another writer may have moved it)", e.Size)
}

// InconsistentError: the checkpoint is not consistent with the one last
// cosigned for its origin (422): Kind is store.SplitViewFork (the same
// size, another root) or store.SplitViewInconsistent (a proof that does
// not verify, a proof from size 0, a size-0 checkpoint that is not the
// empty tree); Cosigned is the state it contradicts.
type InconsistentError struct {
	Kind     string
	Cosigned store.WitnessedLog
}

func (e *InconsistentError) Error() string {
	return fmt.Sprintf("%s: the checkpoint is not consistent with the one of size %d cosigned for the origin", e.Kind, e.Cosigned.Size)
}

// LogState keeps, per origin, the latest checkpoint a witness cosigned,
// written by compare-and-set on its size (store.LogWitnesses's two
// methods; a federation link keeps its own in store.WitnessState). A
// missing one is store.ErrNotFound (size 0).
type LogState interface {
	WitnessedLog(ctx context.Context, origin string) (store.WitnessedLog, error)
	SaveWitnessedLog(ctx context.Context, l store.WitnessedLog, oldSize int64) (ok bool, err error)
}

// Cosigned is what Add returns with a cosignature.
type Cosigned struct {
	// Note is the checkpoint with every signature it came with and this
	// witness's cosignature appended: what the state holds.
	Note []byte
	// Line is the cosignature line alone (C2SP tlog-witness's 200 body).
	Line string
}

// Add is the witness's side of C2SP tlog-witness add-checkpoint, the one
// decision this relay takes on another log's checkpoint whether it
// arrives at POST /v1/witness/add-checkpoint or a federation link read
// it from its remote: the checkpoint must be signed by a key of logs for
// its origin (ErrLogUnknown, ErrLogSignature), parse (extension lines
// allowed) with old no larger than its size (ErrBadRequest); old must be
// the size st holds for the origin (*ConflictError); the proof must take
// the held tree to the new one (*InconsistentError); then the checkpoint
// is cosigned with signer's key and stored by compare-and-set on old,
// before the cosignature is returned, so two processes never cosign two
// trees of one size (a lost race is *ConflictError). Other errors are
// st's or signer's.
func Add(ctx context.Context, req AddCheckpoint, logs map[string][]note.Verifier, st LogState, signer func(context.Context) (note.Signer, error)) (Cosigned, error) {
	origin, _, _ := bytes.Cut(req.Note, []byte("\n"))
	verifiers := logs[string(origin)]
	if len(verifiers) == 0 {
		return Cosigned{}, ErrLogUnknown
	}
	n, err := note.Open(req.Note, note.VerifierList(verifiers...))
	if err != nil {
		return Cosigned{}, ErrLogSignature
	}
	c, err := ParseForeign(n.Text)
	if err != nil || c.Origin != string(origin) || req.OldSize > c.Size {
		return Cosigned{}, fmt.Errorf("%w: the checkpoint does not parse, or old is above its size", ErrBadRequest)
	}
	held, err := st.WitnessedLog(ctx, c.Origin)
	switch {
	case errors.Is(err, store.ErrNotFound):
		held = store.WitnessedLog{Origin: c.Origin, Root: acrtlog.EmptyRoot}
	case err != nil:
		return Cosigned{}, err
	}
	if req.OldSize != held.Size {
		return Cosigned{}, &ConflictError{Size: held.Size}
	}
	switch {
	case req.OldSize == c.Size && c.Root != held.Root && c.Size > 0:
		return Cosigned{}, &InconsistentError{Kind: store.SplitViewFork, Cosigned: held}
	case c.Size == 0 && c.Root != acrtlog.EmptyRoot,
		req.OldSize == 0 && len(req.Proof) > 0,
		req.OldSize > 0 && req.OldSize < c.Size && tlog.CheckTree(req.Proof, c.Size, c.Root, req.OldSize, held.Root) != nil:
		return Cosigned{}, &InconsistentError{Kind: store.SplitViewInconsistent, Cosigned: held}
	}
	s, err := signer(ctx)
	if err != nil {
		return Cosigned{}, err
	}
	cosigned, line, err := Cosign(s, n)
	if err != nil {
		return Cosigned{}, err
	}
	ok, err := st.SaveWitnessedLog(ctx, store.WitnessedLog{Origin: c.Origin, Size: c.Size, Root: c.Root, Checkpoint: cosigned}, req.OldSize)
	if err != nil {
		return Cosigned{}, err
	}
	if !ok { // another writer moved it meanwhile
		if held, err = st.WitnessedLog(ctx, c.Origin); err != nil {
			return Cosigned{}, err
		}
		return Cosigned{}, &ConflictError{Size: held.Size}
	}
	return Cosigned{Note: cosigned, Line: line}, nil
}
