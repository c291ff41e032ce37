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

// setup learns the token's project, registers an identity and a key, and
// creates the two tokens the suite uses.
func (h *httpRun) setup(ctx context.Context, g *Group) error {
	var who struct {
		ProjectID *string  `json:"project_id"`
		Scopes    []string `json:"scopes"`
	}
	r, err := h.do(ctx, "GET", "/v1/whoami", h.admin, nil)
	if err != nil {
		return err
	}
	if err := r.decode(http.StatusOK, &who); err != nil {
		return fmt.Errorf("whoami: %w", err)
	}
	if who.ProjectID == nil || !correspondence.ValidUUID(*who.ProjectID) || !slices.Contains(who.Scopes, "admin") {
		return errors.New("whoami: the token is not a project token with the admin scope")
	}
	g.Passed++
	h.project = *who.ProjectID

	var ident struct {
		IdentityID string `json:"identity_id"`
		ProjectID  string `json:"project_id"`
		Status     string `json:"status"`
	}
	r, err = h.do(ctx, "POST", "/v1/admin/projects/"+h.project+"/identities", h.admin, []byte(`{"display_name":"acrelay conformance"}`))
	if err != nil {
		return err
	}
	if err := r.decode(http.StatusCreated, &ident); err != nil {
		return fmt.Errorf("register identity: %w", err)
	}
	if !correspondence.ValidUUID(ident.IdentityID) || ident.ProjectID != h.project || ident.Status != "active" {
		return fmt.Errorf("register identity: answer has id valid=%v, project match=%v, status %q (want active)",
			correspondence.ValidUUID(ident.IdentityID), ident.ProjectID == h.project, ident.Status)
	}
	g.Passed++
	h.identity = ident.IdentityID

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	h.priv = priv
	var key struct {
		SigningKeyID    string `json:"signing_key_id"`
		IdentityID      string `json:"identity_id"`
		PublicKeyB64URL string `json:"public_key_b64url"`
		Status          string `json:"status"`
	}
	reqBody, _ := json.Marshal(map[string]string{"public_key_b64url": correspondence.EncodePublicKey(pub)})
	r, err = h.do(ctx, "POST", "/v1/admin/identities/"+h.identity+"/keys", h.admin, reqBody)
	if err != nil {
		return err
	}
	if err := r.decode(http.StatusCreated, &key); err != nil {
		return fmt.Errorf("add key: %w", err)
	}
	if !correspondence.ValidUUID(key.SigningKeyID) || key.IdentityID != h.identity ||
		key.PublicKeyB64URL != correspondence.EncodePublicKey(pub) || key.Status != "active" {
		return fmt.Errorf("add key: answer does not echo the identity, public key and status active (status %q)", key.Status)
	}
	g.Passed++
	h.keyID = key.SigningKeyID

	for _, t := range []struct {
		scopes    string
		tok, id   *string
		wantScope []string
	}{
		{`{"scopes":["read","append"]}`, &h.rw, &h.rwID, []string{"read", "append"}},
		{`{"scopes":["read"]}`, &h.ro, &h.roID, []string{"read"}},
	} {
		var tok struct {
			TokenID string   `json:"token_id"`
			Token   string   `json:"token"`
			Scopes  []string `json:"scopes"`
		}
		r, err = h.do(ctx, "POST", "/v1/admin/projects/"+h.project+"/tokens", h.admin, []byte(t.scopes))
		if err != nil {
			return err
		}
		if err := r.decode(http.StatusCreated, &tok); err != nil {
			return fmt.Errorf("create token %s: %w", t.scopes, err)
		}
		if tok.Token == "" || tok.TokenID == "" ||
			!slices.Equal(slices.Sorted(slices.Values(tok.Scopes)), slices.Sorted(slices.Values(t.wantScope))) {
			return fmt.Errorf("create token %s: answer lacks the token, its id or the scopes", t.scopes)
		}
		if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
			g.fail("create token: Cache-Control %q, want no-store on an answer carrying a secret", cc)
		} else {
			g.Passed++
		}
		*t.tok, *t.id = tok.Token, tok.TokenID
	}

	suffix := newUUID()
	h.repo = "repo:acrelay-conformance/" + suffix
	h.claimRepo = "repo:acrelay-conformance-claims/" + suffix
	h.device, h.session = newUUID(), newUUID()
	return nil
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

// bodyMatrix appends one event per body_matrix entry of seed 000: 201,
// the event echoed byte for byte, a fresh increasing receipt, the unknown
// referenced ids as missing_parents, and the kind's lineage_status.
func (h *httpRun) bodyMatrix(ctx context.Context, g *Group) {
	file, err := seedVectors()
	if err != nil {
		g.fail("%v", err)
		return
	}
	var vs []kindBody
	if !decodeList(g, file["body_matrix"], &vs) {
		return
	}
	for _, v := range vs {
		body, err := canonicaljson.ParseObject(v.Body)
		if err != nil {
			g.fail("%s: %v", v.Kind, err)
			continue
		}
		_, _, err = h.append(ctx, h.event(h.repo, v.Kind, body), lineageOf(v.Kind), true)
		g.record(v.Kind, err)
	}
}

// reserialize writes e's members in reverse order with spaces: the same
// event, other bytes (spec §6: order and whitespace do not matter).
func reserialize(e *correspondence.Event) []byte {
	v := e.Value()
	var b bytes.Buffer
	b.WriteString("{ ")
	for i := len(v.Members) - 1; i >= 0; i-- {
		name, _ := json.Marshal(v.Members[i].Name)
		val, _ := canonicaljson.Canonical(v.Members[i].Value)
		b.Write(name)
		b.WriteString(" : ")
		b.Write(val)
		if i > 0 {
			b.WriteString(" ,\n")
		}
	}
	b.WriteString(" }")
	return b.Bytes()
}

// retry checks idempotent reposts and the session-fork warning (spec §7).
func (h *httpRun) retry(ctx context.Context, g *Group) {
	if len(h.posted) == 0 {
		g.fail("no event was appended")
		return
	}
	first := h.posted[0]
	check := func(name string, raw []byte) {
		r, err := h.post(ctx, raw)
		if err == nil {
			var a appendAnswer
			if err = r.decode(http.StatusOK, &a); err == nil && (a.Receipt != first.receipt || !bytes.Equal(a.Event, first.canonical)) {
				err = errors.New("the retry's receipt or event differs from the first acceptance")
			}
		}
		g.record(name, err)
	}
	check("exact retry answers 200 with the original receipt", first.canonical)
	var compact bytes.Buffer
	_ = json.Indent(&compact, first.canonical, "", "  ")
	check("indented retry answers 200 with the original receipt", compact.Bytes())
	ev, err := correspondence.ParseEvent(first.canonical)
	if err != nil {
		g.fail("reparse own event: %v", err)
		return
	}
	check("reordered retry answers 200 with the original receipt", reserialize(ev))

	// Two events with one (identity, device, session, session_seq).
	a := h.event(h.repo, "progress", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("fork left")}))
	b := h.event(h.repo, "progress", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("fork right")}))
	b.SessionSeq = a.SessionSeq
	_ = b.Sign(h.priv)
	_, _, err = h.append(ctx, a, "not_applicable", false)
	g.record("fork left appended", err)
	_, ans, err := h.append(ctx, b, "not_applicable", false)
	if err == nil {
		err = errors.New("no session_fork warning naming both events")
		for _, w := range ans.Warnings {
			if w.Code == "session_fork" && slices.Contains(w.EventIDs, a.ID) && slices.Contains(w.EventIDs, b.ID) {
				err = nil
			}
		}
	}
	g.record("fork right appended with a session_fork warning", err)
}

// refusals checks the stable codes of refused appends and reads.
func (h *httpRun) refusals(ctx context.Context, g *Group) {
	file, err := seedVectors()
	if err != nil {
		g.fail("%v", err)
		return
	}
	intent := func() *correspondence.Event {
		return h.event(h.repo, "intent", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("refused")}))
	}
	expect := func(name string, r response, err error, status int, code string) {
		if err == nil {
			err = r.expectError(status, code)
		}
		g.record(name, err)
	}
	canonical := func(e *correspondence.Event) []byte { b, _ := e.CanonicalJSON(); return b }

	// The strict profile's reason codes, on whole request bodies (spec §2).
	var rejections []rejectionVector
	if decodeList(g, file["rejection_vectors"], &rejections) {
		for _, v := range rejections {
			r, err := h.post(ctx, []byte(v.JSON))
			expect("rejection "+v.Name, r, err, http.StatusBadRequest, v.Reason)
		}
	}
	dup := canonical(intent())
	dup = append([]byte(`{"kind":"intent",`), dup[1:]...)
	r, err := h.post(ctx, dup)
	expect("duplicate member", r, err, http.StatusBadRequest, "duplicate_object_name")

	// Bodies the schema refuses: event_invalid with the vector's issue code.
	var invalid []kindBody
	if decodeList(g, file["invalid_body_vectors"], &invalid) {
		for _, v := range invalid {
			body, err := canonicaljson.ParseObject(v.Body)
			if err != nil {
				g.fail("invalid body %s: %v", v.Reason, err)
				continue
			}
			r, err := h.post(ctx, canonical(h.event(h.repo, v.Kind, body)))
			if err == nil {
				err = r.expectError(http.StatusBadRequest, "event_invalid")
			}
			if err == nil {
				var eb struct {
					Issues []struct {
						Pointer string `json:"pointer"`
						Code    string `json:"code"`
					} `json:"issues"`
				}
				_ = json.Unmarshal(r.body, &eb)
				if len(eb.Issues) != 1 || eb.Issues[0].Code != v.Reason || !strings.HasPrefix(eb.Issues[0].Pointer, "/body") {
					err = fmt.Errorf("issues %+v, want exactly one %s under /body", eb.Issues, v.Reason)
				}
			}
			g.record("invalid body "+v.Kind+" "+v.Reason, err)
		}
	}
	noParents := h.event(h.repo, "ack.seen", canonicaljson.ObjectValue(canonicaljson.Member{Name: "target_event_id", Value: canonicaljson.StringValue("sha256:" + strings.Repeat("c", 64))}))
	noParents.Parents = []string{}
	_ = noParents.Sign(h.priv)
	r, err = h.post(ctx, canonical(noParents))
	if err == nil {
		err = r.expectError(http.StatusBadRequest, "event_invalid")
		if err == nil && !bytes.Contains(r.body, []byte(`"reference_not_in_parents"`)) {
			err = errors.New("no reference_not_in_parents issue")
		}
	}
	g.record("reference not in parents", err)

	// Signature, event id and sender (spec §6).
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	forged := intent()
	_ = forged.Sign(other)
	r, err = h.post(ctx, canonical(forged))
	expect("signature by another key", r, err, http.StatusForbidden, "signature_invalid")

	mismatch := intent()
	mismatch.ID = "sha256:" + strings.Repeat("0", 64)
	r, err = h.post(ctx, canonical(mismatch))
	expect("event_id mismatch", r, err, http.StatusBadRequest, "event_id_mismatch")

	enc := intent()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, enc.Signature[85])
	enc.Signature = enc.Signature[:85] + string(alphabet[last|1]) // nonzero padding bits
	r, err = h.post(ctx, canonical(enc))
	expect("non-canonical base64url signature", r, err, http.StatusBadRequest, "signature_encoding_invalid")

	wrongProject := intent()
	wrongProject.ProjectID = newUUID()
	_ = wrongProject.Sign(h.priv)
	r, err = h.post(ctx, canonical(wrongProject))
	expect("project of another bearer", r, err, http.StatusForbidden, "project_mismatch")

	unknownKey := intent()
	unknownKey.Sender.SigningKeyID = newUUID()
	_ = unknownKey.Sign(h.priv)
	r, err = h.post(ctx, canonical(unknownKey))
	expect("unregistered signing key", r, err, http.StatusForbidden, "sender_or_signing_key_not_active")

	// Transport refusals (spec §3, §9, §10).
	r, err = h.do(ctx, "POST", "/v1/correspondence/events", h.rw, canonical(intent()), "Content-Type", "text/plain")
	expect("text/plain body", r, err, http.StatusUnsupportedMediaType, "content_type_unsupported")
	big := canonical(h.event(h.repo, "intent", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue(strings.Repeat("x", 70000))})))
	r, err = h.post(ctx, big)
	expect("body over 65536 bytes", r, err, http.StatusRequestEntityTooLarge, "body_too_large")
	r, err = h.do(ctx, "POST", "/v1/correspondence/events", h.ro, canonical(intent()))
	expect("read-only token appends", r, err, http.StatusForbidden, "scope_insufficient")
	r, err = h.do(ctx, "POST", "/v1/correspondence/events", "", canonical(intent()))
	if err == nil {
		err = r.expectError(http.StatusUnauthorized, "")
		if err == nil && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			err = errors.New("401 without a Bearer WWW-Authenticate challenge")
		}
	}
	g.record("no bearer token", err)
	r, err = h.do(ctx, "GET", "/v1/correspondence/events?"+h.query()+"&bogus=1", h.ro, nil)
	expect("unknown query parameter", r, err, http.StatusBadRequest, "")
	r, err = h.do(ctx, "GET", "/v1/correspondence/events", h.ro, nil)
	expect("read without repository_id", r, err, http.StatusBadRequest, "")
}

// query selects the body-matrix repository.
func (h *httpRun) query() string {
	return url.Values{"repository_id": {h.repo}}.Encode()
}

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
		return fmt.Errorf("Vary %q, want Accept and Authorization", vary)
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
			return fmt.Errorf("Link has no rel %q", rel)
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
	} {
		r, err := h.do(ctx, "GET", path, h.ro, nil, "Accept", c.accept)
		if err == nil {
			switch {
			case r.status != c.status:
				err = fmt.Errorf("status %d, want %d", r.status, c.status)
			case c.status != http.StatusOK:
			case mediaOf(r.header) != c.media:
				err = fmt.Errorf("Content-Type %q, want %s", mediaOf(r.header), c.media)
			case c.media == mediaAtom:
				if n := bytes.Count(r.body, []byte("<entry")); n != len(h.posted) || !bytes.Contains(r.body, []byte("https://agenttool.dev/ns/correspondence")) {
					err = fmt.Errorf("Atom feed with %d entries (want %d) or without the correspondence namespace", n, len(h.posted))
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

// claimsAnswer is GET /claims (spec §9).
type claimsAnswer struct {
	Protocol         string  `json:"protocol"`
	Scope            string  `json:"scope"`
	EvaluatedAt      string  `json:"evaluated_at"`
	Cursor           *string `json:"cursor"`
	ProjectionStatus string  `json:"projection_status"`
	Truncated        bool    `json:"truncated"`
	Claims           []struct {
		ClaimID           string   `json:"claim_id"`
		Generation        int64    `json:"generation"`
		EventID           string   `json:"event_id"`
		OwnerIdentityID   string   `json:"owner_identity_id"`
		ExpiresAt         string   `json:"expires_at"`
		Conflicted        bool     `json:"conflicted"`
		CompetingEventIDs []string `json:"competing_event_ids"`
	} `json:"claims"`
}

func (h *httpRun) getClaims(ctx context.Context, extra string) (claimsAnswer, response, error) {
	var a claimsAnswer
	r, err := h.do(ctx, "GET", "/v1/correspondence/claims?"+url.Values{"repository_id": {h.claimRepo}}.Encode()+extra, h.ro, nil)
	if err != nil {
		return a, r, err
	}
	return a, r, r.decode(http.StatusOK, &a)
}

// claims runs one lineage, open → renew → release, in a fresh repository
// and reads the projection after each step (spec §8, §9).
func (h *httpRun) claims(ctx context.Context, g *Group) {
	claimID := newUUID()
	str := canonicaljson.StringValue
	expires := correspondence.FormatTimestamp(time.Now().Add(time.Hour))
	open := h.event(h.claimRepo, "claim.open", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "claim_id", Value: str(claimID)},
		canonicaljson.Member{Name: "generation", Value: canonicaljson.IntValue(1)},
		canonicaljson.Member{Name: "expires_at", Value: str(expires)},
	), "docs", "api")
	openP, _, err := h.append(ctx, open, "valid", false)
	g.record("claim.open appended as valid", err)

	active := func(name, extra, wantEvent string, wantGen int64) {
		a, r, err := h.getClaims(ctx, extra)
		if err == nil {
			switch {
			case a.Protocol != correspondence.Protocol || a.Scope != "project_private" || a.ProjectionStatus != "complete" || a.Truncated:
				err = fmt.Errorf("protocol %q scope %q projection_status %q truncated %v", a.Protocol, a.Scope, a.ProjectionStatus, a.Truncated)
			case !validTimestamp(a.EvaluatedAt) || a.Cursor == nil || !validSeq(*a.Cursor):
				err = errors.New("evaluated_at or cursor malformed")
			case wantEvent == "" && len(a.Claims) != 0:
				err = fmt.Errorf("%d active claims, want none", len(a.Claims))
			case wantEvent == "":
			case len(a.Claims) != 1:
				err = fmt.Errorf("%d active claims, want 1", len(a.Claims))
			case a.Claims[0].EventID != wantEvent || a.Claims[0].ClaimID != claimID || a.Claims[0].Generation != wantGen ||
				a.Claims[0].OwnerIdentityID != h.identity || a.Claims[0].ExpiresAt != expires || a.Claims[0].Conflicted:
				err = fmt.Errorf("active claim is generation %d, conflicted %v; want generation %d by this identity, not conflicted",
					a.Claims[0].Generation, a.Claims[0].Conflicted, wantGen)
			case mediaOf(r.header) != mediaVendorJSON:
				err = fmt.Errorf("Content-Type %q", mediaOf(r.header))
			default:
				err = checkHeaders(r.header, false)
			}
		}
		g.record(name, err)
	}
	active("open is active", "", openP.id, 1)
	active("path docs/specs overlaps docs", "&path=docs%2Fspecs", openP.id, 1)
	active("path doc does not overlap docs", "&path=doc", "", 0)

	renew := h.event(h.claimRepo, "claim.renew", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "claim_id", Value: str(claimID)},
		canonicaljson.Member{Name: "generation", Value: canonicaljson.IntValue(2)},
		canonicaljson.Member{Name: "predecessor_event_id", Value: str(open.ID)},
		canonicaljson.Member{Name: "expires_at", Value: str(expires)},
	), "api", "docs")
	renewP, _, err := h.append(ctx, renew, "valid", false)
	g.record("claim.renew with the same path set, reordered, appended as valid", err)
	active("renewal replaces the open as the tip", "", renewP.id, 2)

	release := h.event(h.claimRepo, "claim.release", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "claim_id", Value: str(claimID)},
		canonicaljson.Member{Name: "generation", Value: canonicaljson.IntValue(3)},
		canonicaljson.Member{Name: "predecessor_event_id", Value: str(renew.ID)},
	), "docs", "api")
	_, _, err = h.append(ctx, release, "valid", false)
	g.record("claim.release appended as valid", err)
	active("release ends the claim", "", "", 0)

	_, r, err := h.getClaims(ctx, "")
	if err == nil {
		r2, err2 := h.do(ctx, "GET", "/v1/correspondence/claims?"+url.Values{"repository_id": {h.claimRepo}}.Encode(), h.ro, nil, "If-None-Match", r.header.Get("ETag"))
		if err = err2; err == nil && r2.status != http.StatusNotModified {
			err = fmt.Errorf("status %d, want 304", r2.status)
		}
	}
	g.record("claims ETag revalidates", err)
	r, err = h.do(ctx, "GET", "/v1/correspondence/claims?"+url.Values{"repository_id": {h.claimRepo}}.Encode(), h.ro, nil, "Accept", mediaAtom)
	if err == nil && r.status != http.StatusNotAcceptable {
		err = fmt.Errorf("status %d, want 406 (claims offer the two JSON types only)", r.status)
	}
	g.record("claims refuse Atom", err)
}

// voice reads the body-matrix repository's voice (spec §9).
func (h *httpRun) voice(ctx context.Context, g *Group) {
	r, err := h.do(ctx, "GET", "/v1/correspondence/voice?"+h.query(), h.ro, nil)
	if err != nil {
		g.fail("%v", err)
		return
	}
	var a struct {
		Protocol         string  `json:"protocol"`
		Scope            string  `json:"scope"`
		EvaluatedAt      string  `json:"evaluated_at"`
		Cursor           *string `json:"cursor"`
		ProjectionStatus string  `json:"projection_status"`
		Truncated        bool    `json:"truncated"`
		RecentEvents     []struct {
			Event   json.RawMessage `json:"event"`
			Receipt receipt         `json:"receipt"`
		} `json:"recent_events"`
		ActiveClaims []json.RawMessage `json:"active_claims"`
		Conflicts    struct {
			MissingParents []struct {
				EventID          string   `json:"event_id"`
				MissingParentIDs []string `json:"missing_parent_ids"`
			} `json:"missing_parents"`
			SessionForks []struct {
				EventIDs []string `json:"event_ids"`
			} `json:"session_forks"`
			OverlappingClaims []json.RawMessage `json:"overlapping_claims"`
		} `json:"conflicts"`
	}
	if err := r.decode(http.StatusOK, &a); err != nil {
		g.fail("GET voice: %v", err)
		return
	}
	g.record("headers", checkHeaders(r.header, false))
	g.record("envelope", func() error {
		if a.Protocol != correspondence.Protocol || a.Scope != "project_private" || a.ProjectionStatus != "complete" || a.Truncated ||
			!validTimestamp(a.EvaluatedAt) || a.Cursor == nil || a.ActiveClaims == nil || a.Conflicts.OverlappingClaims == nil {
			return fmt.Errorf("protocol %q scope %q projection_status %q truncated %v", a.Protocol, a.Scope, a.ProjectionStatus, a.Truncated)
		}
		return nil
	}())
	g.record("recent_events newest first", func() error {
		if len(a.RecentEvents) != len(h.posted) {
			return fmt.Errorf("%d recent events, want %d", len(a.RecentEvents), len(h.posted))
		}
		for i, rec := range a.RecentEvents {
			p := h.posted[len(h.posted)-1-i]
			if !bytes.Equal(rec.Event, p.canonical) || rec.Receipt != p.receipt {
				return fmt.Errorf("recent event %d is not the %d-th newest append", i, i+1)
			}
		}
		return nil
	}())
	g.record("missing_parents lists the unknown parents", func() error {
		want := map[string][]string{}
		for _, p := range h.posted {
			if len(p.refs) > 0 {
				want[p.id] = p.refs
			}
		}
		got := map[string][]string{}
		for _, m := range a.Conflicts.MissingParents {
			got[m.EventID] = m.MissingParentIDs
		}
		for id, refs := range want {
			if !sameSet(got[id], refs) {
				return fmt.Errorf("%d rows, want one per event with unknown parents (%d)", len(got), len(want))
			}
		}
		return nil
	}())
	g.record("session_forks lists the fork", func() error {
		for _, f := range a.Conflicts.SessionForks {
			if len(f.EventIDs) == 2 {
				return nil
			}
		}
		return errors.New("no session fork row with the two forked events")
	}())
}

// lifecycle deactivates the identity and revokes the tokens, checking
// that each takes effect (spec §10).
func (h *httpRun) lifecycle(ctx context.Context, g *Group) {
	r, err := h.do(ctx, "POST", "/v1/admin/identities/"+h.identity+"/deactivate", h.admin, nil)
	if err == nil {
		var ident struct {
			Status string `json:"status"`
		}
		if err = r.decode(http.StatusOK, &ident); err == nil && ident.Status != "inactive" {
			err = fmt.Errorf("status %q, want inactive", ident.Status)
		}
	}
	g.record("deactivate identity", err)
	raw, _ := h.event(h.repo, "close", canonicaljson.ObjectValue()).CanonicalJSON()
	r, err = h.post(ctx, raw)
	if err == nil {
		err = r.expectError(http.StatusForbidden, "sender_or_signing_key_not_active")
	}
	g.record("inactive identity cannot append", err)
	for _, t := range []struct{ name, id, tok string }{{"read+append", h.rwID, h.rw}, {"read", h.roID, h.ro}} {
		r, err := h.do(ctx, "DELETE", "/v1/admin/tokens/"+url.PathEscape(t.id), h.admin, nil)
		if err == nil && r.status != http.StatusNoContent {
			err = fmt.Errorf("status %d (%s), want 204", r.status, r.errorCode())
		}
		if err == nil {
			r, err = h.do(ctx, "GET", "/v1/correspondence/events?"+h.query(), t.tok, nil)
			if err == nil {
				err = r.expectError(http.StatusUnauthorized, "")
			}
		}
		g.record("revoked "+t.name+" token is refused", err)
	}
}
