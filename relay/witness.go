package relay

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"golang.org/x/mod/sumdb/note"

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
	errCheckpointNotPublished = errf(http.StatusUnprocessableEntity, wire.CodeCheckpointNotPublished,
		"the note is not a checkpoint this relay published for the project").withHint("a C2SP checkpoint signed by this relay's log key (GET /v1/log-key), of the project's origin, no larger than its tree")
	errCosignerUnknown = errf(http.StatusForbidden, wire.CodeCosignerUnknown,
		"no cosignature on the note verifies with the witness key of a peer link of the project")
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
