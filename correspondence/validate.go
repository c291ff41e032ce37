package correspondence

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acrelay/acrelay/canonicaljson"
)

// Error codes of whole-event refusals (spec §3, §6).
const (
	CodeEventInvalid             = "event_invalid"
	CodeSignatureEncodingInvalid = "signature_encoding_invalid"
)

// Issue codes of Validate. They are stable snake_case words that travel
// unchanged into HTTP error bodies. A missing member of a body is reported
// as "<member>_required" (for example result_revision_required); a missing
// member anywhere else as CodeRequired.
const (
	CodeRequired               = "required"
	CodeUnknownField           = "unknown_field"
	CodeUnknownBodyField       = "unknown_body_field"
	CodeInvalidType            = "invalid_type"
	CodeProtocolInvalid        = "protocol_invalid"
	CodeEventIDInvalid         = "event_id_invalid"
	CodeUUIDInvalid            = "uuid_invalid"
	CodeOpaqueIDInvalid        = "opaque_id_invalid"
	CodeLengthOutOfRange       = "length_out_of_range"
	CodeKindInvalid            = "kind_invalid"
	CodeItemCountOutOfRange    = "item_count_out_of_range"
	CodeDuplicateItem          = "duplicate_item"
	CodeSessionSeqOutOfRange   = "session_seq_out_of_range"
	CodeGitRevisionInvalid     = "git_revision_invalid"
	CodeBranchInvalid          = "branch_invalid"
	CodePathInvalid            = "path_invalid"
	CodeAuthorityInvalid       = "authority_invalid"
	CodeSignatureAlgorithm     = "signature_algorithm_invalid"
	CodeTextContainsNUL        = "text_contains_nul"
	CodeOpenGenerationOne      = "open_generation_must_be_one"
	CodeGenerationOutOfRange   = "generation_out_of_range"
	CodeArtifactKindInvalid    = "artifact_kind_invalid"
	CodeDigestInvalid          = "digest_invalid"
	CodeLocatorInvalid         = "locator_invalid"
	CodeReferenceNotInParents  = "reference_not_in_parents"
	CodeTimestampInvalid       = "timestamp_invalid"
	CodeTimestampMilliseconds  = "timestamp_requires_milliseconds"
	CodeTimestampFraction      = "timestamp_fraction_not_milliseconds"
	CodeTimestampUppercaseZ    = "timestamp_requires_uppercase_z"
	CodeTimestampOffset        = "timestamp_offset_not_admitted"
	CodeTimestampYearZero      = "timestamp_year_zero_not_admitted"
	CodeTimestampInvalidDate   = "timestamp_invalid_date"
	CodeTimestampInvalidTime   = "timestamp_invalid_time"
	CodeTimestampHour24        = "timestamp_hour_24_not_admitted"
	CodeTimestampLeapSecond    = "timestamp_leap_second_not_admitted"
	codeSuffixRequired         = "_required"
	messageRequiredBodyMember  = "a required body member is missing"
	messageUnknownIssue        = "the value is not admitted"
	maxOpaqueIDScalars         = 256
	maxPathScalars             = 256
	maxBranchScalars           = 255
	maxTextScalars             = 1000
	maxHandoffSummaryScalars   = 2000
	maxLocatorScalars          = 2048
	maxParents                 = 16
	maxPaths                   = 64
	maxTargets                 = 16
	signatureB64URLLen         = 86
	eventIDLen                 = len("sha256:") + 64
	uuidLen                    = 36
	rfc3339msLayout            = "2006-01-02T15:04:05.000Z"
	authorityAutomaticActionOK = "never"
)

// messages holds the fixed English message of every code. Messages never
// quote the input.
var messages = map[string]string{
	CodeRequired:                 "a required member is missing",
	CodeUnknownField:             "the member is not defined for this object",
	CodeUnknownBodyField:         "the member is not defined for this kind's body",
	CodeInvalidType:              "the value has the wrong JSON type",
	CodeProtocolInvalid:          "protocol must be agent-correspondence/v0.1",
	CodeEventIDInvalid:           "must be sha256: followed by 64 lowercase hex digits",
	CodeUUIDInvalid:              "must be a canonical lowercase hyphenated UUID",
	CodeOpaqueIDInvalid:          "must contain no whitespace, U+FEFF or control characters",
	CodeLengthOutOfRange:         "the length in Unicode scalar values is out of range",
	CodeKindInvalid:              "kind is not one of the 21 event kinds",
	CodeItemCountOutOfRange:      "the number of items is out of range",
	CodeDuplicateItem:            "an item repeats",
	CodeSessionSeqOutOfRange:     "session_seq must be an integer from 1 to 2^53-1",
	CodeGitRevisionInvalid:       "must be 40 or 64 lowercase hex digits",
	CodeBranchInvalid:            "branch must contain no control characters",
	CodePathInvalid:              "not a valid path prefix",
	CodeAuthorityInvalid:         "authority must be exactly automatic_action never with no grants",
	CodeSignatureAlgorithm:       "signature algorithm must be Ed25519",
	CodeSignatureEncodingInvalid: "value_b64url must be 86 characters of canonical unpadded base64url",
	CodeTextContainsNUL:          "text must not contain U+0000",
	CodeOpenGenerationOne:        "claim.open generation must be 1",
	CodeGenerationOutOfRange:     "generation must be an integer from 2 to 2^53-1",
	CodeArtifactKindInvalid:      "artifact kind must be git_commit, git_patch or content_digest",
	CodeDigestInvalid:            "digest must be sha256: followed by 64 lowercase hex digits",
	CodeLocatorInvalid:           "locator must be a scheme, a colon and no whitespace or control characters",
	CodeReferenceNotInParents:    "every event id the body references must appear in parents",
	CodeTimestampInvalid:         "must be a timestamp of the form YYYY-MM-DDTHH:mm:ss.sssZ",
	CodeTimestampMilliseconds:    "timestamp must carry milliseconds",
	CodeTimestampFraction:        "timestamp fraction must be exactly three digits",
	CodeTimestampUppercaseZ:      "timestamp must end in an uppercase Z",
	CodeTimestampOffset:          "timestamp must be in UTC with Z, not an offset",
	CodeTimestampYearZero:        "timestamp year must be 0001 to 9999",
	CodeTimestampInvalidDate:     "timestamp date does not exist in the calendar",
	CodeTimestampInvalidTime:     "timestamp time of day is out of range",
	CodeTimestampHour24:          "timestamp hour 24 is not admitted",
	CodeTimestampLeapSecond:      "timestamp second 60 is not admitted",
}

func messageOf(code string) string {
	if m, ok := messages[code]; ok {
		return m
	}
	if strings.HasSuffix(code, codeSuffixRequired) {
		return messageRequiredBodyMember
	}
	return messageUnknownIssue
}

// Issue is one validation violation: an RFC 6901 JSON pointer into the
// event, a stable snake_case code and a fixed English message that never
// quotes the input.
type Issue struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ValidationError carries every violation found in one event. Code is
// CodeSignatureEncodingInvalid when the only problems are in the signature
// encoding, else CodeEventInvalid.
type ValidationError struct {
	Code   string
	Issues []Issue
}

func (e *ValidationError) Error() string { return e.Code }

// newValidationError classifies issues (non-empty) into the error code of
// spec §6: signature_encoding_invalid only when every issue is one.
func newValidationError(issues []Issue) *ValidationError {
	code := CodeSignatureEncodingInvalid
	for _, is := range issues {
		if is.Code != CodeSignatureEncodingInvalid {
			code = CodeEventInvalid
			break
		}
	}
	return &ValidationError{Code: code, Issues: issues}
}

type validator struct {
	issues []Issue
}

func (v *validator) add(ptr, code string) {
	v.issues = append(v.issues, Issue{Pointer: ptr, Code: code, Message: messageOf(code)})
}

// escapePointerToken escapes one RFC 6901 reference token.
func escapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func itemPointer(base string, i int) string { return base + "/" + strconv.Itoa(i) }

// top-level members in the order they are checked and reported.
const (
	fProtocol = iota
	fEventID
	fProjectID
	fRepositoryID
	fThreadID
	fSender
	fKind
	fParents
	fSessionSeq
	fIssuedAt
	fScope
	fBody
	fAuthority
	fSignature
	numTopFields
)

var topNames = [numTopFields]string{
	"protocol", "event_id", "project_id", "repository_id", "thread_id", "sender",
	"kind", "parents", "session_seq", "issued_at", "scope", "body", "authority", "signature",
}

var topPointers = [numTopFields]string{
	"/protocol", "/event_id", "/project_id", "/repository_id", "/thread_id", "/sender",
	"/kind", "/parents", "/session_seq", "/issued_at", "/scope", "/body", "/authority", "/signature",
}

func topIndex(name string) int {
	switch name {
	case "protocol":
		return fProtocol
	case "event_id":
		return fEventID
	case "project_id":
		return fProjectID
	case "repository_id":
		return fRepositoryID
	case "thread_id":
		return fThreadID
	case "sender":
		return fSender
	case "kind":
		return fKind
	case "parents":
		return fParents
	case "session_seq":
		return fSessionSeq
	case "issued_at":
		return fIssuedAt
	case "scope":
		return fScope
	case "body":
		return fBody
	case "authority":
		return fAuthority
	case "signature":
		return fSignature
	}
	return -1
}

// Validate returns every violation of spec §2–§5 and the schema in the
// parsed event v (not just the first); nil when v is a valid signed event.
// Issues come in a fixed order: the members of spec §3 in table order
// (each with its nested members), then reference_not_in_parents, then
// unknown top-level members in input order.
func Validate(v canonicaljson.Value) []Issue {
	var val validator
	val.event(v)
	return val.issues
}

func (val *validator) event(v canonicaljson.Value) {
	if v.Kind != canonicaljson.Object {
		val.add("", CodeInvalidType)
		return
	}
	var slots [numTopFields]*canonicaljson.Value
	unknown := false
	for i := range v.Members {
		m := &v.Members[i]
		if k := topIndex(m.Name); k >= 0 {
			if slots[k] == nil {
				slots[k] = &m.Value
			}
		} else {
			unknown = true
		}
	}
	for k := range slots {
		if slots[k] == nil {
			val.add(topPointers[k], CodeRequired)
		}
	}
	if p := slots[fProtocol]; p != nil {
		if p.Kind != canonicaljson.String {
			val.add(topPointers[fProtocol], CodeInvalidType)
		} else if p.Str != Protocol {
			val.add(topPointers[fProtocol], CodeProtocolInvalid)
		}
	}
	if p := slots[fEventID]; p != nil {
		val.stringCheck(topPointers[fEventID], *p, CodeEventIDInvalid, validEventID)
	}
	if p := slots[fProjectID]; p != nil {
		val.stringCheck(topPointers[fProjectID], *p, CodeUUIDInvalid, ValidUUID)
	}
	for _, k := range [2]int{fRepositoryID, fThreadID} {
		if p := slots[k]; p != nil {
			if p.Kind != canonicaljson.String {
				val.add(topPointers[k], CodeInvalidType)
			} else if c := opaqueIDCode(p.Str); c != "" {
				val.add(topPointers[k], c)
			}
		}
	}
	if p := slots[fSender]; p != nil {
		val.sender(*p)
	}
	kind, kindOK := Kind(""), false
	if p := slots[fKind]; p != nil {
		if p.Kind != canonicaljson.String {
			val.add(topPointers[fKind], CodeInvalidType)
		} else if bodySpecOf(Kind(p.Str)) == nil {
			val.add(topPointers[fKind], CodeKindInvalid)
		} else {
			kind, kindOK = Kind(p.Str), true
		}
	}
	parentsOK := false
	if p := slots[fParents]; p != nil {
		parentsOK = val.eventIDArray(topPointers[fParents], *p, 0, maxParents)
	}
	if p := slots[fSessionSeq]; p != nil {
		if p.Kind != canonicaljson.Int {
			val.add(topPointers[fSessionSeq], CodeInvalidType)
		} else if p.Int < 1 || p.Int > canonicaljson.MaxSafeInteger {
			val.add(topPointers[fSessionSeq], CodeSessionSeqOutOfRange)
		}
	}
	if p := slots[fIssuedAt]; p != nil {
		val.timestamp(topPointers[fIssuedAt], *p, false)
	}
	if p := slots[fScope]; p != nil {
		val.scope(*p)
	}
	if p := slots[fBody]; p != nil {
		if p.Kind != canonicaljson.Object {
			val.add(topPointers[fBody], CodeInvalidType)
		} else if kindOK {
			val.body(bodySpecOf(kind), *p)
		}
	}
	if p := slots[fAuthority]; p != nil {
		val.authority(*p)
	}
	if p := slots[fSignature]; p != nil {
		val.signature(*p)
	}
	if kindOK && parentsOK {
		if b := slots[fBody]; b != nil && b.Kind == canonicaljson.Object {
			if !refsInParents(*b, slots[fParents].Elems) {
				val.add(topPointers[fParents], CodeReferenceNotInParents)
			}
		}
	}
	if unknown {
		for i := range v.Members {
			if topIndex(v.Members[i].Name) < 0 {
				val.add("/"+escapePointerToken(v.Members[i].Name), CodeUnknownField)
			}
		}
	}
}

// stringCheck reports invalid_type for a non-string and code when ok
// refuses the string.
func (val *validator) stringCheck(ptr string, v canonicaljson.Value, code string, ok func(string) bool) {
	if v.Kind != canonicaljson.String {
		val.add(ptr, CodeInvalidType)
	} else if !ok(v.Str) {
		val.add(ptr, code)
	}
}

var senderNames = [4]string{"identity_id", "signing_key_id", "device_id", "session_id"}
var senderPointers = [4]string{"/sender/identity_id", "/sender/signing_key_id", "/sender/device_id", "/sender/session_id"}

func (val *validator) sender(v canonicaljson.Value) {
	if v.Kind != canonicaljson.Object {
		val.add("/sender", CodeInvalidType)
		return
	}
	for k, name := range senderNames {
		m, ok := v.Get(name)
		if !ok {
			val.add(senderPointers[k], CodeRequired)
			continue
		}
		val.stringCheck(senderPointers[k], m, CodeUUIDInvalid, ValidUUID)
	}
	val.closed("/sender", v, senderNames[:], CodeUnknownField)
}

// closed reports every member of object v whose name is not in names.
func (val *validator) closed(base string, v canonicaljson.Value, names []string, code string) {
	for i := range v.Members {
		found := false
		for _, n := range names {
			if v.Members[i].Name == n {
				found = true
				break
			}
		}
		if !found {
			val.add(base+"/"+escapePointerToken(v.Members[i].Name), code)
		}
	}
}

// eventIDArray checks an array of min..max unique event ids. It reports
// whether v is an array (so that its strings can be consulted).
func (val *validator) eventIDArray(ptr string, v canonicaljson.Value, min, max int) bool {
	if v.Kind != canonicaljson.Array {
		val.add(ptr, CodeInvalidType)
		return false
	}
	if n := len(v.Elems); n < min || n > max {
		val.add(ptr, CodeItemCountOutOfRange)
	}
	for i := range v.Elems {
		e := &v.Elems[i]
		if e.Kind != canonicaljson.String {
			val.add(itemPointer(ptr, i), CodeInvalidType)
			continue
		}
		if !validEventID(e.Str) {
			val.add(itemPointer(ptr, i), CodeEventIDInvalid)
			continue
		}
		if repeatsEarlier(v.Elems, i) {
			val.add(itemPointer(ptr, i), CodeDuplicateItem)
		}
	}
	return true
}

// repeatsEarlier reports whether the string elems[i] equals an earlier
// string element.
func repeatsEarlier(elems []canonicaljson.Value, i int) bool {
	s := elems[i].Str
	for j := 0; j < i; j++ {
		if elems[j].Kind == canonicaljson.String && elems[j].Str == s {
			return true
		}
	}
	return false
}

var scopeNames = []string{"base_revision", "branch", "paths"}

func (val *validator) scope(v canonicaljson.Value) {
	if v.Kind != canonicaljson.Object {
		val.add("/scope", CodeInvalidType)
		return
	}
	if br, ok := v.Get("base_revision"); !ok {
		val.add("/scope/base_revision", CodeRequired)
	} else if br.Kind != canonicaljson.Null {
		val.stringCheck("/scope/base_revision", br, CodeGitRevisionInvalid, validGitRevision)
	}
	if b, ok := v.Get("branch"); !ok {
		val.add("/scope/branch", CodeRequired)
	} else if b.Kind != canonicaljson.Null {
		if b.Kind != canonicaljson.String {
			val.add("/scope/branch", CodeInvalidType)
		} else if c := branchCode(b.Str); c != "" {
			val.add("/scope/branch", c)
		}
	}
	if p, ok := v.Get("paths"); !ok {
		val.add("/scope/paths", CodeRequired)
	} else if p.Kind != canonicaljson.Array {
		val.add("/scope/paths", CodeInvalidType)
	} else {
		if n := len(p.Elems); n < 1 || n > maxPaths {
			val.add("/scope/paths", CodeItemCountOutOfRange)
		}
		for i := range p.Elems {
			e := &p.Elems[i]
			if e.Kind != canonicaljson.String {
				val.add(itemPointer("/scope/paths", i), CodeInvalidType)
				continue
			}
			if c := pathCode(e.Str); c != "" {
				val.add(itemPointer("/scope/paths", i), c)
				continue
			}
			if repeatsEarlier(p.Elems, i) {
				val.add(itemPointer("/scope/paths", i), CodeDuplicateItem)
			}
		}
	}
	val.closed("/scope", v, scopeNames, CodeUnknownField)
}

var authorityNames = []string{"automatic_action", "grants"}

func (val *validator) authority(v canonicaljson.Value) {
	if v.Kind != canonicaljson.Object {
		val.add("/authority", CodeInvalidType)
		return
	}
	if a, ok := v.Get("automatic_action"); !ok {
		val.add("/authority/automatic_action", CodeRequired)
	} else if a.Kind != canonicaljson.String || a.Str != authorityAutomaticActionOK {
		val.add("/authority/automatic_action", CodeAuthorityInvalid)
	}
	if g, ok := v.Get("grants"); !ok {
		val.add("/authority/grants", CodeRequired)
	} else if g.Kind != canonicaljson.Array || len(g.Elems) != 0 {
		val.add("/authority/grants", CodeAuthorityInvalid)
	}
	val.closed("/authority", v, authorityNames, CodeUnknownField)
}

var signatureNames = []string{"algorithm", "value_b64url"}

func (val *validator) signature(v canonicaljson.Value) {
	if v.Kind != canonicaljson.Object {
		val.add("/signature", CodeInvalidType)
		return
	}
	if a, ok := v.Get("algorithm"); !ok {
		val.add("/signature/algorithm", CodeRequired)
	} else if a.Kind != canonicaljson.String || a.Str != SignatureAlgorithm {
		val.add("/signature/algorithm", CodeSignatureAlgorithm)
	}
	if s, ok := v.Get("value_b64url"); !ok {
		val.add("/signature/value_b64url", CodeRequired)
	} else if s.Kind != canonicaljson.String || !validSignatureEncoding(s.Str) {
		val.add("/signature/value_b64url", CodeSignatureEncodingInvalid)
	}
	val.closed("/signature", v, signatureNames, CodeUnknownField)
}

// validSignatureEncoding is the schema's ^[A-Za-z0-9_-]{85}[AQgw]$: 86
// characters of unpadded base64url whose 4 unused trailing bits are zero,
// the only spelling of a 64-byte signature.
func validSignatureEncoding(s string) bool {
	if len(s) != signatureB64URLLen {
		return false
	}
	for i := 0; i < signatureB64URLLen-1; i++ {
		if !isB64URL(s[i]) {
			return false
		}
	}
	switch s[signatureB64URLLen-1] {
	case 'A', 'Q', 'g', 'w':
		return true
	}
	return false
}

func isB64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// timestamp checks an RFC3339-ms timestamp; orNull admits JSON null.
func (val *validator) timestamp(ptr string, v canonicaljson.Value, orNull bool) {
	if orNull && v.Kind == canonicaljson.Null {
		return
	}
	if v.Kind != canonicaljson.String {
		val.add(ptr, CodeInvalidType)
		return
	}
	if c := timestampCode(v.Str); c != "" {
		val.add(ptr, c)
	}
}

// Body member types (schema $defs).
type fieldType uint8

const (
	tSummary fieldType = iota
	tHandoffSummary
	tUUID
	tGenerationOpen
	tGenerationNext
	tEventID
	tTimestamp
	tTimestampOrNull
	tGitRevision
	tArtifact
	tTargetsRaise
	tTargets
)

type bodyField struct {
	name     string
	typ      fieldType
	required bool
	ptr      string // "/body/" + name
	reqCode  string // name + "_required"
}

type bodySpec struct {
	fields []bodyField
}

func field(name string, typ fieldType, required bool) bodyField {
	return bodyField{name: name, typ: typ, required: required, ptr: "/body/" + escapePointerToken(name), reqCode: name + codeSuffixRequired}
}

func spec(fs ...bodyField) *bodySpec { return &bodySpec{fields: fs} }

// The closed body of each kind (spec §5; schema $defs *Body).
var (
	summaryBody   = spec(field("summary", tSummary, true))
	claimOpenBody = spec(field("claim_id", tUUID, true), field("generation", tGenerationOpen, true),
		field("expires_at", tTimestamp, true))
	claimRenewBody = spec(field("claim_id", tUUID, true), field("generation", tGenerationNext, true),
		field("predecessor_event_id", tEventID, true), field("expires_at", tTimestamp, true))
	claimReleaseBody = spec(field("claim_id", tUUID, true), field("generation", tGenerationNext, true),
		field("predecessor_event_id", tEventID, true), field("detail", tSummary, false))
	artifactOfferBody = spec(field("artifact", tArtifact, true), field("summary", tSummary, false))
	ackBody           = spec(field("target_event_id", tEventID, true), field("detail", tSummary, false))
	ackAppliedBody    = spec(field("target_event_id", tEventID, true), field("result_revision", tGitRevision, true),
		field("detail", tSummary, false))
	conflictRaiseBody   = spec(field("target_event_ids", tTargetsRaise, true), field("summary", tSummary, false))
	conflictResolveBody = spec(field("target_event_ids", tTargets, true), field("summary", tSummary, true),
		field("result_revision", tGitRevision, false))
	availabilityBody = spec(field("until", tTimestampOrNull, false), field("detail", tSummary, false))
	refusalBody      = spec(field("target_event_id", tEventID, false), field("detail", tSummary, false))
	handoffBody      = spec(field("summary", tHandoffSummary, true), field("next_safe_action", tSummary, true),
		field("handoff_id", tUUID, false))
	closeBody = spec(field("summary", tSummary, false))
)

func bodySpecOf(k Kind) *bodySpec {
	switch k {
	case KindIntent, KindProgress, KindObservation:
		return summaryBody
	case KindClaimOpen:
		return claimOpenBody
	case KindClaimRenew:
		return claimRenewBody
	case KindClaimRelease:
		return claimReleaseBody
	case KindArtifactOffer:
		return artifactOfferBody
	case KindAckSeen, KindAckUnderstood, KindAckAccepted, KindAckRejected, KindResume:
		return ackBody
	case KindAckApplied:
		return ackAppliedBody
	case KindConflictRaise:
		return conflictRaiseBody
	case KindConflictResolve, KindRepair:
		return conflictResolveBody
	case KindPause, KindRest:
		return availabilityBody
	case KindRefusal:
		return refusalBody
	case KindHandoff:
		return handoffBody
	case KindClose:
		return closeBody
	}
	return nil
}

func (val *validator) body(sp *bodySpec, v canonicaljson.Value) {
	for i := range sp.fields {
		f := &sp.fields[i]
		m, ok := v.Get(f.name)
		if !ok {
			if f.required {
				val.add(f.ptr, f.reqCode)
			}
			continue
		}
		val.bodyMember(f, m)
	}
	for i := range v.Members {
		name := v.Members[i].Name
		known := false
		for j := range sp.fields {
			if sp.fields[j].name == name {
				known = true
				break
			}
		}
		if !known {
			val.add("/body/"+escapePointerToken(name), CodeUnknownBodyField)
		}
	}
}

func (val *validator) bodyMember(f *bodyField, v canonicaljson.Value) {
	switch f.typ {
	case tSummary, tHandoffSummary:
		max := maxTextScalars
		if f.typ == tHandoffSummary {
			max = maxHandoffSummaryScalars
		}
		if v.Kind != canonicaljson.String {
			val.add(f.ptr, CodeInvalidType)
		} else if c := textCode(v.Str, max); c != "" {
			val.add(f.ptr, c)
		}
	case tUUID:
		val.stringCheck(f.ptr, v, CodeUUIDInvalid, ValidUUID)
	case tGenerationOpen:
		if v.Kind != canonicaljson.Int {
			val.add(f.ptr, CodeInvalidType)
		} else if v.Int != 1 {
			val.add(f.ptr, CodeOpenGenerationOne)
		}
	case tGenerationNext:
		if v.Kind != canonicaljson.Int {
			val.add(f.ptr, CodeInvalidType)
		} else if v.Int < 2 || v.Int > canonicaljson.MaxSafeInteger {
			val.add(f.ptr, CodeGenerationOutOfRange)
		}
	case tEventID:
		val.stringCheck(f.ptr, v, CodeEventIDInvalid, validEventID)
	case tTimestamp:
		val.timestamp(f.ptr, v, false)
	case tTimestampOrNull:
		val.timestamp(f.ptr, v, true)
	case tGitRevision:
		val.stringCheck(f.ptr, v, CodeGitRevisionInvalid, validGitRevision)
	case tArtifact:
		val.artifact(f.ptr, v)
	case tTargetsRaise:
		val.eventIDArray(f.ptr, v, 2, maxTargets)
	case tTargets:
		val.eventIDArray(f.ptr, v, 1, maxTargets)
	}
}

var (
	gitCommitNames = []string{"kind", "revision"}
	digestNames    = []string{"kind", "digest", "locator"}
)

// artifact checks the schema's oneOf of gitCommitArtifact and
// digestArtifact; the kind member selects the branch.
func (val *validator) artifact(ptr string, v canonicaljson.Value) {
	if v.Kind != canonicaljson.Object {
		val.add(ptr, CodeInvalidType)
		return
	}
	k, ok := v.Get("kind")
	if !ok {
		val.add(ptr+"/kind", "kind"+codeSuffixRequired)
		return
	}
	if k.Kind != canonicaljson.String {
		val.add(ptr+"/kind", CodeInvalidType)
		return
	}
	switch k.Str {
	case "git_commit":
		if r, ok := v.Get("revision"); !ok {
			val.add(ptr+"/revision", "revision"+codeSuffixRequired)
		} else {
			val.stringCheck(ptr+"/revision", r, CodeGitRevisionInvalid, validGitRevision)
		}
		val.closed(ptr, v, gitCommitNames, CodeUnknownBodyField)
	case "git_patch", "content_digest":
		if d, ok := v.Get("digest"); !ok {
			val.add(ptr+"/digest", "digest"+codeSuffixRequired)
		} else {
			val.stringCheck(ptr+"/digest", d, CodeDigestInvalid, validEventID)
		}
		if l, ok := v.Get("locator"); ok {
			if l.Kind != canonicaljson.String {
				val.add(ptr+"/locator", CodeInvalidType)
			} else if c := locatorCode(l.Str); c != "" {
				val.add(ptr+"/locator", c)
			}
		}
		val.closed(ptr, v, digestNames, CodeUnknownBodyField)
	default:
		val.add(ptr+"/kind", CodeArtifactKindInvalid)
	}
}

// refsInParents reports whether every event id string the body references
// (predecessor_event_id, target_event_id, target_event_ids) is a parent.
func refsInParents(body canonicaljson.Value, parents []canonicaljson.Value) bool {
	for i := range body.Members {
		m := &body.Members[i]
		switch m.Name {
		case "predecessor_event_id", "target_event_id":
			if m.Value.Kind == canonicaljson.String && !containsString(parents, m.Value.Str) {
				return false
			}
		case "target_event_ids":
			if m.Value.Kind == canonicaljson.Array {
				for j := range m.Value.Elems {
					e := &m.Value.Elems[j]
					if e.Kind == canonicaljson.String && !containsString(parents, e.Str) {
						return false
					}
				}
			}
		}
	}
	return true
}

func containsString(elems []canonicaljson.Value, s string) bool {
	for i := range elems {
		if elems[i].Kind == canonicaljson.String && elems[i].Str == s {
			return true
		}
	}
	return false
}

// ---- scalar rules ----

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func allLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// validEventID is ^sha256:[0-9a-f]{64}$ (event ids and digests).
func validEventID(s string) bool {
	return len(s) == eventIDLen && s[:7] == "sha256:" && allLowerHex(s[7:])
}

// ValidEventID reports whether s is "sha256:" + 64 lowercase hex digits.
func ValidEventID(s string) bool { return validEventID(s) }

// validGitRevision is ^(?:[0-9a-f]{40}|[0-9a-f]{64})$.
func validGitRevision(s string) bool {
	return (len(s) == 40 || len(s) == 64) && allLowerHex(s)
}

// ValidUUID reports whether s is a canonical lowercase hyphenated UUID
// (8-4-4-4-12 lowercase hex digits; any version or variant, spec §2).
func ValidUUID(s string) bool {
	if len(s) != uuidLen {
		return false
	}
	for i := 0; i < uuidLen; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isLowerHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// isCc reports general category Cc: U+0000–U+001F and U+007F–U+009F.
func isCc(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }

// isSpace is the union of Go's unicode.IsSpace and ECMAScript's \s (which
// adds U+FEFF): the whitespace the schema's \S and \s patterns mean.
func isSpace(r rune) bool { return unicode.IsSpace(r) || r == 0xFEFF }

// countNoSpaceNoCc counts s's scalar values and reports whether any is
// Unicode whitespace (U+FEFF included), a Cc control or invalid UTF-8: the
// character rule shared by opaque ids and locators (spec §3, §4).
func countNoSpaceNoCc(s string) (n int, bad bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == 0x7f {
				bad = true
			}
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || isCc(r) || isSpace(r) {
				bad = true
			}
			i += size
		}
		n++
	}
	return n, bad
}

// opaqueIDCode returns "" when s is a valid opaque id (spec §3: 1–256
// scalar values, no Unicode whitespace, no U+FEFF, no Cc), else the code.
func opaqueIDCode(s string) string {
	n, bad := countNoSpaceNoCc(s)
	if n < 1 || n > maxOpaqueIDScalars {
		return CodeLengthOutOfRange
	}
	if bad {
		return CodeOpaqueIDInvalid
	}
	return ""
}

// ValidOpaqueID reports whether s is a valid repository_id/thread_id
// (spec §3): 1–256 scalar values, no Unicode whitespace, no U+FEFF, no
// general category Cc.
func ValidOpaqueID(s string) bool { return opaqueIDCode(s) == "" }

// branchCode: 1–255 scalar values, no Cc (spec §3).
func branchCode(s string) string {
	n := 0
	bad := false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				bad = true
			}
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || isCc(r) {
				bad = true
			}
			i += size
		}
		n++
	}
	if n < 1 || n > maxBranchScalars {
		return CodeLengthOutOfRange
	}
	if bad {
		return CodeBranchInvalid
	}
	return ""
}

// textCode: 1–max scalar values with no U+0000 (schema summary and
// handoffSummary).
func textCode(s string, max int) string {
	if strings.IndexByte(s, 0) >= 0 {
		return CodeTextContainsNUL
	}
	if !utf8.ValidString(s) {
		return CodeInvalidType
	}
	if len(s) < 1 || len(s) > max && utf8.RuneCountInString(s) > max {
		return CodeLengthOutOfRange
	}
	return ""
}

// pathCode returns "" when p is a valid path prefix (spec §4), else the
// issue code: length_out_of_range outside 1–256 scalar values, else
// path_invalid.
func pathCode(p string) string {
	n := 0
	bad := false
	segStart := 0
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20 || c == 0x7f:
				bad = true
			case c == '\\' || c == '*' || c == '?' || c == '[' || c == ']' || c == '{' || c == '}' || c == '!':
				bad = true
			case c == '/':
				if badSegment(p[segStart:i]) {
					bad = true
				}
				segStart = i + 1
			}
			i++
		} else {
			r, size := utf8.DecodeRuneInString(p[i:])
			if r == utf8.RuneError && size == 1 || isCc(r) {
				bad = true
			}
			i += size
		}
		n++
	}
	if n < 1 || n > maxPathScalars {
		return CodeLengthOutOfRange
	}
	if p == "." {
		return ""
	}
	if bad || badSegment(p[segStart:]) {
		return CodePathInvalid
	}
	return ""
}

// badSegment: a path segment may not be empty, "." or "..".
func badSegment(seg string) bool { return seg == "" || seg == "." || seg == ".." }

// ValidPath reports whether p is a valid path prefix (spec §4): "." for
// the whole repository, or 1–256 scalar values of "/"-separated segments,
// none empty, "." or "..", with no backslash, Cc control or any of
// * ? [ ] { } !. Other Unicode (U+2026 included) is admitted.
func ValidPath(p string) bool { return pathCode(p) == "" }

// PathsOverlap reports whether prefixes a and b overlap (spec §4): either
// is ".", they are equal, or one equals the other plus "/" and more
// segments. Comparison is byte for byte and case-sensitive.
func PathsOverlap(a, b string) bool {
	if a == "." || b == "." || a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(b) > len(a) && b[len(a)] == '/' && b[:len(a)] == a
}

// locatorCode: 1–2048 scalar values; ASCII scheme [A-Za-z][A-Za-z0-9+.-]*,
// ":", then no Unicode whitespace, U+FEFF or Cc anywhere (spec §4).
func locatorCode(s string) string {
	n, bad := countNoSpaceNoCc(s)
	if n < 1 || n > maxLocatorScalars {
		return CodeLengthOutOfRange
	}
	if bad || !hasScheme(s) {
		return CodeLocatorInvalid
	}
	return ""
}

func hasScheme(s string) bool {
	if s == "" || !(s[0] >= 'A' && s[0] <= 'Z' || s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			return true
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '.', c == '-':
		default:
			return false
		}
	}
	return false
}

// ValidLocator reports whether s is a valid artifact locator (spec §4).
func ValidLocator(s string) bool { return locatorCode(s) == "" }

// ---- timestamps ----

func digits(s string, i, n int) (int, bool) {
	v := 0
	for k := i; k < i+n; k++ {
		c := s[k]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

type tsFields struct{ year, month, day, hour, min, sec, ms int }

// timestampFields checks s against spec §2 without allocating.
func timestampFields(s string) (f tsFields, code string) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return f, CodeTimestampInvalid
	}
	var ok [6]bool
	f.year, ok[0] = digits(s, 0, 4)
	f.month, ok[1] = digits(s, 5, 2)
	f.day, ok[2] = digits(s, 8, 2)
	f.hour, ok[3] = digits(s, 11, 2)
	f.min, ok[4] = digits(s, 14, 2)
	f.sec, ok[5] = digits(s, 17, 2)
	for _, o := range ok {
		if !o {
			return f, CodeTimestampInvalid
		}
	}
	rest := s[19:]
	if rest == "" || rest[0] == 'Z' || rest[0] == 'z' || rest[0] == '+' || rest[0] == '-' {
		return f, CodeTimestampMilliseconds
	}
	if rest[0] != '.' {
		return f, CodeTimestampInvalid
	}
	nd := 0
	for nd+1 < len(rest) && rest[nd+1] >= '0' && rest[nd+1] <= '9' {
		nd++
	}
	if nd != 3 {
		if nd == 0 {
			return f, CodeTimestampInvalid
		}
		return f, CodeTimestampFraction
	}
	f.ms, _ = digits(rest, 1, 3)
	switch tz := rest[4:]; {
	case tz == "Z":
	case tz == "z":
		return f, CodeTimestampUppercaseZ
	case len(tz) > 0 && (tz[0] == '+' || tz[0] == '-'):
		return f, CodeTimestampOffset
	default:
		return f, CodeTimestampInvalid
	}
	switch {
	case f.year == 0:
		return f, CodeTimestampYearZero
	case f.month < 1 || f.month > 12 || f.day < 1 || f.day > daysIn(f.year, f.month):
		return f, CodeTimestampInvalidDate
	case f.hour == 24:
		return f, CodeTimestampHour24
	case f.hour > 24 || f.min > 59:
		return f, CodeTimestampInvalidTime
	case f.sec == 60:
		return f, CodeTimestampLeapSecond
	case f.sec > 60:
		return f, CodeTimestampInvalidTime
	}
	return f, ""
}

func timestampCode(s string) string {
	_, code := timestampFields(s)
	return code
}

// ParseTimestamp parses an RFC3339-ms timestamp (spec §2): exactly
// YYYY-MM-DDTHH:mm:ss.sssZ, year 0001–9999, a real calendar date, hour
// 00–23, second 00–59. On failure t is zero and code is the issue code:
// timestamp_invalid, timestamp_requires_milliseconds,
// timestamp_fraction_not_milliseconds, timestamp_requires_uppercase_z,
// timestamp_offset_not_admitted, timestamp_year_zero_not_admitted,
// timestamp_invalid_date, timestamp_hour_24_not_admitted,
// timestamp_invalid_time or timestamp_leap_second_not_admitted.
func ParseTimestamp(s string) (t time.Time, code string) {
	f, code := timestampFields(s)
	if code != "" {
		return time.Time{}, code
	}
	return time.Date(f.year, time.Month(f.month), f.day, f.hour, f.min, f.sec, f.ms*int(time.Millisecond), time.UTC), ""
}

// FormatTimestamp renders t in UTC as YYYY-MM-DDTHH:mm:ss.sssZ, truncating
// below the millisecond.
func FormatTimestamp(t time.Time) string { return t.UTC().Format(rfc3339msLayout) }

// ---- typed events ----

// ParseEvent parses raw under the strict profile, validates it and returns
// the typed event. Errors: *canonicaljson.ProfileError, *ValidationError.
// It does not verify the signature or the event id.
func ParseEvent(raw []byte) (*Event, error) {
	v, err := canonicaljson.ParseObject(raw)
	if err != nil {
		return nil, err
	}
	return EventFromValue(v)
}

// EventFromValue validates an already parsed event and returns it typed.
// Error: *ValidationError.
func EventFromValue(v canonicaljson.Value) (*Event, error) {
	if issues := Validate(v); issues != nil {
		return nil, newValidationError(issues)
	}
	e := &Event{}
	for i := range v.Members {
		m := &v.Members[i].Value
		switch v.Members[i].Name {
		case "event_id":
			e.ID = m.Str
		case "project_id":
			e.ProjectID = m.Str
		case "repository_id":
			e.RepositoryID = m.Str
		case "thread_id":
			e.ThreadID = m.Str
		case "sender":
			for _, sm := range m.Members {
				switch sm.Name {
				case "identity_id":
					e.Sender.IdentityID = sm.Value.Str
				case "signing_key_id":
					e.Sender.SigningKeyID = sm.Value.Str
				case "device_id":
					e.Sender.DeviceID = sm.Value.Str
				case "session_id":
					e.Sender.SessionID = sm.Value.Str
				}
			}
		case "kind":
			e.Kind = Kind(m.Str)
		case "parents":
			e.Parents = make([]string, len(m.Elems))
			for j := range m.Elems {
				e.Parents[j] = m.Elems[j].Str
			}
		case "session_seq":
			e.SessionSeq = m.Int
		case "issued_at":
			e.IssuedAt = m.Str
		case "scope":
			for _, sm := range m.Members {
				switch sm.Name {
				case "base_revision":
					if sm.Value.Kind == canonicaljson.String {
						s := sm.Value.Str
						e.Scope.BaseRevision = &s
					}
				case "branch":
					if sm.Value.Kind == canonicaljson.String {
						s := sm.Value.Str
						e.Scope.Branch = &s
					}
				case "paths":
					e.Scope.Paths = make([]string, len(sm.Value.Elems))
					for j := range sm.Value.Elems {
						e.Scope.Paths[j] = sm.Value.Elems[j].Str
					}
				}
			}
		case "body":
			e.Body = *m
		case "signature":
			if s, ok := m.Get("value_b64url"); ok {
				e.Signature = s.Str
			}
		}
	}
	return e, nil
}

// bodyString returns the string member name of the body, or "".
func (e *Event) bodyString(name string) string {
	if m, ok := e.Body.Get(name); ok && m.Kind == canonicaljson.String {
		return m.Str
	}
	return ""
}

// ClaimFields are the lineage members of a claim event's body.
type ClaimFields struct {
	ClaimID            string
	Generation         int64
	PredecessorEventID string // empty for claim.open
	ExpiresAt          string // empty for claim.release
}

// Claim returns the claim fields of a claim.* event; ok is false otherwise.
func (e *Event) Claim() (c ClaimFields, ok bool) {
	if !e.Kind.IsClaim() {
		return c, false
	}
	c.ClaimID = e.bodyString("claim_id")
	if g, ok := e.Body.Get("generation"); ok && g.Kind == canonicaljson.Int {
		c.Generation = g.Int
	}
	c.PredecessorEventID = e.bodyString("predecessor_event_id")
	c.ExpiresAt = e.bodyString("expires_at")
	return c, true
}

// ReferencedEventIDs returns the event ids the body references
// (predecessor_event_id, target_event_id, target_event_ids), in body
// member order; nil when there are none.
func (e *Event) ReferencedEventIDs() []string {
	var ids []string
	for i := range e.Body.Members {
		m := &e.Body.Members[i]
		switch m.Name {
		case "predecessor_event_id", "target_event_id":
			if m.Value.Kind == canonicaljson.String {
				ids = append(ids, m.Value.Str)
			}
		case "target_event_ids":
			for _, t := range m.Value.Elems {
				if t.Kind == canonicaljson.String {
					ids = append(ids, t.Str)
				}
			}
		}
	}
	return ids
}

// HandoffID returns body.handoff_id of a handoff event, or "".
func (e *Event) HandoffID() string {
	if e.Kind != KindHandoff {
		return ""
	}
	return e.bodyString("handoff_id")
}
