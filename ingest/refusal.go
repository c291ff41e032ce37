package ingest

import (
	"errors"
	"net/http"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Refusal returns the HTTP status and stable code (wire.Code*) that
// POST /v1/correspondence/events answers for an error of Append, so every
// path into the log (HTTP, a Matrix room submission) refuses an event with
// the same code. ok is false for an error Append does not document; the
// relay answers those 500 internal_error.
func Refusal(err error) (status int, code string, ok bool) {
	var pe *canonicaljson.ProfileError
	if errors.As(err, &pe) {
		return http.StatusBadRequest, pe.Reason, true
	}
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		return http.StatusBadRequest, ve.Code, true
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.status, r.code, true
		}
	}
	return http.StatusInternalServerError, wire.CodeInternalError, false
}

// refusals is ordered: an append cut short by its context or refused by
// the store is correspondence_append_unavailable, whatever it wraps.
var refusals = []struct {
	err    error
	status int
	code   string
}{
	{ErrAppendUnavailable, http.StatusServiceUnavailable, wire.CodeCorrespondenceAppendUnavailable},
	{ErrEventTooLarge, http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge},
	{ErrProjectMismatch, http.StatusForbidden, wire.CodeProjectMismatch},
	{correspondence.ErrSignatureEncoding, http.StatusBadRequest, wire.CodeSignatureEncodingInvalid},
	{correspondence.ErrSignatureInvalid, http.StatusForbidden, wire.CodeSignatureInvalid},
	{correspondence.ErrEventIDMismatch, http.StatusBadRequest, wire.CodeEventIDMismatch},
	{store.ErrSenderNotActive, http.StatusForbidden, wire.CodeSenderOrSigningKeyNotActive},
	{store.ErrEventIDCollision, http.StatusConflict, wire.CodeEventIDCollision},
	{store.ErrUnavailable, http.StatusServiceUnavailable, wire.CodeUnavailable},
}
