package canonicaljson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Reason codes of the strict profile (spec §2, seed rejection_vectors).
// They are stable and travel unchanged into HTTP error bodies.
const (
	ReasonInvalidJSON         = "invalid_json"
	ReasonDuplicateObjectName = "duplicate_object_name"
	ReasonFractionalNumber    = "fractional_number"
	ReasonNegativeZero        = "negative_zero"
	ReasonUnsafeInteger       = "unsafe_integer"
	ReasonInvalidJSONNumber   = "invalid_json_number"
	ReasonNULNotAdmitted      = "nul_not_admitted"
	ReasonNonScalarUnicode    = "non_scalar_unicode"
	ReasonInvalidUTF8         = "invalid_utf8"
)

// ErrProfile is matched by every *ProfileError through errors.Is.
var ErrProfile = errors.New("json outside the strict profile")

// ProfileError is a refusal of input under the strict profile (spec §2).
// Reason is one of the Reason* codes; Offset is the byte offset in the input
// at or after which the violation was found; Detail is a short, fixed
// English explanation that never quotes the input.
type ProfileError struct {
	Reason string
	Offset int64
	Detail string
}

func (e *ProfileError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s at byte %d: %s", e.Reason, e.Offset, e.Detail)
	}
	return fmt.Sprintf("%s at byte %d", e.Reason, e.Offset)
}

// Is makes errors.Is(err, ErrProfile) true for every ProfileError.
func (e *ProfileError) Is(target error) bool { return target == ErrProfile }

// Parse reads exactly one JSON value (any type at the top level) under the
// strict profile of spec §2 and returns it. Errors are *ProfileError: the
// input is first checked to be UTF-8 (invalid_utf8), then the first
// violation in document order decides the reason. Nesting depth is bounded
// by jsontext's limit (10,000 levels); deeper input is invalid_json, with no
// risk to the stack.
func Parse(data []byte) (Value, error) {
	if !utf8.Valid(data) {
		return Value{}, &ProfileError{Reason: ReasonInvalidUTF8, Offset: int64(firstInvalidUTF8(data)), Detail: "input is not UTF-8"}
	}
	p := parser{data: data, dec: jsontext.NewDecoder(bytes.NewReader(data))}
	tok, err := p.dec.ReadToken()
	if err != nil {
		return Value{}, p.mapErr(err)
	}
	v, err := p.value(tok)
	if err != nil {
		return Value{}, err
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		if err == nil {
			return Value{}, &ProfileError{Reason: ReasonInvalidJSON, Offset: p.dec.InputOffset(), Detail: "content after the top-level value"}
		}
		return Value{}, p.mapErr(err)
	}
	return v, nil
}

// ParseObject is Parse for documents whose top level must be an object
// (events, envelopes, contracts). A well-formed, in-profile document of
// another type is refused as invalid_json.
func ParseObject(data []byte) (Value, error) {
	v, err := Parse(data)
	if err != nil {
		return Value{}, err
	}
	if v.Kind != Object {
		return Value{}, &ProfileError{Reason: ReasonInvalidJSON, Offset: 0, Detail: "the document must be a JSON object"}
	}
	return v, nil
}

type parser struct {
	data []byte
	dec  *jsontext.Decoder
}

func (p *parser) value(tok jsontext.Token) (Value, error) {
	switch tok.Kind() {
	case 'n':
		return Value{}, nil
	case 't':
		return Value{Kind: Bool, Bool: true}, nil
	case 'f':
		return Value{Kind: Bool}, nil
	case '"':
		s := tok.String()
		if strings.IndexByte(s, 0) >= 0 {
			return Value{}, &ProfileError{Reason: ReasonNULNotAdmitted, Offset: p.dec.InputOffset(), Detail: "U+0000 in a string"}
		}
		return Value{Kind: String, Str: s}, nil
	case '0':
		return p.number(tok)
	case '[':
		var elems []Value
		for {
			t, err := p.dec.ReadToken()
			if err != nil {
				return Value{}, p.mapErr(err)
			}
			if t.Kind() == ']' {
				return Value{Kind: Array, Elems: elems}, nil
			}
			e, err := p.value(t)
			if err != nil {
				return Value{}, err
			}
			elems = append(elems, e)
		}
	case '{':
		var members []Member
		for {
			t, err := p.dec.ReadToken()
			if err != nil {
				return Value{}, p.mapErr(err)
			}
			if t.Kind() == '}' {
				return Value{Kind: Object, Members: members}, nil
			}
			name := t.String()
			if strings.IndexByte(name, 0) >= 0 {
				return Value{}, &ProfileError{Reason: ReasonNULNotAdmitted, Offset: p.dec.InputOffset(), Detail: "U+0000 in an object name"}
			}
			t, err = p.dec.ReadToken()
			if err != nil {
				return Value{}, p.mapErr(err)
			}
			e, err := p.value(t)
			if err != nil {
				return Value{}, err
			}
			members = append(members, Member{Name: name, Value: e})
		}
	}
	return Value{}, &ProfileError{Reason: ReasonInvalidJSON, Offset: p.dec.InputOffset()}
}

// number applies the profile to one number token: the maximal run of
// number-like bytes must be an RFC 8259 number, then fractions and
// exponents, negative zero and unsafe integers are refused in that order.
func (p *parser) number(tok jsontext.Token) (Value, error) {
	end := p.dec.InputOffset()
	if end < int64(len(p.data)) && isNumberRunByte(p.data[end]) {
		return Value{}, &ProfileError{Reason: ReasonInvalidJSONNumber, Offset: end, Detail: "not a JSON number"}
	}
	raw := tok.String()
	if strings.ContainsAny(raw, ".eE") {
		return Value{}, &ProfileError{Reason: ReasonFractionalNumber, Offset: end, Detail: "only integers are admitted"}
	}
	if raw == "-0" {
		return Value{}, &ProfileError{Reason: ReasonNegativeZero, Offset: end, Detail: "-0 is not admitted"}
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n > MaxSafeInteger || n < -MaxSafeInteger {
		return Value{}, &ProfileError{Reason: ReasonUnsafeInteger, Offset: end, Detail: "integer outside ±(2^53-1)"}
	}
	return Value{Kind: Int, Int: n}, nil
}

func isNumberRunByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '+' || c == '-' || c == '.'
}

// mapErr turns a jsontext error into the profile's reason codes, following
// the decision rules of corpora/README.md §1.
func (p *parser) mapErr(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &ProfileError{Reason: ReasonInvalidJSON, Offset: int64(len(p.data)), Detail: "unexpected end of input"}
	}
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return &ProfileError{Reason: ReasonInvalidJSON, Offset: p.dec.InputOffset()}
	}
	off := se.ByteOffset
	msg := se.Error()
	switch {
	case errors.Is(se.Err, jsontext.ErrDuplicateName) || strings.Contains(msg, "duplicate object member name"):
		return &ProfileError{Reason: ReasonDuplicateObjectName, Offset: off, Detail: "a name repeats within one object"}
	case strings.Contains(msg, "surrogate"):
		return &ProfileError{Reason: ReasonNonScalarUnicode, Offset: off, Detail: "lone surrogate"}
	case strings.Contains(msg, "in number"):
		return &ProfileError{Reason: ReasonInvalidJSONNumber, Offset: off, Detail: "not a JSON number"}
	case strings.Contains(msg, "at start of value") && off < int64(len(p.data)):
		rest := p.data[off:]
		if rest[0] == '+' || rest[0] == '.' || bytes.HasPrefix(rest, []byte("NaN")) || bytes.HasPrefix(rest, []byte("Inf")) {
			return &ProfileError{Reason: ReasonInvalidJSONNumber, Offset: off, Detail: "not a JSON number"}
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &ProfileError{Reason: ReasonInvalidJSON, Offset: off, Detail: "unexpected end of input"}
	}
	return &ProfileError{Reason: ReasonInvalidJSON, Offset: off, Detail: "not JSON"}
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
