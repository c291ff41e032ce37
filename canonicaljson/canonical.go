package canonicaljson

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonical returns the RFC 8785 (JCS) bytes of v. Errors are
// *ProfileError when v holds something the profile does not admit (a value
// built by hand with invalid UTF-8, U+0000, an unsafe integer or duplicate
// names); values returned by Parse never fail.
func Canonical(v Value) ([]byte, error) {
	return AppendCanonical(make([]byte, 0, 256), v)
}

// AppendCanonical appends the RFC 8785 bytes of v to dst.
func AppendCanonical(dst []byte, v Value) ([]byte, error) {
	return appendValue(dst, v, nil)
}

// AppendCanonicalWithout appends the RFC 8785 bytes of the object v with
// the top-level members named in omit left out. It is how a signed event's
// core (without event_id and signature) and signed form (without event_id)
// are canonicalized without copying the tree (spec §6).
func AppendCanonicalWithout(dst []byte, v Value, omit ...string) ([]byte, error) {
	if v.Kind != Object {
		return dst, &ProfileError{Reason: ReasonInvalidJSON, Detail: "not an object"}
	}
	return appendValue(dst, v, omit)
}

// AppendCanonicalMark is AppendCanonicalWithout that also returns at, the
// index in out where a top-level member named mark (one of those omitted,
// or absent from v) belongs in RFC 8785 order. When some written member
// sorts before mark, at is the index of the comma after the last of them
// (or of the closing brace): splicing `,"mark":<value>` there gives the
// canonical bytes of v with that member, without a second
// canonicalization. Otherwise at is the index just after the opening
// brace, and the splice is `"mark":<value>,` (or `"mark":<value>` in an
// empty object). Errors as AppendCanonicalWithout's.
func AppendCanonicalMark(dst []byte, v Value, mark string, omit ...string) (out []byte, at int, err error) {
	if v.Kind != Object {
		return dst, 0, &ProfileError{Reason: ReasonInvalidJSON, Detail: "not an object"}
	}
	var buf [32]int
	order := sortedMembers(buf[:0], v.Members, omit)
	members := v.Members
	at = -1
	dst = append(dst, '{')
	for k, i := range order {
		if at < 0 && CompareUTF16(members[i].Name, mark) > 0 {
			at = len(dst) // the comma before members[i], or just after '{' when k == 0
		}
		if k > 0 {
			if members[order[k-1]].Name == members[i].Name {
				return dst, 0, &ProfileError{Reason: ReasonDuplicateObjectName, Detail: "a name repeats within one object"}
			}
			dst = append(dst, ',')
		}
		if dst, err = appendString(dst, members[i].Name); err != nil {
			return dst, 0, err
		}
		dst = append(dst, ':')
		if dst, err = appendValue(dst, members[i].Value, nil); err != nil {
			return dst, 0, err
		}
	}
	if at < 0 {
		at = len(dst)
	}
	return append(dst, '}'), at, nil
}

// sortedMembers appends to order the indexes of members not named in omit,
// sorted by RFC 8785 order of their names.
func sortedMembers(order []int, members []Member, omit []string) []int {
	for i := range members {
		if len(omit) > 0 && slices.Contains(omit, members[i].Name) {
			continue
		}
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int { return CompareUTF16(members[a].Name, members[b].Name) })
	return order
}

func appendValue(dst []byte, v Value, omit []string) ([]byte, error) {
	switch v.Kind {
	case Null:
		return append(dst, "null"...), nil
	case Bool:
		if v.Bool {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case Int:
		if v.Int > MaxSafeInteger || v.Int < -MaxSafeInteger {
			return dst, &ProfileError{Reason: ReasonUnsafeInteger, Detail: "integer outside ±(2^53-1)"}
		}
		return strconv.AppendInt(dst, v.Int, 10), nil
	case String:
		return appendString(dst, v.Str)
	case Array:
		dst = append(dst, '[')
		for i := range v.Elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, v.Elems[i], nil); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case Object:
		return appendObject(dst, v.Members, omit)
	}
	return dst, &ProfileError{Reason: ReasonInvalidJSON, Detail: "unknown value kind"}
}

func appendObject(dst []byte, members []Member, omit []string) ([]byte, error) {
	var buf [32]int
	order := sortedMembers(buf[:0], members, omit)
	dst = append(dst, '{')
	for k, i := range order {
		if k > 0 {
			if members[order[k-1]].Name == members[i].Name {
				return dst, &ProfileError{Reason: ReasonDuplicateObjectName, Detail: "a name repeats within one object"}
			}
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendString(dst, members[i].Name); err != nil {
			return dst, err
		}
		dst = append(dst, ':')
		if dst, err = appendValue(dst, members[i].Value, nil); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

func appendString(dst []byte, s string) ([]byte, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return dst, &ProfileError{Reason: ReasonNULNotAdmitted, Detail: "U+0000 in a string"}
	}
	if !utf8.ValidString(s) {
		return dst, &ProfileError{Reason: ReasonInvalidUTF8, Detail: "string is not UTF-8"}
	}
	// Fast path: RFC 8785 escapes only '"', '\\' and U+0000–U+001F, and
	// writes every other (already validated) character as itself.
	if !needsEscape(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"'), nil
	}
	// RFC 8785 §3.2.2.2: jsontext.AppendQuote emits exactly the minimal escapes.
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		return dst, &ProfileError{Reason: ReasonInvalidUTF8, Detail: "string is not UTF-8"}
	}
	return out, nil
}

// needsEscape reports whether s holds a byte that RFC 8785 escapes.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return true
		}
	}
	return false
}

// CompareUTF16 orders a and b by their UTF-16 code units, as RFC 8785
// §3.2.3 sorts object member names. It returns -1, 0 or +1. Both must be
// valid UTF-8.
func CompareUTF16(a, b string) int {
	i, j := 0, 0
	for {
		if i == len(a) {
			if j == len(b) {
				return 0
			}
			return -1
		}
		if j == len(b) {
			return 1
		}
		ca, cb := a[i], b[j]
		if ca < utf8.RuneSelf && cb < utf8.RuneSelf {
			if ca != cb {
				return cmpInt(int(ca), int(cb))
			}
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRuneInString(a[i:])
		rb, nb := utf8.DecodeRuneInString(b[j:])
		if ra != rb {
			if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
				return cmpInt(ua, ub)
			}
			return cmpInt(int(ra), int(rb))
		}
		i += na
		j += nb
	}
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) int {
	if r >= 0x10000 {
		return 0xD800 + int((r-0x10000)>>10)
	}
	return int(r)
}

func cmpInt(a, b int) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// CanonicalizeBytes parses data under the strict profile and returns its
// RFC 8785 bytes. Errors are those of Parse.
func CanonicalizeBytes(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return Canonical(v)
}
