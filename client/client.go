package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/backoff"
	"github.com/acrelay/acrelay/wire"
)

// Errors of reading records (spec §6, §9).
var (
	// ErrUnknownSigningKey: a record is signed by a key the Keyring lacks.
	ErrUnknownSigningKey = errors.New("record signed by a key not in the keyring")
	// ErrKeyIdentityMismatch: the keyring's key belongs to another identity
	// than the record's sender.identity_id.
	ErrKeyIdentityMismatch = errors.New("signing key belongs to another identity")
	// ErrMalformedRecord: the relay's answer is not the documented shape.
	ErrMalformedRecord = errors.New("malformed record from relay")
)

// APIError is an error answer of the relay: the HTTP status and the JSON
// body wire.Error, {"error": code, "message", "hint"?, "issues"?} (spec
// §9). Code is the stable error code (wire.Code*: "event_invalid",
// "scope_insufficient", …); Message and Hint are the relay's English,
// which never quotes bodies. Issues are an event's violations (pointer,
// code, message) or a contract's (pointer, message; Code "").
type APIError struct {
	Status  int
	Code    string                 `json:"error"`
	Message string                 `json:"message"`
	Hint    string                 `json:"hint,omitempty"`
	Issues  []correspondence.Issue `json:"issues,omitempty"`
	// RetryAfter is the answer's Retry-After (a 429's or 503's wait), 0
	// when it had none.
	RetryAfter time.Duration `json:"-"`
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "relay answered %d %s", e.Status, e.Code)
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Hint != "" {
		b.WriteString(" (hint: " + e.Hint + ")")
	}
	for _, is := range e.Issues {
		if is.Code == "" {
			fmt.Fprintf(&b, "\n  %s: %s", is.Pointer, is.Message)
			continue
		}
		fmt.Fprintf(&b, "\n  %s %s: %s", is.Pointer, is.Code, is.Message)
	}
	return b.String()
}

// Retryable reports whether the same request may succeed later: 503 (such
// as correspondence_append_unavailable), 502 and 504 from proxies, and 429.
func (e *APIError) Retryable() bool {
	switch e.Status {
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// Key is one known signing key: the identity it belongs to and its
// Ed25519 public key. Status is the registry's "active" or "revoked" for
// a key read from the relay (Client.Identities), "" for one from a
// keyring file; a revoked key still verifies what it signed before its
// revocation.
type Key struct {
	IdentityID string
	PublicKey  ed25519.PublicKey
	Status     string
}

// Keyring holds the signing keys a Client trusts, by signing_key_id.
type Keyring map[string]Key

// Verify checks that ev is signed by a key in the keyring that belongs to
// ev.Sender.IdentityID, and that its signature and event id hold (spec
// §6). Errors: ErrUnknownSigningKey, ErrKeyIdentityMismatch and the
// correspondence errors of Event.Verify, wrapped with the event id.
func (k Keyring) Verify(ev *correspondence.Event) error {
	key, ok := k[ev.Sender.SigningKeyID]
	if !ok {
		return fmt.Errorf("verify %s: %w", ev.ID, ErrUnknownSigningKey)
	}
	if key.IdentityID != ev.Sender.IdentityID {
		return fmt.Errorf("verify %s: %w", ev.ID, ErrKeyIdentityMismatch)
	}
	if err := ev.Verify(key.PublicKey); err != nil {
		return fmt.Errorf("verify %s: %w", ev.ID, err)
	}
	return nil
}

// KeyEntry is one entry of a keyring file.
type KeyEntry struct {
	SigningKeyID    string `json:"signing_key_id"`
	IdentityID      string `json:"identity_id"`
	PublicKeyB64URL string `json:"public_key_b64url"`
}

// ParseKeyring reads a keyring file: a JSON array of KeyEntry objects
// ({"signing_key_id", "identity_id", "public_key_b64url"}). Errors: bad
// JSON, or a public key that is not 43 characters of base64url.
func ParseKeyring(data []byte) (Keyring, error) {
	var entries []KeyEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	k := Keyring{}
	for _, e := range entries {
		pub, err := correspondence.DecodePublicKey(e.PublicKeyB64URL)
		if err != nil {
			return nil, fmt.Errorf("keyring %s: %w", e.SigningKeyID, err)
		}
		k[e.SigningKeyID] = Key{IdentityID: e.IdentityID, PublicKey: pub}
	}
	return k, nil
}

// LoadKeyring reads and parses a keyring file.
func LoadKeyring(path string) (Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read keyring: %w", err)
	}
	return ParseKeyring(data)
}

// Receipt is the relay's unsigned receipt of a record (spec §7).
// ReceivedSeq is the integer value of the wire's decimal string.
type Receipt struct {
	ReceivedSeq int64
	ReceivedAt  string // RFC3339-ms, the relay's database clock
}

// Record is one stored event as read from the relay (spec §9): the event
// bytes exactly as served (Raw), the event decoded from them, its receipt
// and the dynamic diagnostics. Verified is true when the Client's Keyring
// verified the event; a Client with a Keyring never returns an unverified
// record.
type Record struct {
	Raw            json.RawMessage
	Event          *correspondence.Event
	Receipt        Receipt
	MissingParents []string
	LineageStatus  correspondence.LineageStatus
	Verified       bool
}

// MarshalJSON writes the record in the relay's shape, {event, receipt,
// missing_parents, lineage_status}, with the event bytes as served.
func (r Record) MarshalJSON() ([]byte, error) {
	w := wire.Record{Event: jsontext.Value(r.Raw), MissingParents: r.MissingParents, LineageStatus: string(r.LineageStatus),
		Receipt: wire.Receipt{ReceivedSeq: strconv.FormatInt(r.Receipt.ReceivedSeq, 10), ReceivedAt: r.Receipt.ReceivedAt}}
	if w.MissingParents == nil {
		w.MissingParents = []string{}
	}
	return json.Marshal(w)
}

// parseSeq parses a received_seq decimal string: no sign, no leading zero.
func parseSeq(s string) (int64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%w: received_seq %q", ErrMalformedRecord, s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: received_seq", ErrMalformedRecord)
	}
	return n, nil
}

// DecodeEvent reads a signed event from raw JSON under the strict profile
// (spec §2) and the full validation of spec §3–§5 (correspondence.ParseEvent).
// It does not verify the signature or the event id: Keyring.Verify does.
// Errors: *canonicaljson.ProfileError, or ErrMalformedRecord wrapping the
// *correspondence.ValidationError.
func DecodeEvent(raw []byte) (*correspondence.Event, error) {
	ev, err := correspondence.ParseEvent(raw)
	if err != nil {
		var ve *correspondence.ValidationError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
		}
		return nil, err
	}
	return ev, nil
}

// RetryPolicy is the capped exponential backoff with full jitter used for
// retryable failures: attempt n (from 0) waits a random duration in
// [0, min(Max, Initial·2^n)), or the relay's Retry-After when longer
// (capped at Max). MaxAttempts counts all attempts; 0 means until the
// context ends.
type RetryPolicy struct {
	Initial     time.Duration
	Max         time.Duration
	MaxAttempts int
}

// DefaultRetry is the policy New installs: 200ms doubling to 10s, 10 attempts.
var DefaultRetry = RetryPolicy{Initial: 200 * time.Millisecond, Max: 10 * time.Second, MaxAttempts: 10}

func (p RetryPolicy) delay(attempt int, retryAfter time.Duration) time.Duration {
	initial := p.Initial
	if initial <= 0 {
		initial = p.Max // as before: no Initial waits up to Max
	}
	d := backoff.Policy{Initial: initial, Max: p.Max}.Full(attempt + 1)
	if retryAfter > d {
		d = min(retryAfter, p.Max)
	}
	return d
}

// Client talks to one relay with one bearer token (spec §9). Its fields
// may be changed before first use; it is safe for concurrent use after.
type Client struct {
	BaseURL *url.URL
	Token   string
	HTTP    *http.Client
	// Keys, when non-nil, verifies every record read; records that fail
	// are refused with an error, never returned.
	Keys  Keyring
	Retry RetryPolicy
	// UserAgent is sent on every request.
	UserAgent string
}

// New returns a Client for the relay at baseURL (scheme and host, with an
// optional path prefix) authenticating with token. Error when baseURL is
// not an absolute http(s) URL, or token holds a control character (a
// line break pasted with it: no request could carry it).
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("relay url %q: want an absolute http(s) URL", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	// A token pasted with a line break or other control character can
	// never be sent (net/http refuses the header) and retrying cannot
	// help: say so now, without echoing the token.
	if strings.ContainsFunc(token, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, errors.New("the bearer token contains a line break or another control character: check ACRELAY_TOKEN or the token file")
	}
	return &Client{BaseURL: u, Token: token, HTTP: &http.Client{}, Retry: DefaultRetry, UserAgent: "acrelay-client/0.1"}, nil
}

// endpoint returns the absolute URL of path under BaseURL with query q.
func (c *Client) endpoint(path string, q url.Values) *url.URL {
	u := *c.BaseURL
	u.Path = c.BaseURL.Path + path
	u.RawPath = ""
	u.RawQuery = q.Encode()
	return &u
}

// response is a completed exchange: status, headers, body and the links.
type response struct {
	status int
	header http.Header
	body   []byte
	links  Links
}

// do sends one request; with retry it repeats the same bytes on
// retryable failures per c.Retry. Non-2xx answers become *APIError.
func (c *Client) do(ctx context.Context, method string, u *url.URL, contentType string, payload []byte, retry bool) (*response, error) {
	return c.doAccept(ctx, method, u, acceptJSONVendor, contentType, payload, retry)
}

// doAccept is do with the Accept field given (the log's tiles and
// checkpoint are not JSON).
func (c *Client) doAccept(ctx context.Context, method string, u *url.URL, accept, contentType string, payload []byte, retry bool) (*response, error) {
	for attempt := 0; ; attempt++ {
		resp, retryAfter, err := c.once(ctx, method, u, accept, contentType, payload)
		if err == nil {
			return resp, nil
		}
		if !retry || ctx.Err() != nil || !retryableErr(err) ||
			(c.Retry.MaxAttempts > 0 && attempt+1 >= c.Retry.MaxAttempts) {
			return nil, err
		}
		t := time.NewTimer(c.Retry.delay(attempt, retryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// transientError marks a failure of the transport (connection refused,
// reset, timeout, a body cut short): the same request may succeed later.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// retryableErr: transport failures and retryable statuses only; never a
// refusal, a malformed answer or a record that fails verification.
func retryableErr(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Retryable()
	}
	var te *transientError
	return errors.As(err, &te)
}

func (c *Client) newRequest(ctx context.Context, method string, u *url.URL, contentType string, payload []byte) (*http.Request, error) {
	return c.newRequestAccept(ctx, method, u, acceptJSONVendor, contentType, payload)
}

func (c *Client) newRequestAccept(ctx context.Context, method string, u *url.URL, accept, contentType string, payload []byte) (*http.Request, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("new request: %w", err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", accept)
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	return req, nil
}

func (c *Client) once(ctx context.Context, method string, u *url.URL, accept, contentType string, payload []byte) (*response, time.Duration, error) {
	req, err := c.newRequestAccept(ctx, method, u, accept, contentType, payload)
	if err != nil {
		return nil, 0, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, 0, &transientError{fmt.Errorf("%s %s: %w", method, u.Path, err)}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, 0, &transientError{fmt.Errorf("%s %s: read body: %w", method, u.Path, err)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		ae := ParseAPIError(res.StatusCode, body)
		ae.RetryAfter = max(retryAfterOf(res.Header), 0)
		return nil, ae.RetryAfter, ae
	}
	links, err := ParseLinks(res.Header, res.Request.URL)
	if err != nil {
		// A bad Link header does not spoil the answer; links stay empty.
		links = Links{Base: res.Request.URL}
	}
	return &response{status: res.StatusCode, header: res.Header, body: body, links: links}, 0, nil
}

func retryAfterOf(h http.Header) time.Duration {
	s := h.Get("Retry-After")
	if s == "" {
		return 0
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(s); err == nil {
		return time.Until(t)
	}
	return 0
}

// ParseAPIError reads an error answer: status and its body (wire.Error).
// A body that is not one (a proxy's page, say) gives Code "http_<status>"
// and the status text as Message.
func ParseAPIError(status int, body []byte) *APIError {
	ae := &APIError{Status: status}
	var we wire.Error
	if err := json.Unmarshal(body, &we); err != nil || we.Error == "" {
		ae.Code = "http_" + strconv.Itoa(status)
		ae.Message = http.StatusText(status)
		return ae
	}
	ae.Code, ae.Message, ae.Hint = we.Error, we.Message, we.Hint
	if len(we.Issues) > 0 {
		// Issues that are not the documented objects are dropped, not fatal.
		_ = json.Unmarshal(we.Issues, &ae.Issues)
	}
	return ae
}

// record turns a wire record into a Record, verifying it when c.Keys is set.
func (c *Client) record(w wire.Record) (Record, error) {
	if len(w.Event) == 0 {
		return Record{}, fmt.Errorf("%w: no event", ErrMalformedRecord)
	}
	ev, err := DecodeEvent(w.Event)
	if err != nil {
		return Record{}, err
	}
	seq, err := parseSeq(w.Receipt.ReceivedSeq)
	if err != nil {
		return Record{}, err
	}
	r := Record{Raw: json.RawMessage(w.Event), Event: ev, Receipt: Receipt{ReceivedSeq: seq, ReceivedAt: w.Receipt.ReceivedAt},
		MissingParents: w.MissingParents, LineageStatus: correspondence.LineageStatus(w.LineageStatus)}
	if c.Keys != nil {
		if err := c.Keys.Verify(ev); err != nil {
			return Record{}, err
		}
		r.Verified = true
	}
	return r, nil
}

// Warning is one POST warning (spec §9): code "session_fork" or
// "claim_lineage_pending", a detail, and the event ids or paths concerned.
type Warning = wire.Warning

// PostResult is the relay's answer to a POST: the stored record, whether
// this call stored it (201) or found it stored already (200, an exact
// retry with the original receipt), and the warnings.
type PostResult struct {
	Record   Record
	Created  bool
	Warnings []Warning
}

// Post sends the signed event ev (its RFC 8785 bytes) and returns the
// stored record (spec §7, §9). Failures that may pass (503 such as
// correspondence_append_unavailable, 502, 504, 429, network errors) are
// retried with the same bytes under c.Retry; a retry that finds the event
// stored gets 200, which is success. Errors: *APIError for refusals
// (event_invalid, signature_invalid, …), ErrMalformedRecord, verification
// errors when c.Keys is set, or the context's error.
func (c *Client) Post(ctx context.Context, ev *correspondence.Event) (*PostResult, error) {
	raw, err := ev.CanonicalJSON()
	if err != nil {
		return nil, fmt.Errorf("post: %w", err)
	}
	res, err := c.PostBytes(ctx, raw)
	if err != nil {
		return nil, err
	}
	if res.Record.Event.ID != ev.ID {
		return nil, fmt.Errorf("%w: relay stored another event id", ErrMalformedRecord)
	}
	return res, nil
}

// PostBytes is Post for an event already serialized (sent unchanged, as
// application/vnd.agenttool.correspondence+json; at most 65,536 bytes).
func (c *Client) PostBytes(ctx context.Context, event []byte) (*PostResult, error) {
	resp, err := c.do(ctx, http.MethodPost, c.endpoint("/v1/correspondence/events", nil), MediaTypeVendor, event, true)
	if err != nil {
		return nil, err
	}
	var w wire.AppendAnswer
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	r, err := c.record(w.Record)
	if err != nil {
		return nil, err
	}
	return &PostResult{Record: r, Created: resp.status == http.StatusCreated, Warnings: w.Warnings}, nil
}

// EventsQuery selects records of GET /v1/correspondence/events (spec §9).
// RepositoryID is required; ThreadID optional; After is the exclusive
// received_seq cursor (0: from the start); Limit 1–200 (0: the relay's
// default, 100).
type EventsQuery struct {
	RepositoryID string
	ThreadID     string
	After        int64
	Limit        int
}

func (q EventsQuery) values() url.Values {
	v := url.Values{"repository_id": {q.RepositoryID}}
	if q.ThreadID != "" {
		v.Set("thread_id", q.ThreadID)
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Page is one page of records in ascending received_seq. NextAfter is the
// cursor of the next page (the last record's received_seq, or the
// request's After when the page is empty); HasMore reports that records
// beyond the page exist.
type Page struct {
	Records   []Record
	NextAfter int64
	HasMore   bool
	Links     Links
}

// EventsPage reads one page (spec §9). Errors: *APIError (after_invalid,
// limit_invalid, …), ErrMalformedRecord, verification errors.
func (c *Client) EventsPage(ctx context.Context, q EventsQuery) (*Page, error) {
	resp, err := c.do(ctx, http.MethodGet, c.endpoint("/v1/correspondence/events", q.values()), "", nil, true)
	if err != nil {
		return nil, err
	}
	var w wire.Events
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	p := &Page{NextAfter: q.After, HasMore: w.Page.HasMore, Links: resp.links}
	if w.Page.NextAfter != nil {
		if p.NextAfter, err = parseSeq(*w.Page.NextAfter); err != nil {
			return nil, err
		}
	}
	for _, wr := range w.Events {
		r, err := c.record(wr)
		if err != nil {
			return nil, err
		}
		p.Records = append(p.Records, r)
	}
	if n := len(p.Records); n > 0 && p.NextAfter < p.Records[n-1].Receipt.ReceivedSeq {
		return nil, fmt.Errorf("%w: next_after behind the page", ErrMalformedRecord)
	}
	if p.HasMore && p.NextAfter <= q.After {
		return nil, fmt.Errorf("%w: has_more without progress", ErrMalformedRecord)
	}
	return p, nil
}

// Events iterates over all records matching q from q.After on, page by
// page, following next_after until has_more is false. It yields each
// record once; on error it yields (Record{}, err) and stops.
func (c *Client) Events(ctx context.Context, q EventsQuery) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for {
			p, err := c.EventsPage(ctx, q)
			if err != nil {
				yield(Record{}, err)
				return
			}
			for _, r := range p.Records {
				if !yield(r, nil) {
					return
				}
			}
			if !p.HasMore {
				return
			}
			q.After = p.NextAfter
		}
	}
}

// ClaimScope is a claim's scope as JSON (spec §3).
type ClaimScope = wire.ClaimScope

// ActiveClaim is one active claim row (spec §8) with its scope decoded.
// ExpiresAt is RFC3339-ms.
type ActiveClaim = wire.ActiveClaim[ClaimScope]

// Claims is the active-claims projection (spec §8, §9). Cursor is the
// project's newest received_seq (nil for an empty stream);
// ProjectionStatus is "complete", "truncated" or "unavailable". Raw holds
// the body exactly as served.
type Claims struct {
	Protocol         string
	Scope            string
	EvaluatedAt      string
	Cursor           *string
	ProjectionStatus string
	Truncated        bool
	Claims           []ActiveClaim
	Raw              []byte
	Links            Links
}

// ClaimsQuery selects active claims: RepositoryID required; ThreadID and
// Path (a path prefix; claims overlapping it, spec §4) optional.
type ClaimsQuery struct {
	RepositoryID string
	ThreadID     string
	Path         string
}

// Claims reads GET /v1/correspondence/claims (spec §9). Errors: *APIError
// (503 correspondence_projection_unavailable is retried), ErrMalformedRecord.
func (c *Client) Claims(ctx context.Context, q ClaimsQuery) (*Claims, error) {
	v := url.Values{"repository_id": {q.RepositoryID}}
	if q.ThreadID != "" {
		v.Set("thread_id", q.ThreadID)
	}
	if q.Path != "" {
		v.Set("path", q.Path)
	}
	resp, err := c.do(ctx, http.MethodGet, c.endpoint("/v1/correspondence/claims", v), "", nil, true)
	if err != nil {
		return nil, err
	}
	var w wire.Claims[ClaimScope]
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	return &Claims{Protocol: w.Protocol, Scope: w.Scope, EvaluatedAt: w.EvaluatedAt, Cursor: w.Cursor,
		ProjectionStatus: w.ProjectionStatus, Truncated: w.Truncated, Claims: w.Claims, Raw: resp.body, Links: resp.links}, nil
}

// MissingParentsRow names an event with parents not yet stored.
type MissingParentsRow = wire.MissingParents

// SessionFork is a session fork: two or more event ids with one
// (identity, device, session, session_seq) (spec §7).
type SessionFork = wire.SessionFork

// OverlappingClaims is a pair of active claims whose paths overlap, with
// the shorter prefix of each overlapping pair (spec §4, §9).
type OverlappingClaims = wire.Overlap

// VoiceConflicts are the conflict lists of the voice snapshot.
type VoiceConflicts = wire.Conflicts

// Voice is the bounded coordination snapshot (spec §9): the newest ≤50
// records newest first (verified like every record), active claims and
// conflicts. Raw holds the body exactly as served.
type Voice struct {
	Protocol         string
	Scope            string
	EvaluatedAt      string
	Cursor           *string
	ProjectionStatus string
	Truncated        bool
	RecentEvents     []Record
	ActiveClaims     []ActiveClaim
	Conflicts        VoiceConflicts
	Raw              []byte
	Links            Links
}

// Voice reads GET /v1/correspondence/voice?repository_id=&thread_id=
// (spec §9). Errors as Claims, plus verification errors of recent_events.
func (c *Client) Voice(ctx context.Context, repositoryID, threadID string) (*Voice, error) {
	v := url.Values{"repository_id": {repositoryID}}
	if threadID != "" {
		v.Set("thread_id", threadID)
	}
	resp, err := c.do(ctx, http.MethodGet, c.endpoint("/v1/correspondence/voice", v), "", nil, true)
	if err != nil {
		return nil, err
	}
	var w wire.Voice[ClaimScope]
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	out := &Voice{Protocol: w.Protocol, Scope: w.Scope, EvaluatedAt: w.EvaluatedAt, Cursor: w.Cursor,
		ProjectionStatus: w.ProjectionStatus, Truncated: w.Truncated, ActiveClaims: w.ActiveClaims,
		Conflicts: w.Conflicts, Raw: resp.body, Links: resp.links}
	for _, wr := range w.RecentEvents {
		r, err := c.record(wr)
		if err != nil {
			return nil, err
		}
		out.RecentEvents = append(out.RecentEvents, r)
	}
	return out, nil
}

// Discover asks the relay for the links of a repository's (and
// optionally a thread's) events with HEAD /v1/correspondence/events and
// returns them: self, alternate (JSON/Atom), the voice and active-claims
// relations and the live Link-Template (spec §9).
func (c *Client) Discover(ctx context.Context, repositoryID, threadID string) (Links, error) {
	q := EventsQuery{RepositoryID: repositoryID, ThreadID: threadID}
	resp, err := c.do(ctx, http.MethodHead, c.endpoint("/v1/correspondence/events", q.values()), "", nil, true)
	if err != nil {
		return Links{}, err
	}
	return resp.links, nil
}

// Whoami is the bearer's own description (GET /v1/whoami). ProjectID and
// TokenID are "" for the server-wide operator token (Operator true).
type Whoami struct {
	Operator  bool     `json:"operator"`
	ProjectID string   `json:"project_id"`
	TokenID   string   `json:"token_id"`
	Scopes    []string `json:"scopes"`
}

// Whoami reads GET /v1/whoami: the token's project, id and scopes.
func (c *Client) Whoami(ctx context.Context) (*Whoami, error) {
	var out Whoami
	if err := c.getJSON(ctx, "/v1/whoami", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) getJSON(ctx context.Context, path string, out any) error {
	resp, err := c.do(ctx, http.MethodGet, c.endpoint(path, nil), "", nil, true)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	return nil
}

// postJSON sends in as JSON once (admin creations are not retried: a
// lost answer could otherwise create twice) and decodes the answer.
func (c *Client) postJSON(ctx context.Context, path string, in, out any) error {
	payload, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, c.endpoint(path, nil), mediaTypeJSON, payload, false)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	return nil
}

// AdminIdentity is the answer of CreateIdentity: {"identity_id","status"}.
type AdminIdentity struct {
	IdentityID string `json:"identity_id"`
	Status     string `json:"status"`
}

// CreateIdentity registers an identity in a project (admin scope, spec
// §10). identityID and displayName may be "" (the relay picks the id).
func (c *Client) CreateIdentity(ctx context.Context, projectID, identityID, displayName string) (*AdminIdentity, error) {
	in := map[string]string{}
	if identityID != "" {
		in["identity_id"] = identityID
	}
	if displayName != "" {
		in["display_name"] = displayName
	}
	var out AdminIdentity
	if err := c.postJSON(ctx, "/v1/admin/projects/"+url.PathEscape(projectID)+"/identities", in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminKey is the answer of AddKey: {"signing_key_id","status"}.
type AdminKey struct {
	SigningKeyID string `json:"signing_key_id"`
	Status       string `json:"status"`
}

// AddKey registers an Ed25519 public key (43 characters of base64url) for
// an identity (admin scope, spec §10); signingKeyID may be "".
func (c *Client) AddKey(ctx context.Context, identityID, signingKeyID, publicKeyB64URL string) (*AdminKey, error) {
	in := map[string]string{"public_key_b64url": publicKeyB64URL}
	if signingKeyID != "" {
		in["signing_key_id"] = signingKeyID
	}
	var out AdminKey
	if err := c.postJSON(ctx, "/v1/admin/identities/"+url.PathEscape(identityID)+"/keys", in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminToken is the answer of CreateToken. Token is the secret, shown
// once: never log it.
type AdminToken struct {
	TokenID string   `json:"token_id"`
	Token   string   `json:"token"`
	Scopes  []string `json:"scopes"`
}

// CreateToken issues a project token with scopes ("read", "append",
// "admin"; spec §10).
func (c *Client) CreateToken(ctx context.Context, projectID string, scopes []string) (*AdminToken, error) {
	var out AdminToken
	if err := c.postJSON(ctx, "/v1/admin/projects/"+url.PathEscape(projectID)+"/tokens", map[string]any{"scopes": scopes}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
