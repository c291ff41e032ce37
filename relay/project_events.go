package relay

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/wire"
)

// serveProjectEvents ends a project-wide replay: GET
// /v1/correspondence/events?project_id=P (or the project-wide JSON topic
// /v1/correspondence/events.json?project_id=P) without repository_id and
// thread_id, every repository's records in receipt order (received_seq),
// paged with after and limit as the per-repository replay. It is what a
// federation peer link without a repository backfills from
// (spec/federation.md "Scope"). JSON only: Atom feeds stay per repository.
func (s *Server) serveProjectEvents(w http.ResponseWriter, r *http.Request, in eventsRead) {
	page, err := s.st.ProjectEvents(r.Context(), in.sel.ProjectID, in.after, in.limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	base := s.publicBase(r)
	self := selfURL(r, base)
	var links []string
	if in.topic {
		self = hub.Topic{ProjectID: in.sel.ProjectID, Format: hub.FormatJSON}.URL(base)
		links = append(links, "<"+base+hub.HubPath+`>; rel="hub"`)
	}
	links = append(links, "<"+self+`>; rel="self"; type="`+in.media+`"`)
	nextAfter := in.afterStr
	if n := len(page.Records); n > 0 {
		v := strconv.FormatInt(page.Records[n-1].ReceivedSeq, 10)
		nextAfter = &v
	}
	if page.HasMore && nextAfter != nil {
		nq := url.Values{}
		nq.Set("after", *nextAfter)
		if in.limitStr != "" {
			nq.Set("limit", in.limitStr)
		}
		next := base + r.URL.Path + "?"
		if in.topic {
			next = self + "&"
		} else {
			nq.Set("project_id", in.sel.ProjectID)
		}
		links = append(links, "<"+next+nq.Encode()+`>; rel="next"; type="`+in.media+`"`)
	}
	links = append(links, "<"+base+profilePath+`>; rel="`+relDescribedBy+`"`)
	out := wire.Events{Protocol: correspondence.Protocol, Scope: "project_private", Events: make([]wire.Record, 0, len(page.Records)),
		Page: wire.Page{After: in.afterStr, NextAfter: nextAfter, HasMore: page.HasMore}}
	for _, rec := range page.Records {
		out.Events = append(out.Events, recordOf(rec))
	}
	body, err := marshalJSON(out)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Link", strings.Join(links, ", "))
	h.Set("Vary", "Accept, Authorization")
	h.Set("Cache-Control", cacheControlRead)
	s.writeRepresentation(w, r, in.media, body)
}
