package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
)

// wireRelay is an httptest stand-in for the relay's documented wire
// format (spec §9), used until the real relay's handler is wired into
// these tests. It is a fake at the HTTP edge: storage is a slice, and it
// judges events with the real core (ParseEvent).
type wireRelay struct {
	t     *testing.T
	srv   *httptest.Server
	token string

	mu          sync.Mutex
	records     []wireStored
	byID        map[string]int
	nextSeq     int64
	fail503     int      // POSTs still to answer 503
	postBodies  [][]byte // every POST body received, in order
	tamper      bool     // serve records with one body byte changed
	wake        chan string
	lastEventID []string // Last-Event-ID of each wake connection ("" when absent)
}

type wireStored struct {
	raw  []byte
	seq  int64
	at   string
	repo string
	thrd string
}

func newWireRelay(t *testing.T) *wireRelay {
	t.Helper()
	f := &wireRelay{t: t, token: "tok-test", byID: map[string]int{}, nextSeq: 1, wake: make(chan string, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/correspondence/events", f.post)
	mux.HandleFunc("GET /v1/correspondence/events", f.get)
	mux.HandleFunc("HEAD /v1/correspondence/events", f.get)
	mux.HandleFunc("GET /v1/wake/voice", f.sse)
	f.srv = httptest.NewServer(f.auth(mux))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *wireRelay) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			writeErr(w, 401, "unauthorized", "bearer token missing or unknown", "")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeErr(w http.ResponseWriter, status int, code, msg, hint string, issues ...correspondence.Issue) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body := map[string]any{"error": code, "message": msg}
	if hint != "" {
		body["hint"] = hint
	}
	if len(issues) > 0 {
		body["issues"] = issues
	}
	_ = json.NewEncoder(w).Encode(body)
}

func (f *wireRelay) recordJSON(s wireStored) map[string]any {
	raw := s.raw
	if f.tamper {
		raw = []byte(string(raw))
		raw = []byte(replaceOnce(string(raw), `"summary":"`, `"summary":"X`))
	}
	return map[string]any{
		"event":           json.RawMessage(raw),
		"receipt":         map[string]string{"received_seq": strconv.FormatInt(s.seq, 10), "received_at": s.at},
		"missing_parents": []string{},
		"lineage_status":  "not_applicable",
	}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

func (f *wireRelay) post(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	if ct != "application/json" && ct != MediaTypeVendor {
		writeErr(w, 415, "content_type_unsupported", "use application/json", "")
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.postBodies = append(f.postBodies, body)
	if f.fail503 > 0 {
		f.fail503--
		w.Header().Set("Retry-After", "0")
		writeErr(w, 503, "correspondence_append_unavailable", "the event log is unavailable", "retry the same event later")
		return
	}
	ev, err := correspondence.ParseEvent(body)
	if err != nil {
		var ve *correspondence.ValidationError
		if errors.As(err, &ve) {
			writeErr(w, 400, ve.Code, "the event is invalid", "", ve.Issues...)
			return
		}
		writeErr(w, 400, "invalid_json", "not strict JSON", "")
		return
	}
	status := 200
	i, ok := f.byID[ev.ID]
	if !ok {
		canon, _ := ev.CanonicalJSON()
		f.records = append(f.records, wireStored{raw: canon, seq: f.nextSeq, at: fmt.Sprintf("2026-07-19T10:00:%02d.000Z", f.nextSeq%60), repo: ev.RepositoryID, thrd: ev.ThreadID})
		f.nextSeq += 3 // gaps are allowed (spec §7)
		i = len(f.records) - 1
		f.byID[ev.ID] = i
		status = 201
	}
	out := f.recordJSON(f.records[i])
	out["warnings"] = []any{}
	w.Header().Set("Content-Type", MediaTypeVendor)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

func (f *wireRelay) get(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	repo := q.Get("repository_id")
	if repo == "" {
		writeErr(w, 400, "repository_id_required", "repository_id is required", "")
		return
	}
	var after int64
	var afterJSON any
	if s := q.Get("after"); s != "" {
		n, err := parseSeq(s)
		if err != nil {
			writeErr(w, 400, "after_invalid", "after is not a receipt cursor", "")
			return
		}
		after, afterJSON = n, s
	}
	limit := 100
	if s := q.Get("limit"); s != "" {
		limit, _ = strconv.Atoi(s)
	}
	f.mu.Lock()
	var page []map[string]any
	next, more := after, false
	for _, s := range f.records {
		if s.seq <= after || s.repo != repo || (q.Has("thread_id") && s.thrd != q.Get("thread_id")) {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, f.recordJSON(s))
		next = s.seq
	}
	f.mu.Unlock()
	var nextJSON any
	if next > 0 {
		nextJSON = strconv.FormatInt(next, 10)
	}
	if page == nil {
		page = []map[string]any{}
	}
	w.Header().Add("Link", `</v1/correspondence/events?repository_id=`+repo+`>; rel="self"; type="application/vnd.agenttool.correspondence+json"`)
	w.Header().Add("Link", `</v1/correspondence/events?repository_id=`+repo+`>; rel="alternate"; type="application/atom+xml", </v1/correspondence/voice?repository_id=`+repo+`>; rel="https://agenttool.dev/rels/correspondence-voice"`)
	w.Header().Add("Link", `</v1/correspondence/claims?repository_id=`+repo+`>; rel="https://agenttool.dev/rels/active-claims"`)
	w.Header().Set("Link-Template", `"/v1/wake/voice?identity_id={identity_id}&keys=correspondence"; rel="https://agenttool.dev/rels/correspondence-live"; type="text/event-stream"`)
	w.Header().Set("Content-Type", MediaTypeVendor)
	if r.Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"protocol": correspondence.Protocol, "scope": "project_private", "events": page,
		"page": map[string]any{"after": afterJSON, "next_after": nextJSON, "has_more": more},
	})
}

// sse serves the wake stream: it writes what the test sends on f.wake,
// and ends the response on "CLOSE".
func (f *wireRelay) sse(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("keys") != "correspondence" || r.URL.Query().Get("identity_id") == "" {
		writeErr(w, 400, "query_invalid", "identity_id and keys=correspondence are required", "")
		return
	}
	f.mu.Lock()
	f.lastEventID = append(f.lastEventID, r.Header.Get("Last-Event-ID"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "private, no-cache")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	_, _ = io.WriteString(w, ": connected\n\n")
	_ = rc.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case s := <-f.wake:
			if s == "CLOSE" {
				return
			}
			_, _ = io.WriteString(w, s)
			_ = rc.Flush()
		}
	}
}

// changeFrame is a wake frame for received_seq seq (spec §9).
func changeFrame(seq int64) string {
	return fmt.Sprintf("event: change\nid: %d\ndata: {\"_format\":\"wake_event/v1\",\"key\":\"correspondence\",\"kind\":\"updated\",\"identity_id\":%q,\"occurred_at\":\"2026-07-19T10:00:00.000Z\",\"wake_version\":%d,\"context\":{\"received_seq\":\"%d\"}}\n\n",
		seq, testSender.IdentityID, seq, seq)
}

func (f *wireRelay) client(t *testing.T) *Client {
	t.Helper()
	c, err := New(f.srv.URL, f.token)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxAttempts: 10}
	return c
}

// appendDirect stores ev as if posted.
func (f *wireRelay) appendDirect(t *testing.T, ev *correspondence.Event) int64 {
	t.Helper()
	c := f.client(t)
	res, err := c.Post(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return res.Record.Receipt.ReceivedSeq
}
