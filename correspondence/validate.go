package correspondence

import (
	"fmt"
	"strconv"
	"strings"
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

// messages holds the English message of every code. Messages never quote
// the input. The two bound codes (length_out_of_range,
// item_count_out_of_range) get a message naming the member, the bound and
// the count found instead (addLength, addCount); these are their
// fallbacks.
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
// event, a stable snake_case code and an English message that never
// quotes the input (a bound code's message names the bound and the count
// found; match on Code, not on Message).
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

// addLength reports code for the string s at ptr; for
// CodeLengthOutOfRange the message names the member, the bound s missed
// and its length ("summary: at most 1000 Unicode scalar values, got
// 70000"), which says what to cut without quoting the input.
func (v *validator) addLength(ptr, code, s string, min, max int) {
	if code != CodeLengthOutOfRange {
		v.add(ptr, code)
		return
	}
	n := utf8.RuneCountInString(s)
	v.issues = append(v.issues, Issue{Pointer: ptr, Code: code, Message: boundMessage(ptr, n, min, max, "Unicode scalar value")})
}

// addCount reports an array at ptr of n items outside min..max as
// CodeItemCountOutOfRange ("parents: at most 16 items, got 17").
func (v *validator) addCount(ptr string, n, min, max int) {
	v.issues = append(v.issues, Issue{Pointer: ptr, Code: CodeItemCountOutOfRange, Message: boundMessage(ptr, n, min, max, "item")})
}

// boundMessage is "<member>: at most|at least <bound> <unit>s, got <n>";
// the member is ptr's last token, an array item named as paths[0].
func boundMessage(ptr string, n, min, max int, unit string) string {
	name := ptr[strings.LastIndexByte(ptr, '/')+1:]
	if _, err := strconv.Atoi(name); err == nil && len(ptr) > len(name)+1 {
		parent := ptr[:len(ptr)-len(name)-1]
		name = parent[strings.LastIndexByte(parent, '/')+1:] + "[" + name + "]"
	}
	name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
	bound, word := max, "at most"
	if n < min {
		bound, word = min, "at least"
	}
	if bound != 1 {
		unit += "s"
	}
	return fmt.Sprintf("%s: %s %d %s, got %d", name, word, bound, unit, n)
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
				val.addLength(topPointers[k], c, p.Str, 1, maxOpaqueIDScalars)
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
		val.addCount(ptr, n, min, max)
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
