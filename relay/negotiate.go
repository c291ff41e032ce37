package relay

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Media types of spec §9.
const (
	mediaVendorJSON = "application/vnd.agenttool.correspondence+json"
	mediaJSON       = "application/json"
	mediaAtom       = "application/atom+xml"
)

var (
	offersEvents = []string{mediaVendorJSON, mediaJSON, mediaAtom}
	offersJSON   = []string{mediaVendorJSON, mediaJSON}
)

type mediaRange struct {
	typ, sub string
	q        float64
	charset  string
}

// parseAccept parses an Accept header leniently: unparseable members are
// skipped, q outside [0,1] is clamped.
func parseAccept(h string) []mediaRange {
	var out []mediaRange
	for _, part := range strings.Split(h, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ";")
		full := strings.ToLower(strings.TrimSpace(fields[0]))
		typ, sub, ok := strings.Cut(full, "/")
		if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
			continue
		}
		mr := mediaRange{typ: typ, sub: sub, q: 1}
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			k = strings.ToLower(strings.TrimSpace(k))
			v = strings.Trim(strings.TrimSpace(v), `"`)
			switch k {
			case "q":
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					mr.q = min(max(f, 0), 1)
				}
			case "charset":
				mr.charset = strings.ToLower(v)
			}
		}
		out = append(out, mr)
	}
	return out
}

// negotiate picks the offer with the highest q under the most specific
// matching range of the Accept header; ties go to the earlier offer (the
// server's preference). A range naming a charset other than utf-8 matches
// nothing (spec §9). No Accept header means the first offer.
func negotiate(r *http.Request, offers []string) (string, bool) {
	h := strings.Join(r.Header.Values("Accept"), ",")
	if strings.TrimSpace(h) == "" {
		return offers[0], true
	}
	ranges := parseAccept(h)
	best, bestQ := "", 0.0
	for _, offer := range offers {
		ot, os, _ := strings.Cut(offer, "/")
		spec, q := -1, 0.0
		for _, mr := range ranges {
			s := -1
			switch {
			case mr.typ == ot && mr.sub == os:
				s = 2
			case mr.typ == ot && mr.sub == "*":
				s = 1
			case mr.typ == "*" && mr.sub == "*":
				s = 0
			}
			if s < 0 || (mr.charset != "" && mr.charset != "utf-8") {
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
