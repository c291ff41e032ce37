package conformance

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// SourceHTTP labels the groups of RunHTTP.
const SourceHTTP = "http"

// Media types and link relations of spec §9, spelled as the wire has them.
const (
	mediaVendorJSON = "application/vnd.agenttool.correspondence+json"
	mediaJSON       = "application/json"
	mediaAtom       = "application/atom+xml"
	relVoice        = "https://agenttool.dev/rels/correspondence-voice"
	relActiveClaims = "https://agenttool.dev/rels/active-claims"
	relLive         = "https://agenttool.dev/rels/correspondence-live"
)

// httpTimeout bounds each request of the suite.
const httpTimeout = 30 * time.Second

// RunHTTP checks a running relay over HTTP only (spec §3, §6, §7, §9, §10).
// baseURL is the relay's root ("http://127.0.0.1:8080"); adminToken is a
// project bearer token with the admin scope. The suite registers a fresh
// identity and Ed25519 key in the token's project, creates a read+append
// token and a read-only token, and works in fresh repository ids, so it
// can run against a relay in use. It posts every body_matrix kind of seed
// 000 and checks: 201 then 200 with the original receipt on exact and
// re-serialized retries; session-fork warnings; the refusal codes of the
// strict profile, the invalid_body_vectors and §6 (duplicate member,
// signature, event id, encoding, project, sender, content type, size,
// scope, bearer); replay of GET /events with paging, negotiation,
// Vary/Cache-Control/ETag/304/HEAD, Link and Link-Template; a claim
// lineage through /claims and /voice. At the end it deactivates the
// identity and revokes both tokens, and checks both take effect.
//
// Every group's Failures name the check and the status or code seen, never
// a token or an event body. A relay that cannot be reached, or a token
// that cannot register, gives one failed group "setup".
func RunHTTP(ctx context.Context, baseURL, adminToken string) Report {
	h := &httpRun{
		base:   strings.TrimRight(baseURL, "/"),
		admin:  adminToken,
		client: &http.Client{Timeout: httpTimeout},
	}
	var r Report
	setup := Group{Source: SourceHTTP, Name: "setup"}
	if err := h.setup(ctx, &setup); err != nil {
		setup.fail("%v", err)
		r.Groups = append(r.Groups, setup)
		return r
	}
	r.Groups = append(r.Groups, setup)
	for _, step := range []struct {
		name string
		run  func(context.Context, *Group)
	}{
		{"body_matrix", h.bodyMatrix},
		{"retry", h.retry},
		{"refusals", h.refusals},
		{"events_read", h.eventsRead},
		{"validators", h.validators},
		{"paging", h.paging},
		{"negotiation", h.negotiation},
		{"claims", h.claims},
		{"voice", h.voice},
		{"lifecycle", h.lifecycle},
	} {
		g := Group{Source: SourceHTTP, Name: step.name}
		step.run(ctx, &g)
		r.Groups = append(r.Groups, g)
	}
	return r
}

// httpRun is the state of one RunHTTP.
type httpRun struct {
	base   string
	admin  string
	client *http.Client

	project   string
	identity  string
	keyID     string
	priv      ed25519.PrivateKey
	device    string
	session   string
	seq       int64
	rw, ro    string // bearer tokens: read+append, read only
	rwID      string
	roID      string
	repo      string // repository of the body matrix
	claimRepo string // repository of the claim lineage
	posted    []posted
}

// posted is an event the suite appended, with the receipt it got.
type posted struct {
	id        string
	kind      string
	canonical []byte
	receipt   receipt
	refs      []string
}

type receipt struct {
	ReceivedSeq string `json:"received_seq"`
	ReceivedAt  string `json:"received_at"`
}

// response is one HTTP answer, its body read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request. hdr holds extra headers (Content-Type, Accept,
// If-None-Match); token "" sends no Authorization.
func (h *httpRun) do(ctx context.Context, method, path, token string, body []byte, hdr ...string) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", mediaJSON)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read body: %w", method, req.URL.Path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// decode reads a JSON answer with the wanted status into v.
func (r response) decode(status int, v any) error {
	if r.status != status {
		return fmt.Errorf("status %d (%s), want %d", r.status, r.errorCode(), status)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("status %d with a body that is not the expected JSON: %v", r.status, err)
	}
	return nil
}

// errorCode is the "error" member of an error body, or "".
func (r response) errorCode() string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error
}

// expectError checks an error answer: status and, when code is not "",
// the stable code.
func (r response) expectError(status int, code string) error {
	got := r.errorCode()
	if r.status != status || (code != "" && got != code) {
		want := strconv.Itoa(status)
		if code != "" {
			want += " " + code
		}
		return fmt.Errorf("got %d %s, want %s", r.status, got, want)
	}
	if code == "" && got == "" {
		return fmt.Errorf("status %d without an error code", r.status)
	}
	return nil
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// event returns a signed event of kind in repo, with the next session_seq.
func (h *httpRun) event(repo, kind string, body canonicaljson.Value, paths ...string) *correspondence.Event {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	h.seq++
	e := &correspondence.Event{
		ProjectID:    h.project,
		RepositoryID: repo,
		ThreadID:     "task:acrelay-conformance",
		Sender: correspondence.Sender{
			IdentityID: h.identity, SigningKeyID: h.keyID, DeviceID: h.device, SessionID: h.session,
		},
		Kind:       correspondence.Kind(kind),
		Parents:    referencedIDs(body),
		SessionSeq: h.seq,
		IssuedAt:   correspondence.FormatTimestamp(time.Now()),
		Scope:      correspondence.Scope{Paths: paths},
		Body:       body,
	}
	_ = e.Sign(h.priv) // the key is 64 bytes: Sign cannot fail
	return e
}

// appendAnswer is the POST answer of spec §9.
type appendAnswer struct {
	Event          json.RawMessage `json:"event"`
	Receipt        receipt         `json:"receipt"`
	MissingParents []string        `json:"missing_parents"`
	LineageStatus  string          `json:"lineage_status"`
	Warnings       []struct {
		Code     string   `json:"code"`
		EventIDs []string `json:"event_ids"`
	} `json:"warnings"`
}

// post appends raw with the read+append token.
func (h *httpRun) post(ctx context.Context, raw []byte) (response, error) {
	return h.do(ctx, "POST", "/v1/correspondence/events", h.rw, raw)
}

// append posts e, checks the 201 answer against it (missing_parents must
// be exactly the referenced ids when unknownRefs, else empty) and records
// it.
func (h *httpRun) append(ctx context.Context, e *correspondence.Event, wantLineage string, unknownRefs bool) (posted, appendAnswer, error) {
	raw, err := e.CanonicalJSON()
	if err != nil {
		return posted{}, appendAnswer{}, err
	}
	r, err := h.post(ctx, raw)
	if err != nil {
		return posted{}, appendAnswer{}, err
	}
	var a appendAnswer
	if err := r.decode(http.StatusCreated, &a); err != nil {
		return posted{}, a, err
	}
	refs := e.ReferencedEventIDs()
	wantMissing := []string{}
	if unknownRefs {
		wantMissing = refs
	}
	switch {
	case !bytes.Equal(a.Event, raw):
		return posted{}, a, errors.New("the answer's event is not the event's RFC 8785 bytes")
	case !validSeq(a.Receipt.ReceivedSeq):
		return posted{}, a, fmt.Errorf("received_seq %q is not a decimal string without leading zeros", a.Receipt.ReceivedSeq)
	case !validTimestamp(a.Receipt.ReceivedAt):
		return posted{}, a, fmt.Errorf("received_at %q is not RFC3339-ms", a.Receipt.ReceivedAt)
	case a.MissingParents == nil || !sameSet(a.MissingParents, wantMissing):
		return posted{}, a, fmt.Errorf("missing_parents has %d ids, want the %d unknown parents", len(a.MissingParents), len(wantMissing))
	case a.LineageStatus != wantLineage:
		return posted{}, a, fmt.Errorf("lineage_status %q, want %q", a.LineageStatus, wantLineage)
	case a.Warnings == nil:
		return posted{}, a, errors.New("warnings is absent or null, want an array")
	}
	if n := len(h.posted); n > 0 && e.RepositoryID == h.repo {
		if prev, _ := strconv.ParseInt(h.posted[n-1].receipt.ReceivedSeq, 10, 64); seqOf(a.Receipt) <= prev {
			return posted{}, a, fmt.Errorf("received_seq %s does not exceed the previous %d", a.Receipt.ReceivedSeq, prev)
		}
	}
	p := posted{id: e.ID, kind: string(e.Kind), canonical: raw, receipt: a.Receipt, refs: wantMissing}
	if e.RepositoryID == h.repo {
		h.posted = append(h.posted, p)
	}
	return p, a, nil
}

func seqOf(r receipt) int64 { n, _ := strconv.ParseInt(r.ReceivedSeq, 10, 64); return n }

func validSeq(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 63)
	return err == nil
}

func validTimestamp(s string) bool { _, code := correspondence.ParseTimestamp(s); return code == "" }

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// seedVectors reads the embedded seed 000.
func seedVectors() (map[string]json.RawMessage, error) {
	data, err := seeds.ReadFile(seed000File)
	if err != nil {
		return nil, err
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, err
	}
	return file, nil
}

// lineageOf is the lineage_status a first append of kind gets when its
// predecessor is unknown (spec §8).
func lineageOf(kind string) string {
	switch kind {
	case "claim.open":
		return "valid"
	case "claim.renew", "claim.release":
		return "pending"
	}
	return "not_applicable"
}

// query selects the body-matrix repository.
func (h *httpRun) query() string {
	return url.Values{"repository_id": {h.repo}}.Encode()
}
