package relay

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dunglas/httpsfv"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Link relations of spec §9.
const (
	relVoice        = "https://agenttool.dev/rels/correspondence-voice"
	relActiveClaims = "https://agenttool.dev/rels/active-claims"
	relLive         = "https://agenttool.dev/rels/correspondence-live"
	relDescribedBy  = "describedby" // RFC 8288 registry: the relay's profile page
)

// Cache-Control of correspondence responses (spec §9): reads are private
// and revalidated every time (the ETag makes that cheap); POST answers are
// never stored. Neither is ever public.
const (
	cacheControlRead = "private, no-cache, no-transform"
	cacheControlPost = "private, no-store"
)

// wakeTemplate is the RFC 6570 template of the wake stream (spec §9).
func (s *Server) wakeTemplate(r *http.Request) string {
	return s.publicBase(r) + "/v1/wake/voice?identity_id={identity_id}&keys=correspondence"
}

// selectionQuery is the query every link built for a read carries:
// project_id, repository_id and thread_id (the empty ones left out), in
// the topics' canonical order. project_id is always there: an anonymous
// reader of a public project needs it to follow the link (readProject),
// a bearer's read accepts it when it names the bearer's project, and it
// keeps two projects' selections of one repository_id apart (the Atom
// feed id is the JSON URL).
func selectionQuery(sel store.Selection) string {
	// What url.Values.Encode writes for these keys (sorted, QueryEscape'd),
	// without building the map.
	n := len("repository_id=") + len(sel.RepositoryID)
	if sel.ProjectID != "" {
		n += len("project_id=&") + len(sel.ProjectID)
	}
	if sel.ThreadID != "" {
		n += len("&thread_id=") + len(sel.ThreadID)
	}
	var b strings.Builder
	b.Grow(n)
	if sel.ProjectID != "" {
		b.WriteString("project_id=")
		b.WriteString(url.QueryEscape(sel.ProjectID))
		b.WriteByte('&')
	}
	b.WriteString("repository_id=")
	b.WriteString(url.QueryEscape(sel.RepositoryID))
	if sel.ThreadID != "" {
		b.WriteString("&thread_id=")
		b.WriteString(url.QueryEscape(sel.ThreadID))
	}
	return b.String()
}

// repoQuery is the repository_id / thread_id selection without the
// project (the web view's API links, read with the viewer's own token).
func repoQuery(repositoryID, threadID string) string {
	v := url.Values{}
	v.Set("repository_id", repositoryID)
	if threadID != "" {
		v.Set("thread_id", threadID)
	}
	return v.Encode()
}

type linkSet struct {
	hub                      string // a topic's WebSub hub (W3C WebSub #discovery)
	self, selfType           string
	alternate, alternateType string
	next                     string
	// capability: a feed capability's response (relay/feeds.go): no
	// voice, claims or Link-Template, which need a bearer.
	capability bool
	// capToken is that capability (its log checkpoint is under it).
	capToken string
}

// setCorrespondenceHeaders writes the headers every correspondence response
// carries: Link (self, alternate, voice, active-claims[, next], describedby),
// Link-Template (live wake stream, RFC 9652 structured field), Vary and
// Cache-Control (cacheControlPost for a POST, else cacheControlRead).
func (s *Server) setCorrespondenceHeaders(w http.ResponseWriter, r *http.Request, sel store.Selection, ls linkSet) {
	s.setCorrespondenceHeadersQ(w, r, sel, selectionQuery(sel), ls)
}

// setCorrespondenceHeadersQ is setCorrespondenceHeaders for a caller that
// already holds q = selectionQuery(sel). The Link field is written into
// one buffer.
func (s *Server) setCorrespondenceHeadersQ(w http.ResponseWriter, r *http.Request, sel store.Selection, q string, ls linkSet) {
	base := s.publicBase(r)
	h := w.Header()
	var b strings.Builder
	b.Grow(1024)
	add := func(rel, typ string, href ...string) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('<')
		for _, p := range href {
			b.WriteString(p)
		}
		b.WriteString(`>; rel="`)
		b.WriteString(rel)
		b.WriteByte('"')
		if typ != "" {
			b.WriteString(`; type="`)
			b.WriteString(typ)
			b.WriteByte('"')
		}
	}
	if ls.hub != "" {
		add("hub", "", ls.hub)
	}
	if ls.self != "" {
		add("self", ls.selfType, ls.self)
	}
	if ls.alternate != "" {
		add("alternate", ls.alternateType, ls.alternate)
	}
	if ls.next != "" {
		add("next", ls.selfType, ls.next)
	}
	if !ls.capability {
		add(relVoice, mediaVendorJSON, base, "/v1/correspondence/voice?", q)
		add(relActiveClaims, mediaVendorJSON, base, "/v1/correspondence/claims?", q)
	}
	if sel.ProjectID != "" {
		add(relLogCheckpoint, "text/plain", s.logCheckpointLink(base, sel.ProjectID, ls.capToken))
	}
	add(relDescribedBy, "", base, profilePath)
	h["Link"] = []string{b.String()}
	if !ls.capability {
		lt := s.linkTemplateField(r)
		if sel.ProjectID != "" {
			lt += ", " + marshalTemplateFast(inclusionTemplate(base, sel.ProjectID), relLogInclusionProof, mediaJSON)
		}
		h["Link-Template"] = []string{lt}
	}
	h["Vary"] = []string{"Accept, Authorization"}
	if r.Method == http.MethodPost {
		h["Cache-Control"] = []string{cacheControlPost}
	} else {
		h["Cache-Control"] = []string{cacheControlRead}
	}
}

// linkTemplateField serializes the live template as an RFC 9652
// Link-Template structured-field list.
func (s *Server) linkTemplateField(r *http.Request) string {
	if s.public != "" { // the same for every request: serialize once
		s.ltOnce.Do(func() { s.ltField = marshalLinkTemplate(s.wakeTemplate(r)) })
		return s.ltField
	}
	return marshalLinkTemplate(s.wakeTemplate(r))
}

func marshalLinkTemplate(template string) string {
	return marshalTemplate(template, relLive, "text/event-stream")
}

// marshalTemplate serializes one RFC 9652 Link-Template member (a
// structured-field list of one string with rel and type).
func marshalTemplate(template, rel, typ string) string {
	item := httpsfv.NewItem(template)
	item.Params.Add("rel", rel)
	item.Params.Add("type", typ)
	v, err := httpsfv.Marshal(httpsfv.List{item})
	if err != nil { // only for strings outside printable ASCII
		return ""
	}
	return v
}

// marshalTemplateFast is marshalTemplate for printable ASCII, which is
// every template, rel and type the relay writes: an RFC 8941 §4.1.6
// sf-string (each '"' and '\\' escaped) with two sf-string parameters,
// written without building the structured value. Anything else goes
// through marshalTemplate (TestMarshalTemplateFast).
func marshalTemplateFast(template, rel, typ string) string {
	if !sfPrintable(template) || !sfPrintable(rel) || !sfPrintable(typ) {
		return marshalTemplate(template, rel, typ)
	}
	var b strings.Builder
	b.Grow(len(template) + len(rel) + len(typ) + 24)
	sfString(&b, template)
	b.WriteString(";rel=")
	sfString(&b, rel)
	b.WriteString(";type=")
	sfString(&b, typ)
	return b.String()
}

// sfPrintable reports whether s holds only %x20-7E, the characters an
// RFC 8941 sf-string admits.
func sfPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// sfString writes s (printable ASCII) as an RFC 8941 sf-string.
func sfString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}

// etagOf is a strong validator over the exact bytes.
func etagOf(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:24]) + `"`
}

// etagList parses the field lines of an If-Match or If-None-Match
// header (RFC 9110 §13.1.1: "*" / #entity-tag) into its entity-tags,
// keeping any W/ prefix, and whether a member is "*" (accepted inside a
// list too, leniently). A comma inside a quoted tag belongs to the tag.
// ok is false for a malformed field; the callers then treat the list as
// matching nothing.
func etagList(vals []string) (tags []string, star, ok bool) {
	for _, v := range vals {
		for {
			v = strings.TrimLeft(v, " \t,")
			if v == "" {
				break
			}
			if v[0] == '*' {
				star, v = true, v[1:]
			} else {
				weak := strings.HasPrefix(v, "W/")
				rest := strings.TrimPrefix(v, "W/")
				if rest == "" || rest[0] != '"' {
					return nil, false, false
				}
				end := strings.IndexByte(rest[1:], '"')
				if end < 0 {
					return nil, false, false
				}
				tag := rest[:end+2]
				if weak {
					tag = "W/" + tag
				}
				tags, v = append(tags, tag), rest[end+2:]
			}
			v = strings.TrimLeft(v, " \t")
			if v != "" && v[0] != ',' {
				return nil, false, false
			}
		}
	}
	return tags, star, true
}

// ifNoneMatch applies the weak comparison of RFC 9110 §13.1.2 to the
// If-None-Match list: true when any member (or *) matches etag.
func ifNoneMatch(r *http.Request, etag string) bool {
	vals := r.Header.Values("If-None-Match")
	if len(vals) == 0 {
		return false
	}
	tags, star, ok := etagList(vals)
	if !ok {
		return false
	}
	if star {
		return true
	}
	opaque := strings.TrimPrefix(etag, "W/")
	for _, t := range tags {
		if strings.TrimPrefix(t, "W/") == opaque {
			return true
		}
	}
	return false
}

// ifMatchStrong applies the strong comparison of RFC 9110 §13.1.1 to the
// If-Match list: true for * or a member equal to etag (weak tags never
// match; neither does a malformed list).
func ifMatchStrong(vals []string, etag string) bool {
	tags, star, ok := etagList(vals)
	if !ok {
		return false
	}
	return star || slices.Contains(tags, etag)
}

// writeRepresentation ends a GET/HEAD with body under a strong ETag,
// evaluating preconditions in RFC 9110 §13.2.2's order: 412 when an
// If-Match list holds neither * nor that ETag (strong comparison), else
// 304 with no body when If-None-Match matches (weak comparison).
func (s *Server) writeRepresentation(w http.ResponseWriter, r *http.Request, mediaType string, body []byte) {
	etag := etagOf(body)
	w.Header().Set("ETag", etag)
	if im := r.Header.Values("If-Match"); len(im) > 0 && !ifMatchStrong(im, etag) {
		s.writeError(w, r, errRepresentationChanged)
		return
	}
	if ifNoneMatch(r, etag) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		// The 304 names the Content-Type of the 200 it stands for (spec
		// §9). net/http drops a "Content-Type" key from every 304
		// (suppressedHeaders in net/http/transfer.go), so the field goes
		// under a lower-case key, which it writes as given; field names
		// are case-insensitive (RFC 9110 §5.1) and HTTP/2 lower-cases
		// them anyway.
		h["content-type"] = []string{wire.ContentType(mediaType)}
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.writeBytes(w, r, http.StatusOK, mediaType, body)
}

// selfURL is the request's own URL for a Link header: the path and the
// query re-encoded from its parsed values (sorted, percent-encoded), never
// the raw query, whose '>' or ',' could end the link and add others.
func selfURL(r *http.Request, base string) string {
	u := base + (&url.URL{Path: r.URL.Path}).EscapedPath()
	if vals, err := url.ParseQuery(r.URL.RawQuery); err == nil && len(vals) > 0 {
		u += "?" + vals.Encode()
	}
	return u
}
