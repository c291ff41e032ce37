package conformance

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// link is one Link header member.
type link struct {
	href   string
	params map[string]string
}

// parseLinks reads an RFC 8288 Link header: <href>; k="v"; … , …
func parseLinks(h string) []link {
	var out []link
	for {
		i := strings.IndexByte(h, '<')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(h[i:], '>')
		if j < 0 {
			return out
		}
		l := link{href: h[i+1 : i+j], params: map[string]string{}}
		h = h[i+j+1:]
		end := strings.IndexByte(h, '<')
		if end < 0 {
			end = len(h)
		}
		for _, p := range strings.Split(h[:end], ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(p), ",")), "=")
			if ok {
				l.params[strings.ToLower(strings.TrimSpace(k))] = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
		out = append(out, l)
		h = h[end:]
	}
}

func linkRel(links []link, rel string) (link, bool) {
	for _, l := range links {
		if slices.Contains(strings.Fields(l.params["rel"]), rel) {
			return l, true
		}
	}
	return link{}, false
}

// checkHeaders checks what every correspondence response carries (spec
// §9): Vary, Cache-Control private, the four Link relations (self and
// alternate only where wantAlternate), and the live template in
// Link-Template rather than Link.
func checkHeaders(hdr http.Header, wantAlternate bool) error {
	vary := strings.ToLower(strings.Join(hdr.Values("Vary"), ","))
	if !strings.Contains(vary, "accept") || !strings.Contains(vary, "authorization") {
		return fmt.Errorf("the Vary header is %q, want Accept and Authorization", vary)
	}
	cc := strings.ToLower(hdr.Get("Cache-Control"))
	if !strings.Contains(cc, "private") || strings.Contains(cc, "public") {
		return fmt.Errorf("Cache-Control %q, want private", cc)
	}
	links := parseLinks(strings.Join(hdr.Values("Link"), ", "))
	rels := []string{"self", relVoice, relActiveClaims}
	if wantAlternate {
		rels = append(rels, "alternate")
	}
	for _, rel := range rels {
		if _, ok := linkRel(links, rel); !ok {
			return fmt.Errorf("no Link has rel %q", rel)
		}
	}
	if _, ok := linkRel(links, relLive); ok {
		return errors.New("the live template is a Link target; it belongs in Link-Template")
	}
	lt := hdr.Get("Link-Template")
	if !strings.HasPrefix(lt, `"`) || !strings.Contains(lt, "{identity_id}") ||
		!strings.Contains(lt, `;rel="`+relLive+`"`) || !strings.Contains(lt, `;type="text/event-stream"`) {
		return fmt.Errorf("Link-Template %q, want a quoted template with {identity_id}, rel=%q and type text/event-stream", lt, relLive)
	}
	return nil
}

func mediaOf(hdr http.Header) string {
	mt, _, _ := strings.Cut(hdr.Get("Content-Type"), ";")
	return strings.TrimSpace(strings.ToLower(mt))
}
