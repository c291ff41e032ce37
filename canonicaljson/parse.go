package canonicaljson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
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
	// ReasonJSONDepthExceeded refuses input nested deeper than MaxDepth,
	// before any other check (spec §2, as the reference service does).
	ReasonJSONDepthExceeded = "json_depth_exceeded"
)

// MaxDepth is the deepest nesting of arrays and objects Parse admits: a
// top-level scalar has depth 0, "[]" and "{}" depth 1. A valid event is a
// few levels deep.
const MaxDepth = 64

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
// input is first checked to nest at most MaxDepth deep
// (json_depth_exceeded, whatever else is wrong with it), then to be UTF-8
// (invalid_utf8), then the first violation in document order decides the
// reason.
func Parse(data []byte) (Value, error) {
	if off, ok := depthWithin(data, MaxDepth); !ok {
		return Value{}, &ProfileError{Reason: ReasonJSONDepthExceeded, Offset: int64(off), Detail: "arrays and objects nest deeper than 64"}
	}
	if !utf8.Valid(data) {
		return Value{}, &ProfileError{Reason: ReasonInvalidUTF8, Offset: int64(firstInvalidUTF8(data)), Detail: "input is not UTF-8"}
	}
	p := parserPool.Get().(*parser)
	defer p.release()
	p.data = data
	// A *bytes.Buffer lets jsontext read data in place instead of copying it.
	p.dec.Reset(bytes.NewBuffer(data))
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

// depthWithin scans data once, before any parsing, for brackets outside
// strings: ok is false when more than limit arrays and objects are open at
// once, with off the offset of the bracket that opened one too many. It
// judges nothing else: a malformed document within the bound (a stray
// closing bracket, an unterminated string) is for the parser to refuse.
func depthWithin(data []byte, limit int) (off int, ok bool) {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth++; depth > limit {
				return i, false
			}
		case ']', '}':
			depth = max(depth-1, 0)
		}
	}
	return 0, true
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

// parserPool recycles decoders and member/element stacks between parses,
// which removes most of a small document's allocations.
var parserPool = sync.Pool{New: func() any {
	return &parser{dec: jsontext.NewDecoder(bytes.NewBuffer(nil))}
}}

// maxPooledStack bounds the stacks a pooled parser keeps (in entries).
const maxPooledStack = 1024

// release drops every reference to the parsed document and returns p to
// the pool.
func (p *parser) release() {
	p.data = nil
	p.dec.Reset(bytes.NewBuffer(nil))
	if cap(p.elems) > maxPooledStack || cap(p.members) > maxPooledStack {
		return
	}
	clear(p.elems[:cap(p.elems)])
	clear(p.members[:cap(p.members)])
	p.elems, p.members = p.elems[:0], p.members[:0]
	parserPool.Put(p)
}

type parser struct {
	data    []byte
	dec     *jsontext.Decoder
	elems   []Value           // stack of the open arrays' elements
	names   map[string]string // interned object names, kept across parses
	members []Member          // stack of the open objects' members
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
		// Elements gather on a stack shared by all arrays of the document
		// and are copied out once, exactly sized, when the array closes.
		base := len(p.elems)
		for {
			t, err := p.dec.ReadToken()
			if err != nil {
				return Value{}, p.mapErr(err)
			}
			if t.Kind() == ']' {
				var elems []Value
				if n := len(p.elems) - base; n > 0 {
					elems = make([]Value, n)
					copy(elems, p.elems[base:])
					p.elems = p.elems[:base]
				}
				return Value{Kind: Array, Elems: elems}, nil
			}
			e, err := p.value(t)
			if err != nil {
				return Value{}, err
			}
			p.elems = append(p.elems, e)
		}
	case '{':
		base := len(p.members) // same stack discipline as arrays
		for {
			if p.dec.PeekKind() == '"' {
				name, err := p.name()
				if err != nil {
					return Value{}, err
				}
				t, err := p.dec.ReadToken()
				if err != nil {
					return Value{}, p.mapErr(err)
				}
				e, err := p.value(t)
				if err != nil {
					return Value{}, err
				}
				p.members = append(p.members, Member{Name: name, Value: e})
				continue
			}
			t, err := p.dec.ReadToken()
			if err != nil {
				return Value{}, p.mapErr(err)
			}
			if t.Kind() == '}' {
				var members []Member
				if n := len(p.members) - base; n > 0 {
					members = make([]Member, n)
					copy(members, p.members[base:])
					p.members = p.members[:base]
				}
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
			p.members = append(p.members, Member{Name: name, Value: e})
		}
	}
	return Value{}, &ProfileError{Reason: ReasonInvalidJSON, Offset: p.dec.InputOffset()}
}

// maxInterned bounds the object names a pooled parser remembers.
const maxInterned = 512

// name reads an object name. Names without escapes are interned in the
// pooled parser, so the names a relay sees on every document (protocol,
// event_id, …) cost no allocation after the first time.
func (p *parser) name() (string, error) {
	raw, err := p.dec.ReadValue() // checks grammar, surrogates and duplicates
	if err != nil {
		return "", p.mapErr(err)
	}
	var name string
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 {
		if s, ok := p.names[string(inner)]; ok {
			return s, nil
		}
		name = string(inner)
		if len(name) <= 64 && len(p.names) < maxInterned {
			if p.names == nil {
				p.names = make(map[string]string)
			}
			p.names[name] = name
		}
	} else {
		b, err := jsontext.AppendUnquote(nil, raw)
		if err != nil {
			return "", p.mapErr(err)
		}
		name = string(b)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", &ProfileError{Reason: ReasonNULNotAdmitted, Offset: p.dec.InputOffset(), Detail: "U+0000 in an object name"}
	}
	return name, nil
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
