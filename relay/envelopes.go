package relay

import (
	"errors"
	"net/http"

	"github.com/acrelay/acrelay/envelope"
	"github.com/acrelay/acrelay/wire"
)

// envelopeJSON is the answer of POST /v1/envelopes/canonicalize
// (spec/predicate-envelope-1.md "Surfaces"):
// hash the uppercase SHA-256, digest "sha256:<lowercase>". canonical is a
// JSON string holding the exact canonical bytes, as `acrelay envelope hash
// --json` prints it, so clients can re-hash it without re-serializing.
type envelopeJSON struct {
	Canonical string `json:"canonical"`
	Hash      string `json:"hash"`
	Digest    string `json:"digest"`
}

type envelopeRefusedJSON struct {
	Error   string `json:"error"`
	Reason  string `json:"reason"`
	Pointer string `json:"pointer,omitempty"`
	Message string `json:"message"`
}

// handleEnvelopeCanonicalize canonicalizes and hashes a predicate envelope
// for any project token (any scope). Strict-JSON refusals answer 400 with
// their reason code; envelope refusals 422 envelope_refused with a reason.
func (s *Server) handleEnvelopeCanonicalize(w http.ResponseWriter, r *http.Request) {
	if principalFrom(r.Context()).Operator {
		s.writeError(w, r, errProjectToken)
		return
	}
	if !acceptableBody(r) {
		s.writeError(w, r, errUnsupportedType)
		return
	}
	raw, err := readBody(w, r, MaxEventBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	canonical, hash, err := envelope.Canonicalize(raw)
	var re *envelope.RefusalError
	if errors.As(err, &re) {
		// The spec's own body (reason, pointer); status and message from
		// wire's error table.
		row, _ := wire.LookupError(wire.CodeEnvelopeRefused)
		msg := row.Message
		if re.Detail != "" {
			msg += ": " + re.Detail
		}
		s.writeJSON(w, r, row.Status, mediaJSON, envelopeRefusedJSON{Error: row.Code, Reason: re.Reason, Pointer: re.Pointer, Message: msg})
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, mediaJSON, envelopeJSON{Canonical: string(canonical), Hash: hash, Digest: envelope.Digest(hash)})
}
