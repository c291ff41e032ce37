package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
)

// Refusal reason codes (spec/predicate-envelope-1.md). They are stable and
// travel unchanged into the HTTP body {"error":"envelope_refused","reason":…}
// and the CLI's exit message. Strict-profile refusals keep their own codes
// (canonicaljson.Reason*): a fractional JSON number anywhere, for example,
// is fractional_number before any envelope rule runs.
const (
	// ReasonUnregisteredPredicate: a predicate's type is not one of amount,
	// counterparty_reference, data_class, region, record_count,
	// model_provenance (or is not a string). Never ignored (seed vector
	// reject-unregistered-predicate).
	ReasonUnregisteredPredicate = "unregistered_predicate"
	// ReasonDecimalNotString: a JSON value other than a string where a
	// decimal string is required (amount.value, record_count.value), such
	// as the integer 1200 (seed vector reject-decimal-as-json-number).
	ReasonDecimalNotString = "decimal_not_string"
	// ReasonIdentifierInvalid: agentId, tool, action, environment or an
	// identifier-valued predicate field is not 1–128 characters of
	// a-z 0-9 . _ - starting and ending with a letter or digit (seed vector
	// reject-free-text-identifier).
	ReasonIdentifierInvalid = "identifier_invalid"
	// ReasonTimestampNotUTCms: requestedAt is not a valid instant written
	// exactly as YYYY-MM-DDTHH:MM:SS.mmmZ (seed vector reject-local-time-offset).
	ReasonTimestampNotUTCms = "timestamp_not_utc_ms"
	// ReasonUnknownField: a member not defined for the envelope or for the
	// predicate's type (closed objects).
	ReasonUnknownField = "unknown_field"
	// ReasonDuplicatePredicate: two predicates with identical canonical
	// bytes in one envelope (project decision).
	ReasonDuplicatePredicate = "duplicate_predicate"
	// ReasonRequired: a required member is absent; Pointer names it.
	ReasonRequired = "required"
	// ReasonUUIDInvalid: tenantId or intentId is not a canonical lowercase
	// hyphenated UUID (8-4-4-4-12 hex digits).
	ReasonUUIDInvalid = "uuid_invalid"
	// ReasonSchemaVersionUnsupported: schemaVersion is not the string "1.0".
	ReasonSchemaVersionUnsupported = "schema_version_unsupported"
	// ReasonPredicatesInvalid: predicates is not an array, or one of its
	// elements is not an object.
	ReasonPredicatesInvalid = "predicates_invalid"
	// ReasonCurrencyInvalid: amount.currency is not three uppercase ASCII
	// letters (ISO 4217 alpha-3 shape; membership is not checked).
	ReasonCurrencyInvalid = "currency_invalid"
	// ReasonRegionInvalid: region.value is not two uppercase ASCII letters
	// (ISO 3166-1 alpha-2 shape; membership is not checked).
	ReasonRegionInvalid = "region_invalid"
	// ReasonDecimalInvalid: amount.value is a string but not
	// 0|[1-9][0-9]* optionally followed by "." and 1–18 digits (no sign, no
	// exponent, no bare trailing dot).
	ReasonDecimalInvalid = "decimal_invalid"
	// ReasonRecordCountInvalid: record_count.value is a string but not a
	// non-negative integer without leading zeros, at most 2^53-1.
	ReasonRecordCountInvalid = "record_count_invalid"
	// ReasonAccessInvalid: data_class.access is not read, write or delete.
	ReasonAccessInvalid = "access_invalid"
	// ReasonHostingInvalid: model_provenance.hosting is not self_hosted or
	// vendor_hosted.
	ReasonHostingInvalid = "hosting_invalid"
)

// SchemaVersion is the only envelope schemaVersion this package accepts.
const SchemaVersion = "1.0"

// ErrRefused is matched by every *RefusalError through errors.Is.
var ErrRefused = errors.New("predicate envelope refused")

// RefusalError is a refusal of an in-profile document under the envelope
// rules. Reason is one of the Reason* codes; Pointer is the RFC 6901 JSON
// pointer of the offending member in the input ("" for the whole document);
// Detail is a fixed English explanation that never quotes the input.
type RefusalError struct {
	Reason  string
	Pointer string
	Detail  string
}

func (e *RefusalError) Error() string {
	msg := e.Reason
	if e.Pointer != "" {
		msg += " at " + e.Pointer
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is makes errors.Is(err, ErrRefused) true for every RefusalError.
func (e *RefusalError) Is(target error) bool { return target == ErrRefused }

func refuse(reason, ptr, detail string) error {
	return &RefusalError{Reason: reason, Pointer: ptr, Detail: detail}
}

// Canonicalize checks raw as a predicate envelope v1 and returns its
// canonical RFC 8785 bytes and the SHA-256 of those bytes as 64 uppercase
// hex digits (spec/predicate-envelope-1.md "Canonical form").
//
// Errors: *canonicaljson.ProfileError when raw is outside the strict JSON
// profile or not an object (that check runs first); otherwise
// *RefusalError with a Reason* code. Nothing else is returned.
func Canonicalize(raw []byte) (canonical []byte, hash string, err error) {
	doc, err := canonicaljson.ParseObject(raw)
	if err != nil {
		return nil, "", err
	}
	v, err := canonicalValue(doc)
	if err != nil {
		return nil, "", err
	}
	canonical, err = canonicaljson.Canonical(v)
	if err != nil {
		// Unreachable: every string comes from Parse and every integer is
		// bounded by 2^53-1.
		return nil, "", fmt.Errorf("canonicalize envelope: %w", err)
	}
	return canonical, Hash(canonical), nil
}

// Hash returns the SHA-256 of canonical as 64 uppercase hex digits.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// Digest turns an envelope hash (uppercase hex) into the content digest a
// correspondence artifact.offer cites: "sha256:" followed by lowercase hex.
func Digest(hash string) string {
	return "sha256:" + strings.ToLower(hash)
}

// envelopeFields are the members of the input object, in the order their
// presence and rules are checked.
var envelopeFields = []string{
	"schemaVersion", "tenantId", "intentId", "agentId", "tool", "action",
	"environment", "requestedAt", "predicates",
}

func canonicalValue(doc canonicaljson.Value) (canonicaljson.Value, error) {
	for _, m := range doc.Members {
		if !slices.Contains(envelopeFields, m.Name) {
			return canonicaljson.Value{}, refuse(ReasonUnknownField, pointer("", m.Name), "member not defined by the envelope")
		}
	}
	for _, name := range envelopeFields {
		if _, ok := doc.Get(name); !ok {
			return canonicaljson.Value{}, refuse(ReasonRequired, pointer("", name), "required member is absent")
		}
	}
	get := func(name string) canonicaljson.Value { v, _ := doc.Get(name); return v }

	if v := get("schemaVersion"); v.Kind != canonicaljson.String || v.Str != SchemaVersion {
		return canonicaljson.Value{}, refuse(ReasonSchemaVersionUnsupported, "/schemaVersion", `schemaVersion must be "1.0"`)
	}
	for _, name := range []string{"tenantId", "intentId"} {
		if v := get(name); v.Kind != canonicaljson.String || !validUUID(v.Str) {
			return canonicaljson.Value{}, refuse(ReasonUUIDInvalid, "/"+name, "not a canonical lowercase UUID")
		}
	}
	out := []canonicaljson.Member{{Name: "schema_version", Value: canonicaljson.StringValue(SchemaVersion)}}
	for _, f := range []struct{ in, out string }{
		{"agentId", "agent_id"}, {"tool", "tool"}, {"action", "action"}, {"environment", "environment"},
	} {
		v, err := identifier(get(f.in), "/"+f.in)
		if err != nil {
			return canonicaljson.Value{}, err
		}
		out = append(out, canonicaljson.Member{Name: f.out, Value: v})
	}
	if v := get("requestedAt"); v.Kind != canonicaljson.String || !validUTCMillis(v.Str) {
		return canonicaljson.Value{}, refuse(ReasonTimestampNotUTCms, "/requestedAt", "not an RFC 3339 UTC instant with milliseconds (YYYY-MM-DDTHH:MM:SS.mmmZ)")
	}
	preds, err := canonicalPredicates(get("predicates"))
	if err != nil {
		return canonicaljson.Value{}, err
	}
	if len(preds) > 0 {
		out = append(out, canonicaljson.Member{Name: "predicates", Value: canonicaljson.ArrayValue(preds...)})
	}
	return canonicaljson.ObjectValue(out...), nil
}

// canonicalPredicates returns the canonical predicates sorted by their own
// JCS bytes, refusing duplicates.
func canonicalPredicates(v canonicaljson.Value) ([]canonicaljson.Value, error) {
	if v.Kind != canonicaljson.Array {
		return nil, refuse(ReasonPredicatesInvalid, "/predicates", "predicates must be an array")
	}
	type keyed struct {
		jcs []byte
		v   canonicaljson.Value
	}
	all := make([]keyed, 0, len(v.Elems))
	for i, e := range v.Elems {
		p, err := canonicalPredicate(e, "/predicates/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		jcs, err := canonicaljson.Canonical(p)
		if err != nil {
			return nil, fmt.Errorf("canonicalize predicate: %w", err)
		}
		all = append(all, keyed{jcs, p})
	}
	slices.SortFunc(all, func(a, b keyed) int { return bytes.Compare(a.jcs, b.jcs) })
	out := make([]canonicaljson.Value, len(all))
	for i := range all {
		if i > 0 && bytes.Equal(all[i].jcs, all[i-1].jcs) {
			return nil, refuse(ReasonDuplicatePredicate, "/predicates", "two predicates are identical")
		}
		out[i] = all[i].v
	}
	return out, nil
}

// predicateField is one input member of a registered predicate: its rule
// and the name it takes in the canonical object.
type predicateField struct {
	in, out string
	check   func(v canonicaljson.Value, ptr string) (canonicaljson.Value, error)
}

// registry lists the registered predicate types (spec "Registered
// predicates"); each object is closed over type plus these fields.
var registry = map[string][]predicateField{
	"amount": {
		{"currency", "currency", upperCode(3, ReasonCurrencyInvalid, "currency must be three uppercase letters (ISO 4217)")},
		{"value", "value", decimal},
	},
	"counterparty_reference": {
		{"value", "value", identifier},
	},
	"data_class": {
		{"value", "value", identifier},
		{"access", "access", oneOf(ReasonAccessInvalid, "access must be read, write or delete", "read", "write", "delete")},
	},
	"region": {
		{"value", "value", upperCode(2, ReasonRegionInvalid, "region must be two uppercase letters (ISO 3166-1 alpha-2)")},
	},
	"record_count": {
		{"value", "value", recordCount},
	},
	"model_provenance": {
		{"value", "model", identifier},
		{"hosting", "hosting", oneOf(ReasonHostingInvalid, "hosting must be self_hosted or vendor_hosted", "self_hosted", "vendor_hosted")},
	},
}

func canonicalPredicate(v canonicaljson.Value, ptr string) (canonicaljson.Value, error) {
	if v.Kind != canonicaljson.Object {
		return canonicaljson.Value{}, refuse(ReasonPredicatesInvalid, ptr, "a predicate must be an object")
	}
	t, ok := v.Get("type")
	if !ok {
		return canonicaljson.Value{}, refuse(ReasonRequired, ptr+"/type", "required member is absent")
	}
	fields, registered := registry[t.Str]
	if t.Kind != canonicaljson.String || !registered {
		return canonicaljson.Value{}, refuse(ReasonUnregisteredPredicate, ptr+"/type", "predicate type is not registered")
	}
	for _, m := range v.Members {
		known := m.Name == "type" || slices.ContainsFunc(fields, func(f predicateField) bool { return f.in == m.Name })
		if !known {
			return canonicaljson.Value{}, refuse(ReasonUnknownField, pointer(ptr, m.Name), "member not defined for this predicate type")
		}
	}
	out := []canonicaljson.Member{{Name: "type", Value: t}}
	for _, f := range fields {
		fv, ok := v.Get(f.in)
		if !ok {
			return canonicaljson.Value{}, refuse(ReasonRequired, ptr+"/"+f.in, "required member is absent")
		}
		cv, err := f.check(fv, ptr+"/"+f.in)
		if err != nil {
			return canonicaljson.Value{}, err
		}
		out = append(out, canonicaljson.Member{Name: f.out, Value: cv})
	}
	return canonicaljson.ObjectValue(out...), nil
}

// identifier admits 1–128 characters of a-z 0-9 . _ - that start and end
// with a letter or digit (spec "Identifier", project decision).
func identifier(v canonicaljson.Value, ptr string) (canonicaljson.Value, error) {
	if v.Kind != canonicaljson.String || !validIdentifier(v.Str) {
		return canonicaljson.Value{}, refuse(ReasonIdentifierInvalid, ptr, "not an identifier (1-128 of a-z 0-9 . _ -, alphanumeric at both ends)")
	}
	return v, nil
}

func validIdentifier(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || i == len(s)-1 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// decimal admits a decimal string kept exactly as written, scale included.
func decimal(v canonicaljson.Value, ptr string) (canonicaljson.Value, error) {
	if v.Kind != canonicaljson.String {
		return canonicaljson.Value{}, refuse(ReasonDecimalNotString, ptr, "a decimal must be a JSON string")
	}
	intPart, frac, hasFrac := strings.Cut(v.Str, ".")
	if !validNatural(intPart) || hasFrac && (len(frac) < 1 || len(frac) > 18 || !allDigits(frac)) {
		return canonicaljson.Value{}, refuse(ReasonDecimalInvalid, ptr, "not a decimal (digits, optional . and 1-18 digits; no sign or exponent)")
	}
	return v, nil
}

// recordCount turns a decimal string of a safe non-negative integer into a
// JSON integer.
func recordCount(v canonicaljson.Value, ptr string) (canonicaljson.Value, error) {
	if v.Kind != canonicaljson.String {
		return canonicaljson.Value{}, refuse(ReasonDecimalNotString, ptr, "a record count must be a JSON string")
	}
	if !validNatural(v.Str) || len(v.Str) > 16 {
		return canonicaljson.Value{}, refuse(ReasonRecordCountInvalid, ptr, "not a non-negative integer without leading zeros, at most 2^53-1")
	}
	n, err := strconv.ParseInt(v.Str, 10, 64)
	if err != nil || n > canonicaljson.MaxSafeInteger {
		return canonicaljson.Value{}, refuse(ReasonRecordCountInvalid, ptr, "not a non-negative integer without leading zeros, at most 2^53-1")
	}
	return canonicaljson.IntValue(n), nil
}

// validNatural reports whether s is 0|[1-9][0-9]*.
func validNatural(s string) bool {
	return s == "0" || len(s) > 0 && s[0] >= '1' && s[0] <= '9' && allDigits(s)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func upperCode(n int, reason, detail string) func(canonicaljson.Value, string) (canonicaljson.Value, error) {
	return func(v canonicaljson.Value, ptr string) (canonicaljson.Value, error) {
		ok := v.Kind == canonicaljson.String && len(v.Str) == n
		for i := 0; ok && i < n; i++ {
			ok = v.Str[i] >= 'A' && v.Str[i] <= 'Z'
		}
		if !ok {
			return canonicaljson.Value{}, refuse(reason, ptr, detail)
		}
		return v, nil
	}
}

func oneOf(reason, detail string, allowed ...string) func(canonicaljson.Value, string) (canonicaljson.Value, error) {
	return func(v canonicaljson.Value, ptr string) (canonicaljson.Value, error) {
		if v.Kind != canonicaljson.String || !slices.Contains(allowed, v.Str) {
			return canonicaljson.Value{}, refuse(reason, ptr, detail)
		}
		return v, nil
	}
}

// validUUID reports whether s is a canonical lowercase hyphenated UUID of
// any version (the vectors use the nil UUID).
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// validUTCMillis reports whether s is exactly YYYY-MM-DDTHH:MM:SS.mmmZ and
// names a real instant (no February 30, no leap second).
func validUTCMillis(s string) bool {
	const shape = "dddd-dd-ddTdd:dd:dd.dddZ"
	if len(s) != len(shape) {
		return false
	}
	for i := 0; i < len(shape); i++ {
		if shape[i] == 'd' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != shape[i] {
			return false
		}
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// pointer appends name to the RFC 6901 pointer base, escaping ~ and /.
func pointer(base, name string) string {
	return base + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}
