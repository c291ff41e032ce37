package relay

import (
	"mime"
	"net/http"
	"strings"

	"github.com/acrelay/acrelay/wire"
)

// Media types of spec §9.
const (
	mediaVendorJSON = wire.MediaTypeVendorJSON
	mediaJSON       = wire.MediaTypeJSON
	mediaAtom       = wire.MediaTypeAtom
)

var (
	offersEvents = []string{mediaVendorJSON, mediaJSON, mediaAtom}
	offersJSON   = []string{mediaVendorJSON, mediaJSON}
)

// mediaRange is one valid member of an Accept header. q is in
// thousandths (0–1000), as qvalue has at most three decimals;
// parameterized is true when it carried charset=utf-8, which makes it
// more specific than the bare type (RFC 9110 §12.5.1).
type mediaRange struct {
	typ, sub      string
	q             int
	parameterized bool
}

// parseAccept parses an Accept header (RFC 9110 §12.5.1) into the ranges
// that can match an offer of this relay. A member is left out, so that it
// matches nothing, when it is malformed (a bad type, a parameter without a
// value, an unterminated quoted string), when its weight is not a qvalue
// ("q=wat", "q=1.0001", "q=2"), or when a media-range parameter before q
// is anything but charset=utf-8 (the profile's rule: an unsupported
// parameter does not match an unparameterized offer). Parameters after q
// are accept extensions and are ignored. Other members still count.
func parseAccept(h string) []mediaRange {
	var out []mediaRange
	for len(h) > 0 {
		var mr mediaRange
		var ok bool
		mr, ok, h = parseAcceptMember(h)
		if ok {
			out = append(out, mr)
		}
	}
	return out
}

// parseAcceptMember parses the member at the start of h and returns the
// rest after its comma. ok is false for a member that matches nothing.
func parseAcceptMember(h string) (mr mediaRange, ok bool, rest string) {
	h = strings.TrimLeft(h, " \t,")
	if h == "" {
		return mediaRange{}, false, ""
	}
	typ, h := cutToken(h)
	if typ == "" || !strings.HasPrefix(h, "/") {
		return mediaRange{}, false, skipMember(h)
	}
	sub, h := cutToken(h[1:])
	typ, sub = strings.ToLower(typ), strings.ToLower(sub)
	if sub == "" || (typ == "*" && sub != "*") {
		return mediaRange{}, false, skipMember(h)
	}
	mr = mediaRange{typ: typ, sub: sub, q: 1000}
	valid, weighted := true, false
	for {
		h = strings.TrimLeft(h, " \t")
		if h == "" || h[0] == ',' {
			break
		}
		if h[0] != ';' {
			return mediaRange{}, false, skipMember(h)
		}
		h = strings.TrimLeft(h[1:], " \t")
		if h == "" || h[0] == ',' || h[0] == ';' {
			continue // an empty parameter
		}
		var name, value string
		var hasValue, quoted bool
		name, h = cutToken(h)
		if name == "" {
			return mediaRange{}, false, skipMember(h)
		}
		if strings.HasPrefix(h, "=") {
			var vok bool
			if value, quoted, h, vok = cutValue(h[1:]); !vok {
				return mediaRange{}, false, skipMember(h)
			}
			hasValue = true
		}
		name = strings.ToLower(name)
		switch {
		case weighted:
			// An accept extension: ignored.
		case name == "q":
			weighted = true
			q, qok := parseQValue(value, hasValue && !quoted)
			valid = valid && qok
			mr.q = q
		case !hasValue:
			return mediaRange{}, false, skipMember(h)
		case name == "charset" && strings.EqualFold(value, "utf-8"):
			mr.parameterized = true
		default:
			valid = false // matches no offer: keep reading to the next member
		}
	}
	return mr, valid, h
}

// parseQValue parses a qvalue: "0" ["." 0*3DIGIT] / "1" ["." 0*3"0"],
// in thousandths. A quoted or absent value is malformed.
func parseQValue(v string, hasValue bool) (int, bool) {
	if !hasValue || v == "" || len(v) > 5 || (v[0] != '0' && v[0] != '1') {
		return 0, false
	}
	q := int(v[0]-'0') * 1000
	if len(v) == 1 {
		return q, true
	}
	if v[1] != '.' {
		return 0, false
	}
	frac := v[2:]
	scale := 100
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' || (q == 1000 && c != '0') {
			return 0, false
		}
		q += int(c-'0') * scale
		scale /= 10
	}
	return q, true
}

// cutToken splits off the longest RFC 9110 token at the start of s.
func cutToken(s string) (tok, rest string) {
	i := 0
	for i < len(s) && isTChar(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// cutValue reads a parameter value: a token, or a quoted-string returned
// unquoted (RFC 9110 §5.6.4) with quoted true (a qvalue is never quoted).
// ok is false for an empty token or an unterminated string; rest is then
// the input.
func cutValue(s string) (value string, quoted bool, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		v, rest := cutToken(s)
		return v, false, rest, v != ""
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), true, s[i+1:], true
		case '\\':
			if i+1 == len(s) {
				return "", false, s, false
			}
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return "", false, s, false
}

// skipMember returns what follows the next comma outside a quoted string.
func skipMember(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',':
			return s[i+1:]
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return ""
}

func isTChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// negotiate picks the offer with the highest q under the most specific
// matching range of the Accept header (RFC 9110 §12.5.1); ties go to the
// earlier offer (the server's preference), so "*/*" alone yields the first
// offer. Members parseAccept leaves out match nothing. No Accept header
// means the first offer.
func negotiate(r *http.Request, offers []string) (string, bool) {
	h := strings.Join(r.Header.Values("Accept"), ",")
	if strings.TrimSpace(h) == "" {
		return offers[0], true
	}
	return pickOffer(parseAccept(h), offers)
}

func pickOffer(ranges []mediaRange, offers []string) (string, bool) {
	best, bestQ := "", 0
	for _, offer := range offers {
		ot, os, _ := strings.Cut(offer, "/")
		spec, q := -1, 0
		for _, mr := range ranges {
			s := -1
			switch {
			case mr.typ == ot && mr.sub == os && mr.parameterized:
				s = 3
			case mr.typ == ot && mr.sub == os:
				s = 2
			case mr.typ == ot && mr.sub == "*":
				s = 1
			case mr.typ == "*" && mr.sub == "*":
				s = 0
			}
			if s < 0 {
				continue
			}
			if s > spec || (s == spec && mr.q > q) {
				spec, q = s, mr.q
			}
		}
		if q > bestQ {
			best, bestQ = offer, q
		}
	}
	return best, bestQ > 0
}

// acceptableBody checks a request's body headers: exactly one
// Content-Type, acceptable by acceptableBodyType, and no content coding
// (a gzip body would otherwise be parsed as if it were plain JSON).
func acceptableBody(r *http.Request) bool {
	cts := r.Header.Values("Content-Type")
	if len(cts) != 1 {
		return false
	}
	for _, ce := range r.Header.Values("Content-Encoding") {
		if !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			return false
		}
	}
	return acceptableBodyType(cts[0])
}

// acceptableBodyType checks a request Content-Type: one of the JSON media
// types, with no charset or charset=utf-8.
func acceptableBodyType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	if mt != mediaJSON && mt != mediaVendorJSON {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}
