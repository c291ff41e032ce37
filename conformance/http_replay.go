package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/acrelay/acrelay/correspondence"
)

// eventsAnswer is GET /events (spec §9).
type eventsAnswer struct {
	Protocol string `json:"protocol"`
	Scope    string `json:"scope"`
	Events   []struct {
		Event          json.RawMessage `json:"event"`
		Receipt        receipt         `json:"receipt"`
		MissingParents []string        `json:"missing_parents"`
		LineageStatus  string          `json:"lineage_status"`
	} `json:"events"`
	Page struct {
		After     *string `json:"after"`
		NextAfter *string `json:"next_after"`
		HasMore   bool    `json:"has_more"`
	} `json:"page"`
}

// eventsRead replays the body-matrix repository in one page and compares
// it with what was appended.
func (h *httpRun) eventsRead(ctx context.Context, g *Group) {
	r, err := h.do(ctx, "GET", "/v1/correspondence/events?"+h.query(), h.ro, nil)
	if err != nil {
		g.fail("%v", err)
		return
	}
	var a eventsAnswer
	if err := r.decode(http.StatusOK, &a); err != nil {
		g.fail("GET events: %v", err)
		return
	}
	g.record("default media type is the vendor type", func() error {
		if m := mediaOf(r.header); m != mediaVendorJSON {
			return fmt.Errorf("Content-Type %q", m)
		}
		return nil
	}())
	g.record("headers", checkHeaders(r.header, true))
	g.record("strong ETag", func() error {
		if et := r.header.Get("ETag"); !strings.HasPrefix(et, `"`) || len(et) < 3 {
			return fmt.Errorf("ETag %q, want a strong validator", et)
		}
		return nil
	}())
	g.record("protocol and scope", func() error {
		if a.Protocol != correspondence.Protocol || a.Scope != "project_private" {
			return fmt.Errorf("protocol %q scope %q", a.Protocol, a.Scope)
		}
		return nil
	}())
	g.record("records in receipt order, as appended", func() error {
		if len(a.Events) != len(h.posted) {
			return fmt.Errorf("%d records, want %d", len(a.Events), len(h.posted))
		}
		for i, rec := range a.Events {
			p := h.posted[i]
			if !bytes.Equal(rec.Event, p.canonical) || rec.Receipt != p.receipt {
				return fmt.Errorf("record %d is not the event appended %d-th with its receipt", i, i+1)
			}
			if !sameSet(rec.MissingParents, p.refs) || rec.LineageStatus != lineageOf(p.kind) {
				return fmt.Errorf("record %d (%s): missing_parents or lineage_status differ from the append", i, p.kind)
			}
		}
		return nil
	}())
	g.record("page", func() error {
		if len(h.posted) == 0 {
			return errors.New("nothing appended")
		}
		last := h.posted[len(h.posted)-1].receipt.ReceivedSeq
		if a.Page.After != nil || a.Page.NextAfter == nil || *a.Page.NextAfter != last || a.Page.HasMore {
			return fmt.Errorf("page %+v, want after null, next_after %s, has_more false", a.Page, last)
		}
		return nil
	}())
}

// validators checks ETag, If-None-Match (weak comparison, lists, *) and
// HEAD (spec §9).
func (h *httpRun) validators(ctx context.Context, g *Group) {
	path := "/v1/correspondence/events?" + h.query()
	r, err := h.do(ctx, "GET", path, h.ro, nil)
	if err != nil {
		g.fail("%v", err)
		return
	}
	etag := r.header.Get("ETag")
	if r.status != http.StatusOK || etag == "" {
		g.fail("GET events: status %d, ETag %q", r.status, etag)
		return
	}
	for _, c := range []struct {
		name, inm string
		status    int
	}{
		{"If-None-Match with the ETag", etag, http.StatusNotModified},
		{"If-None-Match with the weak form", "W/" + etag, http.StatusNotModified},
		{"If-None-Match list", `"not-this", ` + etag, http.StatusNotModified},
		{"If-None-Match *", "*", http.StatusNotModified},
		{"If-None-Match other", `"not-this"`, http.StatusOK},
	} {
		r2, err := h.do(ctx, "GET", path, h.ro, nil, "If-None-Match", c.inm)
		if err == nil {
			switch {
			case r2.status != c.status:
				err = fmt.Errorf("status %d, want %d", r2.status, c.status)
			case c.status == http.StatusNotModified && len(r2.body) != 0:
				err = errors.New("304 with a body")
			case r2.header.Get("ETag") != etag:
				err = fmt.Errorf("ETag %q, want %q", r2.header.Get("ETag"), etag)
			}
		}
		g.record(c.name, err)
	}
	r3, err := h.do(ctx, "HEAD", path, h.ro, nil)
	if err == nil {
		switch {
		case r3.status != http.StatusOK || len(r3.body) != 0:
			err = fmt.Errorf("status %d with %d body bytes, want 200 and none", r3.status, len(r3.body))
		case r3.header.Get("ETag") != etag:
			err = errors.New("HEAD ETag differs from GET")
		default:
			err = checkHeaders(r3.header, true)
		}
	}
	g.record("HEAD", err)
	r4, err := h.do(ctx, "GET", path, h.ro, nil)
	if err == nil && (r4.header.Get("ETag") != etag || !bytes.Equal(r4.body, r.body)) {
		err = errors.New("a second GET of an unchanged page has other bytes or another ETag")
	}
	g.record("stable representation", err)
}

// paging walks the repository five records at a time (spec §9).
func (h *httpRun) paging(ctx context.Context, g *Group) {
	var ids []string
	after := ""
	for page := 0; page < 100; page++ {
		path := "/v1/correspondence/events?" + h.query() + "&limit=5"
		if after != "" {
			path += "&after=" + after
		}
		r, err := h.do(ctx, "GET", path, h.ro, nil)
		if err != nil {
			g.fail("%v", err)
			return
		}
		var a eventsAnswer
		if err := r.decode(http.StatusOK, &a); err != nil {
			g.fail("page %d: %v", page+1, err)
			return
		}
		if (after == "") != (a.Page.After == nil) || (a.Page.After != nil && *a.Page.After != after) {
			g.fail("page %d: page.after does not echo the request", page+1)
			return
		}
		if len(a.Events) > 5 {
			g.fail("page %d: %d records over limit 5", page+1, len(a.Events))
			return
		}
		for _, rec := range a.Events {
			var ev struct {
				EventID string `json:"event_id"`
			}
			_ = json.Unmarshal(rec.Event, &ev)
			ids = append(ids, ev.EventID)
		}
		_, hasNext := linkRel(parseLinks(r.header.Get("Link")), "next")
		if hasNext != a.Page.HasMore {
			g.fail("page %d: Link rel=next present=%v, has_more=%v", page+1, hasNext, a.Page.HasMore)
			return
		}
		if !a.Page.HasMore {
			break
		}
		if a.Page.NextAfter == nil {
			g.fail("page %d: has_more without next_after", page+1)
			return
		}
		after = *a.Page.NextAfter
	}
	want := make([]string, len(h.posted))
	for i, p := range h.posted {
		want[i] = p.id
	}
	g.record("pages of 5 replay every record once, in order", func() error {
		if !slices.Equal(ids, want) {
			return fmt.Errorf("%d ids paged, want the %d appended in order", len(ids), len(want))
		}
		return nil
	}())
	if len(h.posted) > 0 {
		last := h.posted[len(h.posted)-1].receipt.ReceivedSeq
		r, err := h.do(ctx, "GET", "/v1/correspondence/events?"+h.query()+"&after="+last, h.ro, nil)
		if err == nil {
			var a eventsAnswer
			if err = r.decode(http.StatusOK, &a); err == nil &&
				(len(a.Events) != 0 || a.Page.NextAfter == nil || *a.Page.NextAfter != last || a.Page.HasMore) {
				err = errors.New("after the last record: want no records, next_after = after, has_more false")
			}
		}
		g.record("after the last record", err)
	}
	for _, c := range []struct{ name, q, code string }{
		{"after with a leading zero", "&after=01", "after_invalid"},
		{"after not a number", "&after=abc", "after_invalid"},
		{"limit 0", "&limit=0", "limit_invalid"},
		{"limit 201", "&limit=201", "limit_invalid"},
		{"unknown query parameter", "&cursor=1", "query_invalid"},
		{"repeated query parameter", "&limit=1&limit=2", "query_invalid"},
	} {
		r, err := h.do(ctx, "GET", "/v1/correspondence/events?"+h.query()+c.q, h.ro, nil)
		if err == nil {
			err = r.expectError(http.StatusBadRequest, c.code)
		}
		g.record(c.name, err)
	}
}

// negotiation checks the representations of /events (spec §9).
func (h *httpRun) negotiation(ctx context.Context, g *Group) {
	path := "/v1/correspondence/events?" + h.query()
	for _, c := range []struct {
		name, accept, media string
		status              int
	}{
		{"Accept application/json", mediaJSON, mediaJSON, http.StatusOK},
		{"Accept vendor type with charset=utf-8", mediaVendorJSON + "; charset=utf-8", mediaVendorJSON, http.StatusOK},
		{"Accept Atom", mediaAtom, mediaAtom, http.StatusOK},
		{"Accept text/html", "text/html", "", http.StatusNotAcceptable},
		{"Accept JSON in latin-1", mediaJSON + "; charset=iso-8859-1", "", http.StatusNotAcceptable},
		{"Accept JSON with another parameter before q", mediaJSON + ";profile=other", "", http.StatusNotAcceptable},
		{"Accept an Atom entry", mediaAtom + ";type=entry", "", http.StatusNotAcceptable},
		{"Accept extensions after q are ignored", mediaJSON + ";q=1;charset=iso-8859-1", mediaJSON, http.StatusOK},
		{"a malformed q invalidates its range", mediaAtom + ";q=wat, " + mediaJSON + ";q=0.5", mediaJSON, http.StatusOK},
		{"q above 1 invalidates its range", mediaAtom + ";q=2, " + mediaJSON + ";q=0.5", mediaJSON, http.StatusOK},
		{"q with four decimals invalidates its range", mediaAtom + ";q=1.0001, " + mediaJSON + ";q=0.5", mediaJSON, http.StatusOK},
	} {
		r, err := h.do(ctx, "GET", path, h.ro, nil, "Accept", c.accept)
		if err == nil {
			switch {
			case r.status != c.status:
				err = fmt.Errorf("status %d, want %d", r.status, c.status)
			case c.status == http.StatusNotAcceptable:
				err = r.expectError(c.status, "representation_not_acceptable")
			case c.status != http.StatusOK:
			case mediaOf(r.header) != c.media:
				err = fmt.Errorf("Content-Type %q, want %s", mediaOf(r.header), c.media)
			case c.media == mediaAtom:
				if n := bytes.Count(r.body, []byte("<entry")); n != len(h.posted) || !bytes.Contains(r.body, []byte("https://agenttool.dev/ns/correspondence")) {
					err = fmt.Errorf("an Atom feed with %d entries (want %d) or without the correspondence namespace", n, len(h.posted))
				} else {
					err = checkHeaders(r.header, true)
				}
			default:
				err = checkHeaders(r.header, true)
			}
		}
		g.record(c.name, err)
	}
}
