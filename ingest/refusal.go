package ingest

import (
	"errors"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Refusal returns the stable code (a row of wire's error table, whose
// status the caller reads there: wire.ErrorStatus) that
// POST /v1/correspondence/events answers for an error of Append, so every
// path into the log (HTTP, a Matrix room submission, a federation link)
// refuses an event with the same code. ok is false for an error Append
// does not document (the relay answers those 500 internal_error).
//
// ingest chooses codes, never HTTP statuses: it does not import net/http.
func Refusal(err error) (code string, ok bool) {
	var pe *canonicaljson.ProfileError
	if errors.As(err, &pe) {
		return pe.Reason, true
	}
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		return ve.Code, true
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.code, true
		}
	}
	return wire.CodeInternalError, false
}

// refusals is ordered: an append cut short by its context or refused by
// the store is correspondence_append_unavailable, whatever it wraps.
var refusals = []struct {
	err  error
	code string
}{
	{ErrAppendUnavailable, wire.CodeCorrespondenceAppendUnavailable},
	{ErrEventTooLarge, wire.CodeBodyTooLarge},
	{ErrProjectMismatch, wire.CodeProjectMismatch},
	{correspondence.ErrSignatureEncoding, wire.CodeSignatureEncodingInvalid},
	{correspondence.ErrSignatureInvalid, wire.CodeSignatureInvalid},
	{correspondence.ErrEventIDMismatch, wire.CodeEventIDMismatch},
	{store.ErrSenderNotActive, wire.CodeSenderOrSigningKeyNotActive},
	{store.ErrEventIDCollision, wire.CodeEventIDCollision},
	{store.ErrUnavailable, wire.CodeUnavailable},
}
