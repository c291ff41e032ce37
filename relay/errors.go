package relay

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/handoff"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
)

// apiError is an error with its HTTP status and stable code. Message and
// Hint are fixed English text that never quote input, secrets or data of
// another project.
type apiError struct {
	Status  int
	Code    string
	Message string
	Hint    string
	Issues  any
}

func (e *apiError) Error() string { return e.Code }

func errf(status int, code, message string) *apiError {
	return &apiError{Status: status, Code: code, Message: message}
}

func (e *apiError) withHint(h string) *apiError { e.Hint = h; return e }

// Errors shared by several handlers.
var (
	errUnauthorized      = errf(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required").withHint("send Authorization: Bearer <token>")
	errScope             = errf(http.StatusForbidden, "scope_insufficient", "the token lacks the scope this request needs")
	errNotFound          = errf(http.StatusNotFound, "not_found", "no such resource")
	errProjectToken      = errf(http.StatusForbidden, "project_token_required", "this route needs a project token, not the operator token")
	errOperatorOnly      = errf(http.StatusForbidden, "operator_token_required", "this route needs the operator token")
	errNotAcceptable     = errf(http.StatusNotAcceptable, "not_acceptable", "no acceptable representation").withHint("accept application/vnd.agenttool.correspondence+json or application/json (and, for events, application/atom+xml)")
	errUnsupportedType   = errf(http.StatusUnsupportedMediaType, "content_type_unsupported", "the request body must be application/json or application/vnd.agenttool.correspondence+json (charset utf-8 only)")
	errBodyTooLarge      = errf(http.StatusRequestEntityTooLarge, "body_too_large", "the request body exceeds this route's size limit").withHint("events and envelopes: 65536 bytes; contracts: 262144; admin bodies: 16384")
	errAppendUnavailable = errf(http.StatusServiceUnavailable, "correspondence_append_unavailable", "the event log cannot accept events right now").withHint("retry the same exact event later; it is idempotent")
	errUnavailable       = errf(http.StatusServiceUnavailable, "unavailable", "the relay's store is unavailable").withHint("retry later")
	errInternal          = errf(http.StatusInternalServerError, "internal_error", "internal error")
)

// toAPIError is the only table from errors to (status, stable code).
// Unknown errors become 500 and are logged once, here.
func (s *Server) toAPIError(r *http.Request, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var pe *canonicaljson.ProfileError
	if errors.As(err, &pe) {
		return errf(http.StatusBadRequest, pe.Reason, "the JSON is outside the strict profile: "+pe.Detail)
	}
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		msg := "the event is invalid"
		if ve.Code == correspondence.CodeSignatureEncodingInvalid {
			msg = "signature.value_b64url is not 86 characters of canonical unpadded base64url"
		}
		return &apiError{Status: http.StatusBadRequest, Code: ve.Code, Message: msg, Issues: ve.Issues}
	}
	var te *handoff.TransitionError
	if errors.As(err, &te) { // spec/handoff-contract-1.md: 409 naming the current state
		return errf(http.StatusConflict, te.Code, strings.TrimPrefix(te.Error(), te.Code+": "))
	}
	switch {
	// Before the context case: an append cut short by its context is
	// correspondence_append_unavailable (retry the same event), as is one
	// the store could not take.
	case errors.Is(err, ingest.ErrAppendUnavailable):
		return errAppendUnavailable
	case errors.Is(err, ingest.ErrEventTooLarge):
		return errBodyTooLarge
	case errors.Is(err, ingest.ErrProjectMismatch):
		return errf(http.StatusForbidden, "project_mismatch", "project_id is not the project of the bearer token")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client left or its deadline passed: not our fault, not an Error.
		s.log.DebugContext(r.Context(), "request ended before its answer", "path", r.URL.Path, "err", err)
		return errf(http.StatusServiceUnavailable, "request_cancelled", "the request ended before it could be answered").withHint("retry")
	case errors.Is(err, store.ErrHandoffExists):
		return errf(http.StatusConflict, "handoff_exists", "a contract with this handoffId exists with other content; its terms never change").withHint("move it with POST /v1/handoffs/{handoffId}/transitions")
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return errf(http.StatusConflict, "idempotency_key_reused", "this idempotencyKey was used for a contract with other content")
	case errors.Is(err, store.ErrVersionConflict):
		return errPreconditionFailed
	case errors.Is(err, correspondence.ErrSignatureEncoding):
		return errf(http.StatusBadRequest, "signature_encoding_invalid", "signature.value_b64url is not 86 characters of canonical unpadded base64url")
	case errors.Is(err, correspondence.ErrSignatureInvalid):
		return errf(http.StatusForbidden, "signature_invalid", "the signature does not verify under the sender's signing key")
	case errors.Is(err, correspondence.ErrEventIDMismatch):
		return errf(http.StatusBadRequest, "event_id_mismatch", "event_id does not match the signed event").withHint("event_id = sha256: + hex(SHA-256(JCS(event without event_id)))")
	case errors.Is(err, store.ErrSenderNotActive):
		return errf(http.StatusForbidden, "sender_or_signing_key_not_active", "the sender identity or signing key is not active in this project")
	case errors.Is(err, store.ErrEventIDCollision):
		return errf(http.StatusConflict, "event_id_collision", "an event with this id is stored with different bytes")
	case errors.Is(err, store.ErrExists):
		return errf(http.StatusConflict, "already_exists", "a resource with this id already exists")
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case errors.Is(err, store.ErrUnavailable):
		return errUnavailable
	}
	s.log.ErrorContext(r.Context(), "unhandled error", "method", r.Method, "path", r.URL.Path, "err", err)
	return errInternal
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	Issues  any    `json:"issues,omitempty"`
}

// writeError ends a request with the error's JSON body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.toAPIError(r, err)
	if ae.Status >= 500 && ae != errInternal {
		s.log.WarnContext(r.Context(), "request failed", "path", r.URL.Path, "code", ae.Code, "err", err)
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="acrelay"`)
	}
	if ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	s.writeJSON(w, r, ae.Status, "application/json", errorBody{Error: ae.Code, Message: ae.Message, Hint: ae.Hint, Issues: ae.Issues})
}
