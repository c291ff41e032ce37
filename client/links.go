package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/dunglas/httpsfv"
	"github.com/yosida95/uritemplate/v3"
)

// Link relation types the relay advertises (spec §9).
const (
	RelSelf          = "self"
	RelAlternate     = "alternate"
	RelVoice         = "https://agenttool.dev/rels/correspondence-voice"
	RelActiveClaims  = "https://agenttool.dev/rels/active-claims"
	RelLive          = "https://agenttool.dev/rels/correspondence-live"
	MediaTypeVendor  = "application/vnd.agenttool.correspondence+json"
	MediaTypeAtom    = "application/atom+xml"
	MediaTypeSSE     = "text/event-stream"
	mediaTypeJSON    = "application/json"
	acceptJSONVendor = MediaTypeVendor + ", " + mediaTypeJSON + ";q=0.9"
)

// ErrNoLink reports that a response carried no link of the wanted
// relation (and media type, when one was asked for).
var ErrNoLink = errors.New("no link with that relation")

// Link is one RFC 8288 link: Target resolved against the response's URL,
// its relation types (lowercased when registered, kept as given when
// URIs), and its other parameters by lowercase name (type, title, …).
type Link struct {
	Target string
	Rels   []string
	Params map[string]string
}

// LinkTemplate is one RFC 9652 Link-Template member: an RFC 6570 template
// (relative templates resolve after expansion), its relation types and
// other parameters.
type LinkTemplate struct {
	Template string
	Rels     []string
	Params   map[string]string
}

// Links are the links and link templates of one response (spec §9).
type Links struct {
	Base      *url.URL
	Links     []Link
	Templates []LinkTemplate
}

func hasRel(rels []string, rel string) bool {
	for _, r := range rels {
		if strings.EqualFold(r, rel) {
			return true
		}
	}
	return false
}

// Get returns the target of the first link with relation rel and, when
// mediaType is not "", that type parameter. Error: ErrNoLink.
func (l Links) Get(rel, mediaType string) (string, error) {
	for _, lk := range l.Links {
		if hasRel(lk.Rels, rel) && (mediaType == "" || strings.EqualFold(lk.Params["type"], mediaType)) {
			return lk.Target, nil
		}
	}
	return "", fmt.Errorf("%w %q", ErrNoLink, rel)
}

// Expand expands the first link template with relation rel using vars
// (RFC 6570; variables the template does not name are ignored) and
// resolves the result against Base. Errors: ErrNoLink, or a template that
// does not parse.
func (l Links) Expand(rel string, vars map[string]string) (string, error) {
	for _, t := range l.Templates {
		if !hasRel(t.Rels, rel) {
			continue
		}
		tpl, err := uritemplate.New(t.Template)
		if err != nil {
			return "", fmt.Errorf("link template %q: %w", rel, err)
		}
		vals := uritemplate.Values{}
		for k, v := range vars {
			vals.Set(k, uritemplate.String(v))
		}
		s, err := tpl.Expand(vals)
		if err != nil {
			return "", fmt.Errorf("link template %q: %w", rel, err)
		}
		return l.resolve(s)
	}
	return "", fmt.Errorf("%w %q", ErrNoLink, rel)
}

func (l Links) resolve(ref string) (string, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("link target: %w", err)
	}
	if l.Base == nil {
		return u.String(), nil
	}
	return l.Base.ResolveReference(u).String(), nil
}

// ParseLinks reads the Link (RFC 8288 §3) and Link-Template (RFC 9652, a
// Structured Field List of Strings) header fields of h, resolving link
// targets against base. Malformed members are an error rather than being
// skipped silently.
func ParseLinks(h http.Header, base *url.URL) (Links, error) {
	out := Links{Base: base}
	for _, field := range h.Values("Link") {
		links, err := parseLinkField(field)
		if err != nil {
			return out, err
		}
		for _, lk := range links {
			if lk.Target, err = out.resolve(lk.Target); err != nil {
				return out, err
			}
			out.Links = append(out.Links, lk)
		}
	}
	if vs := h.Values("Link-Template"); len(vs) > 0 {
		list, err := httpsfv.UnmarshalList(vs)
		if err != nil {
			return out, fmt.Errorf("link-template: %w", err)
		}
		for _, m := range list {
			it, ok := m.(httpsfv.Item)
			if !ok {
				return out, errors.New("link-template: member is not a string")
			}
			tpl, ok := it.Value.(string)
			if !ok {
				return out, errors.New("link-template: member is not a string")
			}
			lt := LinkTemplate{Template: tpl, Params: map[string]string{}}
			for _, name := range it.Params.Names() {
				v, _ := it.Params.Get(name)
				s, ok := v.(string)
				if !ok {
					if tok, isTok := v.(httpsfv.Token); isTok {
						s = string(tok)
					} else {
						continue
					}
				}
				if name == "rel" {
					lt.Rels = strings.Fields(s)
				} else {
					lt.Params[name] = s
				}
			}
			out.Templates = append(out.Templates, lt)
		}
	}
	return out, nil
}

// parseLinkField parses one Link field value: comma-separated
// `<target>; param=value; param="quoted"` members (RFC 8288 §3).
func parseLinkField(s string) ([]Link, error) {
	var out []Link
	i := 0
	skipWS := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		skipWS()
		if i >= len(s) {
			return out, nil
		}
		if s[i] == ',' {
			i++
			continue
		}
		if s[i] != '<' {
			return nil, errors.New("link: member does not start with <")
		}
		end := strings.IndexByte(s[i:], '>')
		if end < 0 {
			return nil, errors.New("link: unterminated <target>")
		}
		lk := Link{Target: s[i+1 : i+end], Params: map[string]string{}}
		i += end + 1
		for {
			skipWS()
			if i >= len(s) || s[i] == ',' {
				break
			}
			if s[i] != ';' {
				return nil, errors.New("link: expected ; between parameters")
			}
			i++
			skipWS()
			start := i
			for i < len(s) && s[i] != '=' && s[i] != ';' && s[i] != ',' && s[i] != ' ' && s[i] != '\t' {
				i++
			}
			name := strings.ToLower(s[start:i])
			skipWS()
			val := ""
			if i < len(s) && s[i] == '=' {
				i++
				skipWS()
				if i < len(s) && s[i] == '"' {
					i++
					var b strings.Builder
					for i < len(s) && s[i] != '"' {
						if s[i] == '\\' && i+1 < len(s) {
							i++
						}
						b.WriteByte(s[i])
						i++
					}
					if i >= len(s) {
						return nil, errors.New("link: unterminated quoted string")
					}
					i++
					val = b.String()
				} else {
					start := i
					for i < len(s) && s[i] != ';' && s[i] != ',' && s[i] != ' ' && s[i] != '\t' {
						i++
					}
					val = s[start:i]
				}
			}
			if name == "" {
				return nil, errors.New("link: empty parameter name")
			}
			if name == "rel" {
				// RFC 8288 §3.3: only the first rel parameter counts.
				if lk.Rels == nil {
					lk.Rels = strings.Fields(val)
				}
				continue
			}
			if _, dup := lk.Params[name]; !dup {
				lk.Params[name] = val
			}
		}
		out = append(out, lk)
	}
}
