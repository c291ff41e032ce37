package wire

// The relay's API error codes: the "error" member of an error answer
// (spec §9, §11; spec/handoff-contract-1.md "HTTP";
// spec/predicate-envelope-1.md "Surfaces"), with the status each comes
// with (the table of all codes, statuses and messages is errorTable, in
// errors.go). A code is stable: clients may branch on it; the message
// beside it is English for people.
//
// Besides these, an error answer may carry a strict-profile reason of
// canonicaljson (400, canonicaljson.Reason*: invalid_json,
// duplicate_object_name, json_depth_exceeded, …) and, for a refused contract transition, a
// handoff code (409, handoff.Code*: transition_not_allowed, …).
const (
	// Authentication and authorization (spec §10, §11).
	CodeUnauthorized          = "unauthorized"            // 401
	CodeScopeInsufficient     = "scope_insufficient"      // 403
	CodeProjectTokenRequired  = "project_token_required"  // 403
	CodeOperatorTokenRequired = "operator_token_required" // 403
	CodeNotFound              = "not_found"               // 404

	// Requests: methods, media types, bodies, queries (spec §9).
	CodeMethodNotAllowed            = "method_not_allowed"            // 405
	CodeRepresentationNotAcceptable = "representation_not_acceptable" // 406 (the reference profile's code)
	CodeRequestTimeout              = "request_timeout"               // 408
	CodeBodyTooLarge                = "body_too_large"                // 413
	CodeContentTypeUnsupported      = "content_type_unsupported"      // 415
	CodeBodyUnreadable              = "body_unreadable"               // 400
	CodeBodyInvalid                 = "body_invalid"                  // 400
	CodeQueryInvalid                = "query_invalid"                 // 400: malformed, or an unknown or repeated parameter
	CodeRepositoryIDRequired        = "repository_id_required"        // 400
	CodeRepositoryIDInvalid         = "repository_id_invalid"         // 400
	CodeThreadIDInvalid             = "thread_id_invalid"             // 400
	CodePathInvalid                 = "path_invalid"                  // 400
	CodeAfterInvalid                = "after_invalid"                 // 400
	CodeLimitInvalid                = "limit_invalid"                 // 400

	// Appending events (spec §3, §6, §7) and reading projections (§8).
	CodeEventInvalid                        = "event_invalid"                         // 400, with issues
	CodeSignatureEncodingInvalid            = "signature_encoding_invalid"            // 400
	CodeEventIDMismatch                     = "event_id_mismatch"                     // 400
	CodeProjectMismatch                     = "project_mismatch"                      // 403
	CodeSenderOrSigningKeyNotActive         = "sender_or_signing_key_not_active"      // 403
	CodeSignatureInvalid                    = "signature_invalid"                     // 403
	CodeEventIDCollision                    = "event_id_collision"                    // 409
	CodeCorrespondenceAppendUnavailable     = "correspondence_append_unavailable"     // 503: retry the same event
	CodeCorrespondenceProjectionUnavailable = "correspondence_projection_unavailable" // 503
	CodeCorrespondenceReadUnavailable       = "correspondence_read_unavailable"       // 503: a correspondence read failed in the store

	// The wake stream (spec §9).
	CodeKeysInvalid        = "keys_invalid"         // 400
	CodeIdentityIDRequired = "identity_id_required" // 400
	CodeIdentityIDInvalid  = "identity_id_invalid"  // 400 (also from the registry)
	CodeIdentityNotActive  = "identity_not_active"  // 403 (400 from the registry)
	CodeIdentityNotFound   = "identity_not_found"   // 404: no such identity in the bearer's project
	CodeTooManyStreams     = "too_many_streams"     // 429

	// Registry administration (spec §10).
	CodeProjectIDRequired   = "project_id_required"    // 400
	CodeProjectIDInvalid    = "project_id_invalid"     // 400
	CodeSigningKeyIDInvalid = "signing_key_id_invalid" // 400
	CodeDisplayNameInvalid  = "display_name_invalid"   // 400
	CodePublicKeyInvalid    = "public_key_invalid"     // 400
	CodeScopesInvalid       = "scopes_invalid"         // 400
	CodeAlreadyExists       = "already_exists"         // 409

	// Handoff contracts (spec/handoff-contract-1.md) and predicate
	// envelopes (spec/predicate-envelope-1.md).
	CodeHandoffIDInvalid     = "handoff_id_invalid"     // 400
	CodeHandoffIDMismatch    = "handoff_id_mismatch"    // 400
	CodeTransitionInvalid    = "transition_invalid"     // 400
	CodeStateInvalid         = "state_invalid"          // 400
	CodeAssigneeInvalid      = "assignee_invalid"       // 400
	CodeHandoffExists        = "handoff_exists"         // 409
	CodeIdempotencyKeyReused = "idempotency_key_reused" // 409
	CodeVersionLimitReached  = "version_limit_reached"  // 409
	CodePreconditionFailed   = "precondition_failed"    // 412
	CodeContractInvalid      = "contract_invalid"       // 422, with issues
	CodeEnvelopeRefused      = "envelope_refused"       // 422, with a reason
	CodePreconditionRequired = "precondition_required"  // 428

	// The embedded WebSub hub, POST /websub/hub (spec/websub.md
	// "Subscribing"); it also answers unauthorized, scope_insufficient,
	// not_found, content_type_unsupported, body_too_large, body_invalid and
	// unavailable.
	CodeHubModeInvalid         = "hub_mode_invalid"          // 400: hub.mode missing or not subscribe/unsubscribe
	CodeHubPublishUnsupported  = "hub_publish_unsupported"   // 400: hub.mode=publish; the hub serves only this relay's topics
	CodeHubTopicInvalid        = "hub_topic_invalid"         // 400: hub.topic missing or not a topic of this relay
	CodeHubCallbackInvalid     = "hub_callback_invalid"      // 400: hub.callback missing, malformed or refused
	CodeHubLeaseSecondsInvalid = "hub_lease_seconds_invalid" // 400: hub.lease_seconds is not a non-negative integer
	CodeHubSecretRequired      = "hub_secret_required"       // 400: a private topic needs hub.secret
	CodeHubSecretInvalid       = "hub_secret_invalid"        // 400: hub.secret of 200 bytes or more
	CodeHubParameterRepeated   = "hub_parameter_repeated"    // 400: a hub.* parameter given twice

	// Federation peer links, /v1/admin/projects/{project_id}/peers
	// (spec/federation.md).
	CodeRemoteURLInvalid = "remote_url_invalid" // 400: remote_url is not an absolute http(s) URL without userinfo, query or fragment
	CodeTokenRequired    = "token_required"     // 400: token (the remote's read capability) is missing

	// The relay itself.
	CodeInternalError    = "internal_error"    // 500
	CodeRequestCancelled = "request_cancelled" // 503: the request ended first
	CodeUnavailable      = "unavailable"       // 503: the store is unavailable
)
