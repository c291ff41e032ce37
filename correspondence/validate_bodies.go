package correspondence

import (
	"strings"
	"unicode/utf8"

	"github.com/acrelay/acrelay/canonicaljson"
)

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
			val.addLength(f.ptr, c, v.Str, 1, max)
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
				val.addLength(ptr+"/locator", c, l.Str, 1, maxLocatorScalars)
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
