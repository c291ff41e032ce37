package relay

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

func receiptOf(rec store.Record) wire.Receipt {
	return wire.Receipt{
		ReceivedSeq: strconv.FormatInt(rec.ReceivedSeq, 10),
		ReceivedAt:  correspondence.FormatTimestamp(rec.ReceivedAt),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func recordOf(rec store.Record) wire.Record {
	return wire.Record{
		Event:          jsontext.Value(rec.Event),
		Receipt:        receiptOf(rec),
		MissingParents: nonNil(rec.MissingParents),
		LineageStatus:  string(rec.LineageStatus),
	}
}

// RecordJSON returns the immutable RFC 8785 bytes of {event, receipt}.
func RecordJSON(rec store.Record) []byte { return rec.ImmutableJSON() }

// handleEventsPost appends one signed event (spec §3, §6, §7, §9).
func (s *Server) handleEventsPost(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if err := requireProject(p, store.ScopeAppend); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !acceptableBody(r) {
		s.writeError(w, r, errUnsupportedType)
		return
	}
	raw, err := readBody(w, r, MaxEventBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.ingest.Append(r.Context(), p.ProjectID, raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ev := res.Event
	out := wire.AppendAnswer{Record: recordOf(res.Record), Warnings: []wire.Warning{}}
	for i, wn := range res.Warnings {
		if i == wire.MaxWarnings { // spec §9: at most 16 warnings
			break
		}
		out.Warnings = append(out.Warnings, wire.Warning{Code: wn.Code, Detail: wn.Detail, EventIDs: wn.EventIDs, Paths: wn.Paths})
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	sel := store.Selection{ProjectID: p.ProjectID, RepositoryID: ev.RepositoryID, ThreadID: ev.ThreadID}
	q := selectionQuery(sel)
	s.setCorrespondenceHeadersQ(w, r, sel, q, linkSet{
		self: s.publicBase(r) + "/v1/correspondence/events?" + q, selfType: mediaVendorJSON,
	})
	body, err := wire.MarshalAppend(out)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The store publishes the advance after its commit; the wake fan-out
	// and the couriers follow it (spec §9), never this request.
	s.writeBytes(w, r, status, mediaVendorJSON, body)
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// readBody reads at most limit bytes of the request body, refusing larger
// bodies while reading (413) rather than after, under a read deadline.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// One allocation for a body of the announced size (and the spare
		// room io.Copy wants to see the end).
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	n, err := io.Copy(&buf, io.LimitReader(r.Body, limit+1))
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errBodyTimeout
		}
		return nil, errBodyUnreadable
	}
	if n > limit {
		return nil, errBodyTooLarge
	}
	return buf.Bytes(), nil
}

// readQuery parses the query string, refusing unknown and repeated
// parameters (400) so that typos never silently widen a read.
func readQuery(r *http.Request, allowed ...string) (map[string]string, error) {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errQueryInvalid
	}
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			if len(allowed) == 0 {
				return nil, errQueryParameterUnknown.WithHint("this resource takes no query parameters")
			}
			return nil, errQueryParameterUnknown.WithHint("allowed: " + joinComma(allowed))
		}
		if len(v) != 1 {
			return nil, errQueryParameterRepeated
		}
		out[k] = v[0]
	}
	return out, nil
}

func joinComma(ss []string) string {
	var b bytes.Buffer
	for i, s := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// repoSelection reads and validates repository_id (required) and thread_id.
func repoSelection(q map[string]string) (repo, thread string, err error) {
	repo, ok := q["repository_id"]
	if !ok {
		return "", "", errRepositoryIDRequired
	}
	if !correspondence.ValidOpaqueID(repo) {
		return "", "", errRepositoryIDInvalid
	}
	if t, ok := q["thread_id"]; ok {
		if !correspondence.ValidOpaqueID(t) {
			return "", "", errThreadIDInvalid
		}
		thread = t
	}
	return repo, thread, nil
}

// seqCursor reads the optional "after" parameter: an exclusive cursor
// (received_seq or version number). afterStr echoes it (nil when absent).
// Error: invalid (400 after_invalid with its message).
func seqCursor(q map[string]string, invalid *apiError) (after int64, afterStr *string, err error) {
	a, ok := q["after"]
	if !ok {
		return 0, nil, nil
	}
	n, ok := parseSeq(a)
	if !ok {
		return 0, nil, invalid
	}
	return n, &a, nil
}

// pageLimit reads the optional "limit" parameter: 1–200, default 100.
// Error: 400 limit_invalid.
func pageLimit(q map[string]string) (int, error) {
	l, ok := q["limit"]
	if !ok {
		return 100, nil
	}
	n, ok := parseSeq(l)
	if !ok || n < 1 || n > 200 {
		return 0, errLimitInvalid
	}
	return int(n), nil
}

// parseSeq parses a received_seq cursor: a decimal string, no sign, no
// leading zero, at most 2^63-1.
func parseSeq(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// handleEventsGet serves a page of records in one of three representations
// (spec §9). fixed, when non-empty, pins the media type (the .atom/.json
// topic URLs).
func (s *Server) handleEventsGet(w http.ResponseWriter, r *http.Request, fixed string) {
	pid, _, err := s.readProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := readQuery(r, "project_id", "repository_id", "thread_id", "after", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	repo, thread, err := repoSelection(q)
	_, hasThread := q["thread_id"]
	// A project-wide replay names project_id and no repository; a read
	// naming neither stays 400 repository_id_required (spec §9).
	_, hasProject := q["project_id"]
	projectWide := errors.Is(err, errRepositoryIDRequired) && !hasThread && hasProject && fixed != mediaAtom // relay/project_events.go
	if err != nil && !projectWide {
		s.writeError(w, r, err)
		return
	}
	after, afterStr, err := seqCursor(q, errAfterNotSeq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := pageLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	media := fixed
	if media == "" {
		var ok bool
		if media, ok = negotiate(r, offersEvents); !ok {
			s.writeError(w, r, errNotAcceptable)
			return
		}
	}
	if projectWide {
		if media != mediaVendorJSON && media != mediaJSON {
			s.writeError(w, r, errRepositoryIDRequired)
			return
		}
		s.serveProjectEvents(w, r, eventsRead{sel: store.Selection{ProjectID: pid}, after: after, afterStr: afterStr,
			limit: limit, limitStr: q["limit"], media: media, topic: fixed != ""})
		return
	}
	s.serveEvents(w, r, eventsRead{
		sel: store.Selection{ProjectID: pid, RepositoryID: repo, ThreadID: thread}, after: after, afterStr: afterStr,
		limit: limit, limitStr: q["limit"], media: media, topic: fixed != "",
	})
}
