package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/handoff"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// apiError is an error with its HTTP status and stable code (wire.Code*).
// Message and Hint are fixed English text that never quote input, secrets
// or data of another project.
type apiError struct {
	Status  int
	Code    string
	Message string
	Hint    string
	Issues  any
}

func (e *apiError) Error() string { return e.Code }

// isUnauthorized reports a 401 of authenticate, whichever hint it carries.
func isUnauthorized(err error) bool {
	return errors.Is(err, errUnauthorized) || errors.Is(err, errTokenRejected)
}

func errf(status int, code, message string) *apiError {
	return &apiError{Status: status, Code: code, Message: message}
}

// withHint returns a copy of e with hint h (the package-level errors below
// are shared and never changed).
func (e *apiError) withHint(h string) *apiError {
	c := *e
	c.Hint = h
	return &c
}

// Every fixed (status, code, message) the relay answers with, defined once.
// Codes whose text depends on the error (a strict-profile reason, an
// event's violations, a handoff transition, a registry input error) are
// built in toAPIError and adminError.
var (
	// Authentication and authorization (spec §10, §11).
	errUnauthorized = errf(http.StatusUnauthorized, wire.CodeUnauthorized, "a valid bearer token is required").withHint("send Authorization: Bearer <token>")
	// errTokenRejected is errUnauthorized for a request that did send a
	// bearer token: the same status, code and message (nothing is learned
	// about why), and a hint that does not ask for what was sent.
	errTokenRejected    = errUnauthorized.withHint("the bearer token sent is not accepted (unknown, revoked or mistyped): check which token the client sends (ACRELAY_TOKEN, --token-file)")
	errNotFound         = errf(http.StatusNotFound, wire.CodeNotFound, "no such resource")
	errProjectToken     = errf(http.StatusForbidden, wire.CodeProjectTokenRequired, "this route needs a project token, not the operator token")
	errOperatorOnly     = errf(http.StatusForbidden, wire.CodeOperatorTokenRequired, "this route needs the operator token")
	errMethodNotAllowed = errf(http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "method not allowed on this resource")

	// Requests: media types, bodies, queries.
	errNotAcceptable       = errf(http.StatusNotAcceptable, wire.CodeRepresentationNotAcceptable, "no acceptable representation").withHint("accept application/vnd.agenttool.correspondence+json or application/json (and, for events, application/atom+xml)")
	errNotAcceptableStream = errf(http.StatusNotAcceptable, wire.CodeRepresentationNotAcceptable, "no acceptable representation").withHint("accept text/event-stream")
	errUnsupportedType     = errf(http.StatusUnsupportedMediaType, wire.CodeContentTypeUnsupported, "the request body must be application/json or application/vnd.agenttool.correspondence+json (charset utf-8 only)")
	errBodyTooLarge        = errf(http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge, "the request body exceeds this route's size limit").withHint("events and envelopes: 65536 bytes; contracts: 262144; admin bodies: 16384")
	errBodyTimeout         = errf(http.StatusRequestTimeout, wire.CodeRequestTimeout, "the request body did not arrive in time")
	errBodyUnreadable      = errf(http.StatusBadRequest, wire.CodeBodyUnreadable, "the request body could not be read")
	errBodyInvalid         = errf(http.StatusBadRequest, wire.CodeBodyInvalid, "the body has unknown members or members of the wrong type")
	errQueryInvalid        = errf(http.StatusBadRequest, wire.CodeQueryInvalid, "the query string is malformed")
	// An unknown or repeated parameter is query_invalid too, as the
	// reference profile names it; the message says which.
	// errQueryParameterUnknown gets a hint naming the allowed parameters.
	errQueryParameterUnknown  = errf(http.StatusBadRequest, wire.CodeQueryInvalid, "unknown query parameter")
	errQueryParameterRepeated = errf(http.StatusBadRequest, wire.CodeQueryInvalid, "a query parameter is repeated")
	errRepositoryIDRequired   = errf(http.StatusBadRequest, wire.CodeRepositoryIDRequired, "repository_id is required on reads")
	// errFeedRepositoryIDRequired: POST /v1/feeds names the repository a
	// capability reads.
	errFeedRepositoryIDRequired = errf(http.StatusBadRequest, wire.CodeRepositoryIDRequired, "repository_id is required: a feed capability reads one repository")
	errRepositoryIDInvalid      = errf(http.StatusBadRequest, wire.CodeRepositoryIDInvalid, "repository_id is not a valid opaque id")
	errThreadIDInvalid          = errf(http.StatusBadRequest, wire.CodeThreadIDInvalid, "thread_id is not a valid opaque id")
	errPathInvalid              = errf(http.StatusBadRequest, wire.CodePathInvalid, "path is not a valid path prefix (spec §4)")
	errAfterNotSeq              = errf(http.StatusBadRequest, wire.CodeAfterInvalid, "after must be a received_seq: a decimal string without leading zeros")
	errAfterNotVersion          = errf(http.StatusBadRequest, wire.CodeAfterInvalid, "after must be a version number: a decimal string without leading zeros")
	errAfterNotListID           = errf(http.StatusBadRequest, wire.CodeAfterInvalid, "after must be the id that ended the previous page")
	errAfterNotHandoffID        = errf(http.StatusBadRequest, wire.CodeAfterInvalid, "after must be the handoff id that ended the previous page")
	errLimitInvalid             = errf(http.StatusBadRequest, wire.CodeLimitInvalid, "limit must be an integer from 1 to 200")

	// Appending events (spec §3, §6, §7) and reading projections (§8, §9).
	errSignatureEncoding     = errf(http.StatusBadRequest, wire.CodeSignatureEncodingInvalid, "signature.value_b64url is not 86 characters of canonical unpadded base64url")
	errEventIDMismatch       = errf(http.StatusBadRequest, wire.CodeEventIDMismatch, "event_id does not match the signed event").withHint("event_id = sha256: + hex(SHA-256(JCS(event without event_id)))")
	errProjectMismatch       = errf(http.StatusForbidden, wire.CodeProjectMismatch, "project_id is not the project of the bearer token")
	errSenderNotActive       = errf(http.StatusForbidden, wire.CodeSenderOrSigningKeyNotActive, "the sender identity or signing key is not active in this project")
	errSignatureInvalid      = errf(http.StatusForbidden, wire.CodeSignatureInvalid, "the signature does not verify under the sender's signing key")
	errEventIDCollision      = errf(http.StatusConflict, wire.CodeEventIDCollision, "an event with this id is stored with different bytes")
	errAppendUnavailable     = errf(http.StatusServiceUnavailable, wire.CodeCorrespondenceAppendUnavailable, "the event log cannot accept events right now").withHint("retry the same exact event later; it is idempotent")
	errProjectionUnavailable = errf(http.StatusServiceUnavailable, wire.CodeCorrespondenceProjectionUnavailable,
		"the claims projection cannot be read right now").withHint("retry later; an empty answer is never served in its place")
	errReadUnavailable = errf(http.StatusServiceUnavailable, wire.CodeCorrespondenceReadUnavailable,
		"the event log cannot be read right now").withHint("retry later with the same cursor")

	// The wake stream (spec §9). errTooManyStreams refuses a stream beyond
	// the per-token cap: one read token must not be able to hold the
	// process's file descriptors.
	errKeysInvalid        = errf(http.StatusBadRequest, wire.CodeKeysInvalid, "keys must be correspondence")
	errIdentityIDRequired = errf(http.StatusBadRequest, wire.CodeIdentityIDRequired, "identity_id is required")
	errIdentityIDInvalid  = errf(http.StatusBadRequest, wire.CodeIdentityIDInvalid, "identity_id is not a canonical lowercase UUID")
	// errIdentityNotFound: the wake stream's identity_id is no identity of
	// the bearer's project (another project's looks the same). Its own
	// code, so a client tells it from a relay without a wake stream.
	errIdentityNotFound  = errf(http.StatusNotFound, wire.CodeIdentityNotFound, "identity_id is no identity of this project").withHint("use the identity_id of an active identity of the token's project")
	errIdentityNotActive = errf(http.StatusForbidden, wire.CodeIdentityNotActive, "the identity is not active in this project")
	errTooManyStreams    = errf(http.StatusTooManyRequests, wire.CodeTooManyStreams, "this token has too many open wake streams").withHint("close streams you no longer read; one per identity is enough")

	// Registry administration (spec §10).
	errProjectIDRequired = errf(http.StatusBadRequest, wire.CodeProjectIDRequired, "with the operator token, name the project: ?project_id=")
	errAlreadyExists     = errf(http.StatusConflict, wire.CodeAlreadyExists, "a resource with this id already exists")

	// Handoff contracts (spec/handoff-contract-1.md "HTTP").
	errHandoffIDInvalid     = errf(http.StatusBadRequest, wire.CodeHandoffIDInvalid, "the handoff id in the URL is not a canonical lowercase UUID")
	errHandoffIDMismatch    = errf(http.StatusBadRequest, wire.CodeHandoffIDMismatch, "handoffId in the body is not the handoff id in the URL")
	errTransitionBody       = errf(http.StatusBadRequest, wire.CodeTransitionInvalid, `the body must be {"to": state, "result"?: object}`)
	errToStateInvalid       = errf(http.StatusBadRequest, wire.CodeStateInvalid, "to is not a contract state").withHint("proposed, accepted, running, blocked, verifying, succeeded, failed or cancelled")
	errStateInvalid         = errf(http.StatusBadRequest, wire.CodeStateInvalid, "state is not a contract state").withHint("proposed, accepted, running, blocked, verifying, succeeded, failed or cancelled")
	errAssigneeInvalid      = errf(http.StatusBadRequest, wire.CodeAssigneeInvalid, "assignee must be a non-empty assignee id")
	errHandoffExists        = errf(http.StatusConflict, wire.CodeHandoffExists, "a contract with this handoffId exists with other content; its terms never change").withHint("move it with POST /v1/handoffs/{handoffId}/transitions")
	errIdempotencyKeyReused = errf(http.StatusConflict, wire.CodeIdempotencyKeyReused, "this idempotencyKey was used for a contract with other content")
	errVersionLimit         = errf(http.StatusConflict, wire.CodeVersionLimitReached, "this contract has reached its limit of 1000 versions").withHint("create a new contract for further work")
	errPreconditionRequired = errf(http.StatusPreconditionRequired, wire.CodePreconditionRequired, "a transition needs If-Match with the contract's current ETag").withHint("GET the contract and send its ETag in If-Match")
	errHandoffAbsent        = errf(http.StatusPreconditionFailed, wire.CodePreconditionFailed, "If-Match: no such contract exists").withHint("PUT without If-Match to create it")
	errHandoffPresent       = errf(http.StatusPreconditionFailed, wire.CodePreconditionFailed, "If-None-Match: the contract already exists").withHint("GET it, or PUT without If-None-Match to replay its creation")
	errPreconditionFailed   = errf(http.StatusPreconditionFailed, wire.CodePreconditionFailed, "If-Match does not match the contract's current ETag").withHint("GET the contract again and retry with its ETag")
	// errRepresentationChanged answers a GET or HEAD whose If-Match names
	// none of the representation's current ETag.
	errRepresentationChanged = errf(http.StatusPreconditionFailed, wire.CodePreconditionFailed,
		"If-Match does not match the representation's current ETag").withHint("GET it again without If-Match for the current bytes and ETag")

	// The relay itself.
	errRequestCancelled = errf(http.StatusServiceUnavailable, wire.CodeRequestCancelled, "the request ended before it could be answered").withHint("retry")
	errUnavailable      = errf(http.StatusServiceUnavailable, wire.CodeUnavailable, "the relay's store is unavailable").withHint("retry later")
	errInternal         = errf(http.StatusInternalServerError, wire.CodeInternalError, "internal error")
)

// The 403 scope_insufficient of each scope, naming the scope the route
// needs ("this request needs the append scope"): the token's holder then
// knows which token to mint (spec §10 scopes are independent).
var (
	errScopeRead   = errScopeFor(store.ScopeRead)
	errScopeAppend = errScopeFor(store.ScopeAppend)
	errScopeAdmin  = errScopeFor(store.ScopeAdmin)
)

func errScopeFor(scope string) *apiError {
	return errf(http.StatusForbidden, wire.CodeScopeInsufficient, "this request needs the "+scope+" scope").
		withHint("use a token of this project with the " + scope + " scope (POST /v1/admin/projects/{project_id}/tokens)")
}

// errScope is the 403 scope_insufficient naming scope, one of the three
// scopes of spec §10.
func errScope(scope string) *apiError {
	switch scope {
	case store.ScopeRead:
		return errScopeRead
	case store.ScopeAppend:
		return errScopeAppend
	case store.ScopeAdmin:
		return errScopeAdmin
	}
	panic("relay: no scope " + scope) // a route names a scope that does not exist
}

// contractInvalid is 422 contract_invalid with the schema violations.
func contractInvalid(issues []handoff.Issue) *apiError {
	return &apiError{Status: http.StatusUnprocessableEntity, Code: wire.CodeContractInvalid, Message: "the contract violates the handoff contract schema", Issues: issues}
}

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
			msg = errSignatureEncoding.Message
		}
		return &apiError{Status: http.StatusBadRequest, Code: ve.Code, Message: msg, Issues: ve.Issues}
	}
	var te *handoff.TransitionError
	if errors.As(err, &te) { // spec/handoff-contract-1.md: 409 naming the current state
		return errf(http.StatusConflict, te.Code, strings.TrimPrefix(te.Error(), te.Code+": "))
	}
	// Before the context case: an append cut short by its context is
	// correspondence_append_unavailable (retry the same event), as is one
	// the store could not take. ingest.Refusal is the one table of append
	// codes, shared with Matrix room submissions.
	if _, code, ok := ingest.Refusal(err); ok {
		if ae := appendRefusals[code]; ae != nil {
			return ae
		}
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client left or its deadline passed: not our fault, not an Error.
		s.log.DebugContext(r.Context(), "request ended before its answer", "path", logPath(r), "err", err)
		return errRequestCancelled
	case errors.Is(err, store.ErrHandoffExists):
		return errHandoffExists
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return errIdempotencyKeyReused
	case errors.Is(err, store.ErrVersionConflict):
		return errPreconditionFailed
	case errors.Is(err, store.ErrExists):
		return errAlreadyExists
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case errors.Is(err, store.ErrUnavailable) && correspondenceRead(r):
		return errReadUnavailable
	case errors.Is(err, store.ErrUnavailable):
		return errUnavailable
	}
	s.log.ErrorContext(r.Context(), "unhandled error", "method", r.Method, "path", logPath(r), "err", err)
	return errInternal
}

// correspondenceRead reports whether r is a GET or HEAD of a correspondence
// route (spec §9), whose store failures are correspondence_read_unavailable.
func correspondenceRead(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(r.URL.Path, "/v1/correspondence/")
}

// appendRefusals gives the message of each fixed code ingest.Refusal
// returns (store.ErrUnavailable keeps its place in toAPIError's switch).
var appendRefusals = map[string]*apiError{
	wire.CodeCorrespondenceAppendUnavailable: errAppendUnavailable,
	wire.CodeBodyTooLarge:                    errBodyTooLarge,
	wire.CodeProjectMismatch:                 errProjectMismatch,
	wire.CodeSignatureEncodingInvalid:        errSignatureEncoding,
	wire.CodeSignatureInvalid:                errSignatureInvalid,
	wire.CodeEventIDMismatch:                 errEventIDMismatch,
	wire.CodeSenderOrSigningKeyNotActive:     errSenderNotActive,
	wire.CodeEventIDCollision:                errEventIDCollision,
}

// writeError ends a request with the error's JSON body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.toAPIError(r, err)
	noteErrorCode(r, ae.Code) // acrelay_appends_total (relay/metrics.go)
	if ae.Status >= 500 && ae != errInternal {
		s.log.WarnContext(r.Context(), "request failed", "path", logPath(r), "code", ae.Code, "err", err)
	}
	if ae.Status >= 400 && ae.Status < 500 {
		s.logRefusal(r, ae)
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="acrelay"`)
	}
	if ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	body := wire.Error{Error: ae.Code, Message: ae.Message, Hint: ae.Hint}
	if ae.Issues != nil {
		// An empty list is left out, as omitempty left it out before.
		if b, err := marshalJSON(ae.Issues); err == nil && !emptyJSON(b) {
			body.Issues = b
		}
	}
	s.writeJSON(w, r, ae.Status, "application/json", body)
}

// logRefusal leaves a trace of a refused request (4xx): method, route
// template (logPath: a path may hold a feed capability), status and code,
// and the token id and project when the bearer was recognised; never the
// body, the token or the query. 401 and 403 are Info: a token refused or
// short of a scope is what an operator looks for when an agent "cannot
// post", and in a healthy deployment they are rare. The other refusals
// (400, 404, 409, 412, …) are Debug: they are the client's to fix, the
// client sees the code and message in the body, and a busy or buggy
// client could make them most of an Info log.
func (s *Server) logRefusal(r *http.Request, ae *apiError) {
	level := slog.LevelDebug
	if ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden {
		level = slog.LevelInfo
	}
	ctx := r.Context()
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", logPath(r)),
		slog.Int("status", ae.Status), slog.String("code", ae.Code)}
	if p := principalFrom(ctx); p.TokenID != "" {
		attrs = append(attrs, slog.String("token_id", p.TokenID), slog.String("project_id", p.ProjectID))
	} else if p.Operator {
		attrs = append(attrs, slog.Bool("operator", true))
	}
	s.log.LogAttrs(ctx, level, "request refused", attrs...)
}

func emptyJSON(b []byte) bool {
	switch string(b) {
	case "[]", "{}", "null", `""`:
		return true
	}
	return false
}
