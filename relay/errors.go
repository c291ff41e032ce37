package relay

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/handoff"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// apiError is an error answer (internal/apierror.Error): its status comes
// from wire's error table, its message and hint from the table unless the
// variable below says more precisely.
type apiError = apierror.Error

// isUnauthorized reports a 401 of authenticate, whichever hint it carries.
func isUnauthorized(err error) bool {
	return errors.Is(err, errUnauthorized) || errors.Is(err, errTokenRejected)
}

// The relay's answers, each a row of wire's error table (status, code,
// default message and hint) or that row with a more precise message or
// hint. Codes whose text depends on the error (a strict-profile reason, an
// event's violations, a handoff transition, a registry input error) are
// built in toAPIError and adminError.
var (
	// Authentication and authorization (spec §10, §11).
	errUnauthorized = apierror.New(wire.CodeUnauthorized)
	// errTokenRejected is errUnauthorized for a request that did send a
	// bearer token: the same status, code and message (nothing is learned
	// about why), and a hint that does not ask for what was sent.
	errTokenRejected    = errUnauthorized.WithHint("the bearer token sent is not accepted (unknown, revoked or mistyped): check which token the client sends (ACRELAY_TOKEN, --token-file)")
	errNotFound         = apierror.New(wire.CodeNotFound)
	errProjectToken     = apierror.New(wire.CodeProjectTokenRequired)
	errOperatorOnly     = apierror.New(wire.CodeOperatorTokenRequired)
	errMethodNotAllowed = apierror.New(wire.CodeMethodNotAllowed)

	// Requests: media types, bodies, queries.
	errNotAcceptable       = apierror.New(wire.CodeRepresentationNotAcceptable)
	errNotAcceptableStream = apierror.New(wire.CodeRepresentationNotAcceptable).WithHint("accept text/event-stream")
	errUnsupportedType     = apierror.New(wire.CodeContentTypeUnsupported)
	errBodyTooLarge        = apierror.New(wire.CodeBodyTooLarge)
	errBodyTimeout         = apierror.New(wire.CodeRequestTimeout)
	errBodyUnreadable      = apierror.New(wire.CodeBodyUnreadable)
	errBodyInvalid         = apierror.New(wire.CodeBodyInvalid)
	errQueryInvalid        = apierror.New(wire.CodeQueryInvalid)
	// An unknown or repeated parameter is query_invalid too, as the
	// reference profile names it; the message says which.
	// errQueryParameterUnknown gets a hint naming the allowed parameters.
	errQueryParameterUnknown  = apierror.New(wire.CodeQueryInvalid).Say("unknown query parameter")
	errQueryParameterRepeated = apierror.New(wire.CodeQueryInvalid).Say("a query parameter is repeated")
	errRepositoryIDRequired   = apierror.New(wire.CodeRepositoryIDRequired)
	// errFeedRepositoryIDRequired: POST /v1/feeds names the repository a
	// capability reads.
	errFeedRepositoryIDRequired = apierror.New(wire.CodeRepositoryIDRequired).Say("repository_id is required: a feed capability reads one repository")
	errRepositoryIDInvalid      = apierror.New(wire.CodeRepositoryIDInvalid)
	errThreadIDInvalid          = apierror.New(wire.CodeThreadIDInvalid)
	errPathInvalid              = apierror.New(wire.CodePathInvalid)
	errAfterNotSeq              = apierror.New(wire.CodeAfterInvalid)
	errAfterNotVersion          = apierror.New(wire.CodeAfterInvalid).Say("after must be a version number: a decimal string without leading zeros")
	errAfterNotListID           = apierror.New(wire.CodeAfterInvalid).Say("after must be the id that ended the previous page")
	errAfterNotHandoffID        = apierror.New(wire.CodeAfterInvalid).Say("after must be the handoff id that ended the previous page")
	errLimitInvalid             = apierror.New(wire.CodeLimitInvalid)

	// Reading projections (spec §8, §9). An append's refusals are the codes
	// ingest.Refusal names, answered as the table says (toAPIError).
	errProjectionUnavailable = apierror.New(wire.CodeCorrespondenceProjectionUnavailable)
	errReadUnavailable       = apierror.New(wire.CodeCorrespondenceReadUnavailable)

	// The wake stream (spec §9). errTooManyStreams refuses a stream beyond
	// the per-token cap: one read token must not be able to hold the
	// process's file descriptors.
	errKeysInvalid        = apierror.New(wire.CodeKeysInvalid)
	errIdentityIDRequired = apierror.New(wire.CodeIdentityIDRequired)
	errIdentityIDInvalid  = apierror.New(wire.CodeIdentityIDInvalid)
	// errIdentityNotFound: the wake stream's identity_id is no identity of
	// the bearer's project (another project's looks the same). Its own
	// code, so a client tells it from a relay without a wake stream.
	errIdentityNotFound  = apierror.New(wire.CodeIdentityNotFound)
	errIdentityNotActive = apierror.New(wire.CodeIdentityNotActive)
	errTooManyStreams    = apierror.New(wire.CodeTooManyStreams)

	// Registry administration (spec §10).
	errProjectIDRequired = apierror.New(wire.CodeProjectIDRequired)
	errAlreadyExists     = apierror.New(wire.CodeAlreadyExists)

	// Handoff contracts (spec/handoff-contract-1.md "HTTP").
	errHandoffIDInvalid     = apierror.New(wire.CodeHandoffIDInvalid)
	errHandoffIDMismatch    = apierror.New(wire.CodeHandoffIDMismatch)
	errTransitionBody       = apierror.New(wire.CodeTransitionInvalid)
	errToStateInvalid       = apierror.New(wire.CodeStateInvalid).Say("to is not a contract state").WithHint("proposed, accepted, running, blocked, verifying, succeeded, failed or cancelled")
	errStateInvalid         = apierror.New(wire.CodeStateInvalid)
	errAssigneeInvalid      = apierror.New(wire.CodeAssigneeInvalid)
	errHandoffExists        = apierror.New(wire.CodeHandoffExists)
	errIdempotencyKeyReused = apierror.New(wire.CodeIdempotencyKeyReused)
	errVersionLimit         = apierror.New(wire.CodeVersionLimitReached)
	errPreconditionRequired = apierror.New(wire.CodePreconditionRequired)
	errHandoffAbsent        = apierror.New(wire.CodePreconditionFailed).Say("If-Match: no such contract exists").WithHint("PUT without If-Match to create it")
	errHandoffPresent       = apierror.New(wire.CodePreconditionFailed).Say("If-None-Match: the contract already exists").WithHint("GET it, or PUT without If-None-Match to replay its creation")
	errPreconditionFailed   = apierror.New(wire.CodePreconditionFailed)
	// errRepresentationChanged answers a GET or HEAD whose If-Match names
	// none of the representation's current ETag.
	errRepresentationChanged = apierror.New(wire.CodePreconditionFailed).Say("If-Match does not match the representation's current ETag").WithHint("GET it again without If-Match for the current bytes and ETag")

	// The relay itself.
	// request_cancelled, unavailable and not_found of the store's
	// sentinels come from apierror.From.
	errUnavailable = apierror.New(wire.CodeUnavailable)
	errInternal    = apierror.Internal
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
	return apierror.New(wire.CodeScopeInsufficient).Say("this request needs the " + scope + " scope").
		WithHint("use a token of this project with the " + scope + " scope (POST /v1/admin/projects/{project_id}/tokens)")
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
	return apierror.New(wire.CodeContractInvalid).WithIssues(issues)
}

// toAPIError maps err to its answer; the statuses are wire's error table's
// (apierror). Unknown errors become 500 and are logged once, here.
func (s *Server) toAPIError(r *http.Request, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var pe *canonicaljson.ProfileError
	if errors.As(err, &pe) {
		return apierror.Lower(pe.Reason, http.StatusBadRequest).Say("the JSON is outside the strict profile: " + pe.Detail)
	}
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		return apierror.Lower(ve.Code, http.StatusBadRequest).WithIssues(ve.Issues)
	}
	var te *handoff.TransitionError
	if errors.As(err, &te) { // spec/handoff-contract-1.md: 409 naming the current state
		return apierror.Lower(te.Code, http.StatusConflict).Say(strings.TrimPrefix(te.Error(), te.Code+": "))
	}
	// Before the context case: an append cut short by its context is
	// correspondence_append_unavailable (retry the same event), as is one
	// the store could not take. ingest.Refusal is the one list of append
	// codes, shared with Matrix room submissions; store.ErrUnavailable
	// (unavailable) keeps its place in the switch below.
	if code, ok := ingest.Refusal(err); ok && code != wire.CodeUnavailable {
		return apierror.Lower(code, http.StatusInternalServerError)
	}
	if ae, ok := apierror.From(err); ok && ae.Code == wire.CodeRequestCancelled {
		// The client left or its deadline passed: not our fault, not an Error.
		s.log.DebugContext(r.Context(), "request ended before its answer", "path", logPath(r), "err", err)
		return ae
	}
	switch {
	case errors.Is(err, store.ErrHandoffExists):
		return errHandoffExists
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return errIdempotencyKeyReused
	case errors.Is(err, store.ErrVersionConflict):
		return errPreconditionFailed
	case errors.Is(err, store.ErrExists):
		return errAlreadyExists
	case errors.Is(err, store.ErrUnavailable) && correspondenceRead(r):
		return errReadUnavailable
	}
	ae, ok := apierror.From(err) // store.ErrNotFound, store.ErrUnavailable
	if !ok {
		s.log.ErrorContext(r.Context(), "unhandled error", "method", r.Method, "path", logPath(r), "err", err)
	}
	return ae
}

// correspondenceRead reports whether r is a GET or HEAD of a correspondence
// route (spec §9), whose store failures are correspondence_read_unavailable.
func correspondenceRead(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(r.URL.Path, "/v1/correspondence/")
}

// writeError ends a request with the error's JSON body (apierror.Write:
// the one writer of the relay, its hub and its web view).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.toAPIError(r, err)
	noteErrorCode(r, ae.Code) // acrelay_appends_total (relay/metrics.go)
	if ae.Status >= 500 && ae != errInternal {
		s.log.WarnContext(r.Context(), "request failed", "path", logPath(r), "code", ae.Code, "err", err)
	}
	if ae.Status >= 400 && ae.Status < 500 {
		s.logRefusal(r, ae)
	}
	apierror.Write(w, r, ae)
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
