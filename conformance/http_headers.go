package conformance

import (
	"errors"
	"fmt"
	"mime"
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

// checkHeaders checks what every correspondence read carries (spec §9):
// a Content-Type with charset=utf-8, Vary, Cache-Control private, no-cache,
// no-transform (never public), the four Link relations (self and
// alternate only where wantAlternate), and the live template in
// Link-Template rather than Link.
func checkHeaders(hdr http.Header, wantAlternate bool) error {
	if _, params, err := mime.ParseMediaType(hdr.Get("Content-Type")); err != nil || !strings.EqualFold(params["charset"], "utf-8") {
		return fmt.Errorf("Content-Type %q, want one with charset=utf-8", hdr.Get("Content-Type"))
	}
	vary := strings.ToLower(strings.Join(hdr.Values("Vary"), ","))
	if !strings.Contains(vary, "accept") || !strings.Contains(vary, "authorization") {
		return fmt.Errorf("the Vary header is %q, want Accept and Authorization", vary)
	}
	if err := checkCacheControl(hdr, "private", "no-cache", "no-transform"); err != nil {
		return err
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

// checkCacheControl checks that Cache-Control holds every directive of
// want and never public (spec §9).
func checkCacheControl(hdr http.Header, want ...string) error {
	cc := strings.ToLower(strings.Join(hdr.Values("Cache-Control"), ","))
	have := map[string]bool{}
	for _, d := range strings.Split(cc, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(d), "=")
		have[name] = true
	}
	for _, d := range want {
		if !have[d] || have["public"] {
			return fmt.Errorf("Cache-Control %q, want %s and never public", cc, strings.Join(want, ", "))
		}
	}
	return nil
}

func mediaOf(hdr http.Header) string {
	mt, _, _ := strings.Cut(hdr.Get("Content-Type"), ";")
	return strings.TrimSpace(strings.ToLower(mt))
}
