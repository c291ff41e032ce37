package relay

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"
	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/wire"
	"github.com/acrelay/acrelay/witness"
)

// Witnessing's routes (spec/tlog.md §Checkpoints, issue 24 item 5;
// federation/witness.go is the witness's side):
//
//   - GET|HEAD /v1/witness-key: this relay's witness verifier key
//     (C2SP cosignature/v1, "name+hash+key"), text/plain, no token, the
//     key created in the store the first time any process asks.
//   - POST /v1/log/{project_id}/cosignatures: a peer's cosignature on one
//     of this relay's checkpoints of the project, the body the cosigned
//     checkpoint note (text/plain, at most witness.MaxNoteBytes), with a
//     token of that project (any scope: a peer holds a read token). The
//     note must be signed by this relay's log key with the project's
//     origin and a size no larger than the tree (else 422
//     checkpoint_not_published), and carry at least one cosignature that
//     verifies with the witness key of a peer link of the project (the
//     key the link read from its remote's /v1/witness-key; else 403
//     cosigner_unknown). Each such cosignature is kept
//     (store.Cosignatures: the latest per witness key name). 204.
//
// GET …/log/checkpoint (relay/log.go) serves the checkpoint with the
// cosignatures held on its text (cosignedCheckpoint).

var (
	errCheckpointNotPublished = apierror.New(wire.CodeCheckpointNotPublished)
	errCosignerUnknown        = apierror.New(wire.CodeCosignerUnknown)
)

// cosignatureSkew is how far in the future a cosignature's time may be.
const cosignatureSkew = 10 * time.Minute

// witnessStore is what the witnessing routes read and write.
type witnessStore interface {
	store.Cosignatures
	TreeHead(ctx context.Context, projectID string) (store.TreeHead, error)
	LogKey(ctx context.Context, create func() (string, error)) (string, error)
}

// errNoLogKey: the store holds no log key, so nothing was published.
var errNoLogKey = errors.New("no log key yet")

// handleWitnessKey: GET|HEAD /v1/witness-key.
func (s *Server) handleWitnessKey(w http.ResponseWriter, r *http.Request) {
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	skey, err := witness.StoredKey(r.Context(), s.st, s.publicBase(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	vkey, err := witness.VerifierKey(skey)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	s.writeRepresentation(w, r, "text/plain; charset=utf-8", []byte(vkey+"\n"))
}

// handleCosignaturePost: POST /v1/log/{project_id}/cosignatures.
func (s *Server) handleCosignaturePost(w http.ResponseWriter, r *http.Request) {
	projectID := mux.Vars(r)["project_id"]
	p := principalFrom(r.Context())
	if !p.Operator && p.ProjectID != projectID {
		s.writeError(w, r, errNotFound) // another project's route: nothing is learnt
		return
	}
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, witness.MaxNoteBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if _, err := s.st.GetProject(ctx, projectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	skey, err := s.st.LogKey(ctx, func() (string, error) { return "", errNoLogKey })
	if errors.Is(err, errNoLogKey) {
		s.writeError(w, r, errCheckpointNotPublished)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lk, err := acrtlog.OpenLogKey(skey)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lv := lk.Verifier
	keys, err := s.st.PeerWitnessKeys(ctx, projectID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var witnesses []note.Verifier
	for _, k := range keys {
		if v, err := witness.NewVerifier(k); err == nil {
			witnesses = append(witnesses, v)
		}
	}
	c, text, cosigs, err := witness.OpenCosigned(body, lv, acrtlog.Origin(s.publicBase(r), projectID), witnesses, time.Now(), cosignatureSkew)
	switch {
	case errors.Is(err, witness.ErrNoCosignature):
		s.writeError(w, r, errCosignerUnknown)
		return
	case err != nil:
		s.writeError(w, r, errCheckpointNotPublished)
		return
	}
	head, err := s.st.TreeHead(ctx, projectID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if c.Size > head.Size {
		s.writeError(w, r, errCheckpointNotPublished)
		return
	}
	for _, cs := range cosigs {
		if _, err := s.st.SaveCosignature(ctx, store.Cosignature{ProjectID: projectID, KeyName: cs.Name, Size: c.Size, Root: c.Root,
			Body: text, Line: cs.Line, SignedAt: cs.SignedAt}); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// cosignedCheckpoint returns projectID's checkpoint note (the tree head's,
// signed by the log key) with the cosignatures this relay holds on its
// text appended (witness.WithCosignatures): Config.LogCosignatures unless
// the caller sets one.
func (s *Server) cosignedCheckpoint(ctx context.Context, projectID string, checkpoint []byte) ([]byte, error) {
	held, err := s.st.Cosignatures(ctx, projectID)
	if err != nil {
		return nil, err
	}
	return witness.WithCosignatures(checkpoint, held), nil
}

// This relay as a C2SP tlog-witness of other logs (issue 34):
//
//   - POST /v1/witness/add-checkpoint (C2SP tlog-witness "add-checkpoint"
//     under the submission prefix /v1/witness), no token: the body is
//     "old <N>", up to 63 consistency proof lines, an empty line and the
//     checkpoint. For the logs the operator lists (Config.WitnessLogs,
//     `serve --witness-log '<origin> <vkey>'`), with C2SP's statuses: 404
//     witness_log_unknown (origin not listed), 403
//     witness_signature_invalid (no valid signature by a listed key), 400
//     witness_request_invalid (malformed, or old above the size), 409 with
//     the size last cosigned as text/x.tlog.size when old is not it, 422
//     witness_inconsistent (a proof that fails, a proof with old 0,
//     another root at the same size, a size-0 checkpoint without the
//     empty tree's root); else 200 with this relay's cosignature line
//     (cosignature/v1 by its witness key, GET /v1/witness-key). The
//     latest checkpoint per origin is stored before the answer, by a
//     compare-and-set on its size (store.LogWitnesses SaveWitnessedLog):
//     two processes never cosign two trees of one size. The decision is
//     witness.Add, the one a federation link takes on its remote's
//     checkpoints (federation/witness.go).

var (
	errWitnessRequestInvalid   = apierror.New(wire.CodeWitnessRequestInvalid)
	errWitnessLogUnknown       = apierror.New(wire.CodeWitnessLogUnknown)
	errWitnessSignatureInvalid = apierror.New(wire.CodeWitnessSignatureInvalid)
	errWitnessInconsistent     = apierror.New(wire.CodeWitnessInconsistent)
)

// maxAddCheckpointBytes bounds an add-checkpoint body: the note and 63
// proof lines of 45 bytes.
const maxAddCheckpointBytes = witness.MaxNoteBytes + 4<<10

// handleAddCheckpoint: POST /v1/witness/add-checkpoint.
func (s *Server) handleAddCheckpoint(w http.ResponseWriter, r *http.Request) {
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, maxAddCheckpointBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := witness.ParseAddCheckpoint(body)
	if err != nil {
		s.writeError(w, r, errWitnessRequestInvalid)
		return
	}
	ctx := r.Context()
	res, err := witness.Add(ctx, req, s.cfg.WitnessLogs, s.st, func(ctx context.Context) (note.Signer, error) { return s.witnessSigner(ctx, r) })
	var conflict *witness.ConflictError
	var inconsistent *witness.InconsistentError
	switch {
	case err == nil:
		s.writeBytes(w, r, http.StatusOK, "text/plain; charset=utf-8", []byte(res.Line))
	case errors.Is(err, witness.ErrLogUnknown):
		s.writeError(w, r, errWitnessLogUnknown)
	case errors.Is(err, witness.ErrLogSignature):
		s.writeError(w, r, errWitnessSignatureInvalid)
	case errors.Is(err, witness.ErrBadRequest):
		s.writeError(w, r, errWitnessRequestInvalid)
	case errors.As(err, &conflict):
		s.writeTreeSize(w, conflict.Size)
	case errors.As(err, &inconsistent):
		origin, _, _ := bytes.Cut(req.Note, []byte("\n"))
		s.log.WarnContext(ctx, "witness: checkpoint refused as inconsistent with the one cosigned", "origin", string(origin), "kind", inconsistent.Kind, "cosigned_size", inconsistent.Cosigned.Size)
		s.writeError(w, r, errWitnessInconsistent)
	default:
		s.writeError(w, r, err)
	}
}

// writeTreeSize is C2SP tlog-witness's 409: the size last cosigned for
// the origin, a newline, as text/x.tlog.size.
func (s *Server) writeTreeSize(w http.ResponseWriter, size int64) {
	w.Header().Set("Content-Type", "text/x.tlog.size")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusConflict)
	_, _ = w.Write([]byte(strconv.FormatInt(size, 10) + "\n"))
}

// witnessSigner is this relay's witness signer (the key made in the
// store the first time any process asks).
func (s *Server) witnessSigner(ctx context.Context, r *http.Request) (note.Signer, error) {
	skey, err := witness.StoredKey(ctx, s.st, s.publicBase(r))
	if err != nil {
		return nil, err
	}
	return witness.NewSigner(skey)
}
