package correspondence

import (
	"unicode"
	"unicode/utf8"

	"github.com/acrelay/acrelay/canonicaljson"
)

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
			val.addLength("/scope/branch", c, b.Str, 1, maxBranchScalars)
		}
	}
	if p, ok := v.Get("paths"); !ok {
		val.add("/scope/paths", CodeRequired)
	} else if p.Kind != canonicaljson.Array {
		val.add("/scope/paths", CodeInvalidType)
	} else {
		if n := len(p.Elems); n < 1 || n > maxPaths {
			val.addCount("/scope/paths", n, 1, maxPaths)
		}
		for i := range p.Elems {
			e := &p.Elems[i]
			if e.Kind != canonicaljson.String {
				val.add(itemPointer("/scope/paths", i), CodeInvalidType)
				continue
			}
			if c := pathCode(e.Str); c != "" {
				val.addLength(itemPointer("/scope/paths", i), c, e.Str, 1, maxPathScalars)
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
