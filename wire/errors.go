package wire

import "slices"

// ErrorCode is one row of the relay's error table: a stable code, the
// HTTP status every answer with that code carries, and the fixed English
// message (and hint) it carries unless the answer names a more precise
// one. Messages and hints never quote input, secrets or another project's
// data.
type ErrorCode struct {
	Code    string // the "error" member (errcode for a Matrix code)
	Status  int    // the HTTP status, 400–599
	Message string // the default "message"
	Hint    string // the default "hint", often empty
}

// Codes of the web view's forms (/ui, docs/http.md "Web view"); the view
// renders them as HTML pages, not JSON.
const (
	CodeFormInvalid      = "form_invalid"       // 400: the form body could not be read
	CodeCrossSiteRefused = "cross_site_refused" // 403: a form posted from another origin
	CodeFormTokenInvalid = "form_token_invalid" // 403: the form's anti-forgery token is stale or not this session's
)

// Codes of the Matrix room bindings, /v1/admin/projects/{project_id}/matrix
// (docs/matrix.md).
const (
	CodeMatrixNotConfigured         = "matrix_not_configured"         // 404: no homeserver configured
	CodeRoomIDInvalid               = "room_id_invalid"               // 400
	CodeUserIDInvalid               = "user_id_invalid"               // 400
	CodeRoomChoiceInvalid           = "room_choice_invalid"           // 400: neither or both of room_id and create
	CodeMatrixHomeserverFailed      = "matrix_homeserver_failed"      // 502: the homeserver did not create the room
	CodeMatrixEncryptionUnavailable = "matrix_encryption_unavailable" // 422: an encrypted room and a build without goolm
)

// Matrix error codes (errcode) of the application-service API the
// homeserver calls (Matrix spec, "Application Service API"), answered as
// {"errcode", "error"} (MatrixError), not as Error.
const (
	MatrixCodeUnauthorized = "M_UNAUTHORIZED" // 401: no hs_token
	MatrixCodeForbidden    = "M_FORBIDDEN"    // 403: a wrong hs_token
	MatrixCodeNotJSON      = "M_NOT_JSON"     // 400: the body is not a transaction
	MatrixCodeUnknown      = "M_UNKNOWN"      // 503: the transaction was not stored
	MatrixCodeNotFound     = "M_NOT_FOUND"    // 404: users and rooms queries
	MatrixCodeUnrecognized = "M_UNRECOGNIZED" // 404: not an application-service route
)

// MatrixError is the body of an application-service error answer:
// {"errcode": a MatrixCode*, "error": its message}.
type MatrixError struct {
	Errcode string `json:"errcode"`
	Error   string `json:"error"`
}

// Codes other packages own, listed here so the table holds every code an
// answer can carry: the strict-JSON reasons of canonicaljson (spec §2,
// canonicaljson.Reason*) and the refused handoff transitions
// (spec/handoff-contract-1.md, handoff.Code*). wire imports neither; a
// test checks the strings agree.
const (
	reasonInvalidJSON         = "invalid_json"
	reasonDuplicateObjectName = "duplicate_object_name"
	reasonFractionalNumber    = "fractional_number"
	reasonNegativeZero        = "negative_zero"
	reasonUnsafeInteger       = "unsafe_integer"
	reasonInvalidJSONNumber   = "invalid_json_number"
	reasonNULNotAdmitted      = "nul_not_admitted"
	reasonNonScalarUnicode    = "non_scalar_unicode"
	reasonInvalidUTF8         = "invalid_utf8"
	reasonJSONDepthExceeded   = "json_depth_exceeded"

	handoffTransitionNotAllowed = "transition_not_allowed"
	handoffResultRequired       = "result_required"
	handoffEvidenceRequired     = "evidence_required"
)

const (
	hintMediaTypes = "accept application/vnd.agenttool.correspondence+json or application/json (and, for events, application/atom+xml)"
	hintStates     = "proposed, accepted, running, blocked, verifying, succeeded, failed or cancelled"
	strictProfile  = "the JSON is outside the strict profile"
)

// errorTable is the relay's one error table (STYLE.md §3): every code any
// answer of the relay, its WebSub hub, its web view or its
// application-service listener carries, once, with its status and default
// message. Statuses are written as numbers: wire imports no net/http.
// Registry input errors (registry.InputError) are 400 whatever their code,
// so identity_not_active is 400 when a key is added to an inactive identity
// and 403 (below) on the wake stream; docs/http.md lists both.
var errorTable = []ErrorCode{
	// Authentication and authorization (spec §10, §11).
	{CodeUnauthorized, 401, "a valid bearer token is required", "send Authorization: Bearer <token>"},
	{CodeScopeInsufficient, 403, "the token lacks the scope this request needs", ""},
	{CodeProjectTokenRequired, 403, "this route needs a project token, not the operator token", ""},
	{CodeOperatorTokenRequired, 403, "this route needs the operator token", ""},
	{CodeNotFound, 404, "no such resource", ""},

	// Requests: methods, media types, bodies, queries (spec §9).
	{CodeMethodNotAllowed, 405, "method not allowed on this resource", ""},
	{CodeRepresentationNotAcceptable, 406, "no acceptable representation", hintMediaTypes},
	{CodeRequestTimeout, 408, "the request body did not arrive in time", ""},
	{CodeBodyTooLarge, 413, "the request body exceeds this route's size limit", "events and envelopes: 65536 bytes; contracts: 262144; admin bodies: 16384"},
	{CodeContentTypeUnsupported, 415, "the request body must be application/json or application/vnd.agenttool.correspondence+json (charset utf-8 only)", ""},
	{CodeBodyUnreadable, 400, "the request body could not be read", ""},
	{CodeBodyInvalid, 400, "the body has unknown members or members of the wrong type", ""},
	{CodeQueryInvalid, 400, "the query string is malformed", ""},
	{CodeRepositoryIDRequired, 400, "repository_id is required on reads", ""},
	{CodeRepositoryIDInvalid, 400, "repository_id is not a valid opaque id", ""},
	{CodeThreadIDInvalid, 400, "thread_id is not a valid opaque id", ""},
	{CodePathInvalid, 400, "path is not a valid path prefix (spec §4)", ""},
	{CodeAfterInvalid, 400, "after must be a received_seq: a decimal string without leading zeros", ""},
	{CodeLimitInvalid, 400, "limit must be an integer from 1 to 200", ""},

	// Strict JSON (spec §2): canonicaljson.Reason*.
	{reasonInvalidJSON, 400, strictProfile, ""},
	{reasonDuplicateObjectName, 400, strictProfile, ""},
	{reasonFractionalNumber, 400, strictProfile, ""},
	{reasonNegativeZero, 400, strictProfile, ""},
	{reasonUnsafeInteger, 400, strictProfile, ""},
	{reasonInvalidJSONNumber, 400, strictProfile, ""},
	{reasonNULNotAdmitted, 400, strictProfile, ""},
	{reasonNonScalarUnicode, 400, strictProfile, ""},
	{reasonInvalidUTF8, 400, strictProfile, ""},
	{reasonJSONDepthExceeded, 400, strictProfile, ""},

	// Appending events (spec §3, §6, §7) and reading projections (§8, §9).
	{CodeEventInvalid, 400, "the event is invalid", ""},
	{CodeSignatureEncodingInvalid, 400, "signature.value_b64url is not 86 characters of canonical unpadded base64url", ""},
	{CodeEventIDMismatch, 400, "event_id does not match the signed event", "event_id = sha256: + hex(SHA-256(JCS(event without event_id)))"},
	{CodeProjectMismatch, 403, "project_id is not the project of the bearer token", ""},
	{CodeSenderOrSigningKeyNotActive, 403, "the sender identity or signing key is not active in this project", ""},
	{CodeSignatureInvalid, 403, "the signature does not verify under the sender's signing key", ""},
	{CodeEventIDCollision, 409, "an event with this id is stored with different bytes", ""},
	{CodeCorrespondenceAppendUnavailable, 503, "the event log cannot accept events right now", "retry the same exact event later; it is idempotent"},
	{CodeCorrespondenceProjectionUnavailable, 503, "the claims projection cannot be read right now", "retry later; an empty answer is never served in its place"},
	{CodeCorrespondenceReadUnavailable, 503, "the event log cannot be read right now", "retry later with the same cursor"},

	// The wake stream (spec §9).
	{CodeKeysInvalid, 400, "keys must be correspondence", ""},
	{CodeIdentityIDRequired, 400, "identity_id is required", ""},
	{CodeIdentityIDInvalid, 400, "identity_id is not a canonical lowercase UUID", ""},
	{CodeIdentityNotActive, 403, "the identity is not active in this project", ""},
	{CodeIdentityNotFound, 404, "identity_id is no identity of this project", "use the identity_id of an active identity of the token's project"},
	{CodeTooManyStreams, 429, "this token has too many open wake streams", "close streams you no longer read; one per identity is enough"},

	// Registry administration (spec §10); registry.InputError carries its
	// own message.
	{CodeProjectIDRequired, 400, "with the operator token, name the project: ?project_id=", ""},
	{CodeProjectIDInvalid, 400, "project_id must be a canonical lowercase UUID", ""},
	{CodeSigningKeyIDInvalid, 400, "signing_key_id must be a canonical lowercase UUID", ""},
	{CodeDisplayNameInvalid, 400, "display_name is at most 256 bytes of UTF-8 without control characters", ""},
	{CodePublicKeyInvalid, 400, "public_key_b64url must be a 32-byte Ed25519 key in unpadded base64url", ""},
	{CodeScopesInvalid, 400, "scopes must be a non-empty set of read, append, admin", ""},
	{CodeAlreadyExists, 409, "a resource with this id already exists", ""},

	// Handoff contracts (spec/handoff-contract-1.md "HTTP") and predicate
	// envelopes (spec/predicate-envelope-1.md).
	{CodeHandoffIDInvalid, 400, "the handoff id in the URL is not a canonical lowercase UUID", ""},
	{CodeHandoffIDMismatch, 400, "handoffId in the body is not the handoff id in the URL", ""},
	{CodeTransitionInvalid, 400, `the body must be {"to": state, "result"?: object}`, ""},
	{CodeStateInvalid, 400, "state is not a contract state", hintStates},
	{CodeAssigneeInvalid, 400, "assignee must be a non-empty assignee id", ""},
	{CodeHandoffExists, 409, "a contract with this handoffId exists with other content; its terms never change", "move it with POST /v1/handoffs/{handoffId}/transitions"},
	{CodeIdempotencyKeyReused, 409, "this idempotencyKey was used for a contract with other content", ""},
	{CodeVersionLimitReached, 409, "this contract has reached its limit of 1000 versions", "create a new contract for further work"},
	{handoffTransitionNotAllowed, 409, "the contract's state does not allow this transition", ""},
	{handoffResultRequired, 409, "moving to succeeded needs a result", ""},
	{handoffEvidenceRequired, 409, "an acceptance criterion requires evidence; the result has no evidenceUris", ""},
	{CodePreconditionFailed, 412, "If-Match does not match the contract's current ETag", "GET the contract again and retry with its ETag"},
	{CodeContractInvalid, 422, "the contract violates the handoff contract schema", ""},
	{CodeEnvelopeRefused, 422, "the predicate envelope is refused", ""},
	{CodePreconditionRequired, 428, "a transition needs If-Match with the contract's current ETag", "GET the contract and send its ETag in If-Match"},

	// The embedded WebSub hub, POST /websub/hub (spec/websub.md).
	{CodeHubModeInvalid, 400, "hub.mode must be subscribe or unsubscribe", ""},
	{CodeHubPublishUnsupported, 400, "this hub serves only this relay's own topics and takes no publish notifications", ""},
	{CodeHubTopicInvalid, 400, "hub.topic must be a topic URL of this relay", ""},
	{CodeHubCallbackInvalid, 400, "hub.callback must be an absolute http(s) URL of a public host, without userinfo or fragment", ""},
	{CodeHubLeaseSecondsInvalid, 400, "hub.lease_seconds must be a non-negative integer", ""},
	{CodeHubSecretRequired, 400, "hub.secret is required for a private topic", ""},
	{CodeHubSecretInvalid, 400, "hub.secret must be shorter than 200 bytes", ""},
	{CodeHubParameterRepeated, 400, "a hub.* parameter is repeated", ""},

	// Limits (docs/operating.md "Limits").
	{CodeRateLimited, 429, "too many requests; retry after the number of seconds in Retry-After", ""},
	{CodeHubTopicSubscriptionsLimit, 409, "this topic has as many subscriptions as this hub allows; renewals are still accepted", ""},
	{CodeHubHostSubscriptionsLimit, 409, "the callback's host has as many subscriptions as this hub allows; unsubscribe one first", ""},
	{CodeHubProjectSubscriptionsLimit, 409, "this project has as many subscriptions as this hub allows; renewals are still accepted", ""},
	{CodeHubHostVerificationsLimit, 409, "the callback's host has as many verifications of intent waiting as this hub allows; retry after Retry-After seconds", ""},

	// Public projects (spec/websub.md "Topics").
	{CodeVisibilityInvalid, 400, `visibility must be "public" or "private"`, ""},

	// Federation peer links (spec/federation.md).
	{CodeRemoteURLInvalid, 400, "remote_url must be an absolute http or https URL without userinfo, query or fragment", ""},
	{CodeTokenRequired, 400, "token (a read token of the project on the remote relay) is required", ""},

	// The verifiable log's reads (docs/verifiable-log-reads.md).
	{CodeLogPathInvalid, 404, "no such log resource: want checkpoint, tile/<L>/<N>[.p/<W>], tile/entries/<N>[.p/<W>] or proof/inclusion|consistency (C2SP tlog-tiles)", ""},
	{CodeLogBeyondTree, 404, "beyond the log's integrated tree", "read the checkpoint for the tree size"},
	{CodeLogEmpty, 404, "the project's log has no checkpoint yet", ""},
	{CodeReceivedSeqInvalid, 400, "received_seq must be a decimal ≥ 1 without leading zeros", ""},
	{CodeTreeSizeInvalid, 400, "tree_size and old_size must be decimals without leading zeros, old_size ≤ tree_size, tree_size ≥ 1", ""},
	{CodeLogUnavailable, 503, "the log could not be read; retry", ""},
	{CodeLogEntryTooLarge, 404, "this entry bundle holds a record over 65535 bytes, which a C2SP bundle cannot carry (\"sequences of big-endian uint16 length-prefixed log entries\", tlog-tiles)",
		"its records are still in the tree: read them from the events routes and check them with an inclusion proof"},
	{CodeLogEntriesNeedToken, 403, "entry bundles hold every repository's records; a feed capability reads one repository", "read tiles and proofs here, or the bundles with a read token"},

	// Cosignatures and the witness (docs/verifiable-log.md).
	{CodeCheckpointNotPublished, 422, "the note is not a checkpoint this relay published for the project",
		"a C2SP checkpoint signed by this relay's log key (GET /v1/log-key), of the project's origin, no larger than its tree"},
	{CodeCosignerUnknown, 403, "no cosignature on the note verifies with the witness key of a peer link of the project", ""},
	{CodeWitnessRequestInvalid, 400, "not a C2SP add-checkpoint request: \"old <N>\", up to 63 base64 proof lines, an empty line, a checkpoint; old at most the checkpoint's size", ""},
	{CodeWitnessLogUnknown, 404, "this relay does not witness the checkpoint's origin", "its operator lists the logs it witnesses (serve --witness-log)"},
	{CodeWitnessSignatureInvalid, 403, "no signature on the checkpoint verifies with a key this relay trusts for its origin", ""},
	{CodeWitnessInconsistent, 422, "the checkpoint is not consistent with the one this relay cosigned for its origin", ""},

	// Matrix room bindings (docs/matrix.md).
	{CodeMatrixNotConfigured, 404, "this relay has no Matrix homeserver configured", ""},
	{CodeRoomIDInvalid, 400, "room_id is not a Matrix room id", "!opaque:server"},
	{CodeUserIDInvalid, 400, "invite holds a string that is not a Matrix user id", "@localpart:server"},
	{CodeRoomChoiceInvalid, 400, `give exactly one of room_id and "create": true (invite goes with create)`, ""},
	{CodeMatrixHomeserverFailed, 502, "the homeserver did not create the room", "retry later"},
	{CodeMatrixEncryptionUnavailable, 422, "the room is end-to-end encrypted and this relay has no Matrix encryption; nothing would reach it", "build acrelay with -tags goolm"},

	// The application-service listener (Matrix errcodes).
	{MatrixCodeUnauthorized, 401, "missing hs_token", ""},
	{MatrixCodeForbidden, 403, "bad hs_token", ""},
	{MatrixCodeNotJSON, 400, "body is not a transaction", ""},
	{MatrixCodeUnknown, 503, "not stored; retry", ""},
	{MatrixCodeNotFound, 404, "not provisioned here", ""},
	{MatrixCodeUnrecognized, 404, "unrecognized request", ""},

	// The web view's forms.
	{CodeFormInvalid, 400, "the form could not be read", ""},
	{CodeCrossSiteRefused, 403, "cross-site requests are refused", ""},
	{CodeFormTokenInvalid, 403, "the form did not come from this session", ""},

	// The relay itself.
	{CodeInternalError, 500, "internal error", ""},
	{CodeRequestCancelled, 503, "the request ended before it could be answered", "retry"},
	{CodeUnavailable, 503, "the relay's store is unavailable", "retry later"},
}

var errorIndex = func() map[string]int {
	m := make(map[string]int, len(errorTable))
	for i, e := range errorTable {
		m[e.Code] = i
	}
	return m
}()

// ErrorCodes returns a copy of the error table, in its order (grouped by
// the part of the API that answers each code).
func ErrorCodes() []ErrorCode { return slices.Clone(errorTable) }

// LookupError returns the table's row for code; ok is false for a code
// the table does not hold.
func LookupError(code string) (e ErrorCode, ok bool) {
	i, ok := errorIndex[code]
	if !ok {
		return ErrorCode{}, false
	}
	return errorTable[i], true
}

// ErrorStatus returns code's HTTP status, 500 for a code the table does
// not hold.
func ErrorStatus(code string) int {
	if e, ok := LookupError(code); ok {
		return e.Status
	}
	return 500
}
