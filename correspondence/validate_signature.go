package correspondence

import "github.com/acrelay/acrelay/canonicaljson"

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
