package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/attributed"
	"github.com/acrelay/acrelay/wire"
)

// mcpServer is the state of one acrelay mcp process: the relay client,
// the agent's signer and session_seq store, the display names of the
// project's identities, the claim events this process signed, and the
// wake followers behind resource subscriptions.
type mcpServer struct {
	c      *client.Client
	signer *client.Signer
	seq    seqStore
	log    *slog.Logger
	now    func() time.Time
	srv    *mcp.Server

	mu      sync.Mutex
	names   map[string]client.Identity
	namesAt time.Time
	claims  map[string]*correspondence.Event // claim_id → newest own claim event signed here

	subMu     sync.Mutex
	followers map[string]*follower // repository_id → its wake follower
}

func newMCPServer(c *client.Client, signer *client.Signer, seq seqStore, logger *slog.Logger) *mcpServer {
	// A tool call waits for at most three quick attempts: a 429's wait or a
	// lasting 503 goes back to the model as a tool error, not a stall.
	c.Retry = client.RetryPolicy{Initial: 250 * time.Millisecond, Max: time.Second, MaxAttempts: 3}
	c.UserAgent = "acrelay-mcp/0.1"
	s := &mcpServer{c: c, signer: signer, seq: seq, log: logger, now: time.Now,
		claims: map[string]*correspondence.Event{}, followers: map[string]*follower{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "acrelay", Title: "acrelay coordination relay", Version: rootCmd.Version},
		&mcp.ServerOptions{
			Instructions:       mcpInstructions,
			Logger:             quietLogger(logger),
			SubscribeHandler:   s.subscribe,
			UnsubscribeHandler: s.unsubscribe,
			Capabilities:       &mcp.ServerCapabilities{},
		})
	s.addTools()
	s.addResources()
	s.srv.AddReceivingMiddleware(s.unknownToolMiddleware)
	return s
}

// mcpInstructions is the server's instructions to the model (MCP
// initialize result).
const mcpInstructions = `acrelay coordinates coding agents working on shared repositories through signed, advisory events (agent-correspondence/v0.1). Before editing paths, call claim_paths: it records your claim and names every overlapping active claim of another identity (claims never lock anything; coordinate when they overlap). Renew before expiry, release when done. voice gives the repository's snapshot. ` + attributed.Notice

// ---- session_seq ---------------------------------------------------------

// seqStore hands out session_seq values (spec §7). take(k, fn) calls fn
// with the first of k consecutive unused values and spends them only when
// fn succeeds, so an event refused before posting uses no number; calls
// are serialized.
type seqStore interface {
	take(k int, fn func(first int64) error) error
	close()
}

// memorySeq counts in memory: the store of a session id used by one run.
type memorySeq struct {
	mu   sync.Mutex
	last int64
}

func (m *memorySeq) take(k int, fn func(int64) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last > canonicaljson.MaxSafeInteger-int64(k) {
		return errors.New("session_seq exhausted")
	}
	if err := fn(m.last + 1); err != nil {
		return err
	}
	m.last += int64(k)
	return nil
}

func (m *memorySeq) close() {}

// fileSeq keeps the last value used in a file (a decimal and a newline,
// replaced atomically before any event with the new values is posted),
// held under an exclusive flock on path+".lock" for the process's life:
// a second acrelay mcp on the same session is refused.
type fileSeq struct {
	mu   sync.Mutex
	path string
	lock *os.File
	last int64
}

func openFileSeq(path string) (*fileSeq, error) {
	lf, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session_seq lock: %w", err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("session_seq file %s is in use by another acrelay mcp (give each its own session id)", path)
	}
	f := &fileSeq{path: path, lock: lf}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		f.close()
		return nil, fmt.Errorf("session_seq file: %w", err)
	default:
		n, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if perr != nil || n < 0 {
			f.close()
			return nil, fmt.Errorf("session_seq file %s: not a non-negative integer", path)
		}
		f.last = n
	}
	return f, nil
}

func (f *fileSeq) take(k int, fn func(int64) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last > canonicaljson.MaxSafeInteger-int64(k) {
		return errors.New("session_seq exhausted")
	}
	if err := fn(f.last + 1); err != nil {
		return err
	}
	n := f.last + int64(k)
	if err := client.WriteFileAtomic(f.path, []byte(strconv.FormatInt(n, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("session_seq file: %w", err)
	}
	f.last = n
	return nil
}

func (f *fileSeq) close() {
	if f.lock != nil {
		_ = syscall.Flock(int(f.lock.Fd()), syscall.LOCK_UN)
		f.lock.Close()
	}
}

// ---- tool errors -----------------------------------------------------------

// toolError is a refusal shown to the model as an MCP tool error: the
// relay's stable code (wire.Code*, or a spec issue code inside issues),
// its message and hint, the wait of a 429/503, and an event's issues. It
// never carries a stack, a token or a key.
type toolError struct {
	Code              string                 `json:"error"`
	Message           string                 `json:"message"`
	Hint              string                 `json:"hint,omitempty"`
	Status            int                    `json:"status,omitempty"`
	RetryAfterSeconds int64                  `json:"retry_after_seconds,omitempty"`
	Issues            []correspondence.Issue `json:"issues,omitempty"`
	Posted            bool                   `json:"posted"`
	// OutcomeUnknown: the post failed after the request may have reached
	// the relay (no answer, a connection cut): event EventID may be
	// stored. Reading the log tells.
	OutcomeUnknown bool   `json:"outcome_unknown,omitempty"`
	EventID        string `json:"event_id,omitempty"`
}

// mayHaveReached reports whether a failed relay call may have been
// received all the same: a transport failure other than a refused
// connection or an unknown host, or the call's end (cancelled, timed
// out). A relay's answer (*client.APIError) is never such a failure.
func mayHaveReached(err error) bool {
	var ae *client.APIError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &ae), errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &dnsErr):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var te *toolError
	if errors.As(err, &te) {
		return false
	}
	var ve *correspondence.ValidationError
	return !errors.As(err, &ve)
}

func (e *toolError) Error() string { return e.Code + ": " + e.Message }

func argError(format string, a ...any) *toolError {
	return &toolError{Code: wire.CodeBodyInvalid, Message: fmt.Sprintf(format, a...)}
}

// asToolError maps any error of a tool to what the model sees.
func asToolError(err error) *toolError {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		out := &toolError{Code: ae.Code, Message: ae.Message, Hint: ae.Hint, Status: ae.Status, Issues: ae.Issues}
		if out.Hint == "" && ae.Code == wire.CodeSenderOrSigningKeyNotActive {
			out.Hint = "this agent's signing key was revoked or its identity deactivated; nothing it signs is accepted: make a new key with acrelay agent init --key NEW.pem (an admin registers it), then restart this server"
		}
		if ae.RetryAfter > 0 {
			out.RetryAfterSeconds = int64(math.Ceil(ae.RetryAfter.Seconds()))
			out.Message += fmt.Sprintf(" (wait %d s before retrying)", out.RetryAfterSeconds)
		}
		return out
	}
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		return &toolError{Code: wire.CodeEventInvalid, Message: "the event would be refused by the relay (spec §2–§5)", Issues: ve.Issues}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &toolError{Code: wire.CodeRequestCancelled, Message: "the call ended before the relay answered"}
	}
	if errors.Is(err, client.ErrMalformedRecord) || errors.Is(err, client.ErrUnknownSigningKey) || errors.Is(err, client.ErrKeyIdentityMismatch) ||
		errors.Is(err, correspondence.ErrSignatureInvalid) {
		return &toolError{Code: "record_unverified", Message: "a record from the relay failed verification or is malformed; it was not used"}
	}
	// Transport failures: the text names the method and path, never the
	// token (it travels in a header) or the query's secrets (there are none).
	return &toolError{Code: wire.CodeUnavailable, Message: "the relay could not be reached: " + redactURLs(err.Error())}
}

// redactURLs keeps an error's text but drops any scheme://host part, so a
// transport error does not print the relay's address with credentials.
func redactURLs(s string) string {
	return tokenSecret.ReplaceAllString(s, "${1}<redacted>")
}

// errorResult is the CallToolResult of a refusal: IsError, a text block
// "code: message", the issues one per line, and the structured form.
func errorResult(err error) *mcp.CallToolResult {
	te := asToolError(err)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", te.Code, te.Message)
	if te.Hint != "" {
		fmt.Fprintf(&b, " (hint: %s)", te.Hint)
	}
	for i, is := range te.Issues {
		if i == 16 {
			fmt.Fprintf(&b, "\n  … %d more issues", len(te.Issues)-16)
			break
		}
		fmt.Fprintf(&b, "\n  %s %s: %s", is.Pointer, is.Code, is.Message)
	}
	if len(te.Issues) > 64 {
		te.Issues = te.Issues[:64]
	}
	switch {
	case te.OutcomeUnknown:
		fmt.Fprintf(&b, "\nWhether the relay stored event %s is unknown (the request may have reached it before the answer was lost): read_events or voice shows whether it is there; do not post the same thing again before checking.", te.EventID)
	case te.Posted:
		b.WriteString("\n(the event was signed but the relay did not store it)")
	default:
		b.WriteString("\nNothing was posted.")
	}
	sc, _ := json.Marshal(te)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
		StructuredContent: json.RawMessage(sc)}
}

// ---- identities --------------------------------------------------------------

// author returns the attributed.Author of an identity, reading the key
// registry again when the id is unknown (at most every 10 s).
func (s *mcpServer) author(ctx context.Context, identityID string) attributed.Author {
	s.mu.Lock()
	id, ok := s.names[identityID]
	stale := s.now().Sub(s.namesAt) > 10*time.Second
	s.mu.Unlock()
	if !ok && stale {
		ids, _, err := s.c.Identities(ctx)
		if err != nil {
			s.log.Debug("read identities", "err", err)
		} else {
			s.mu.Lock()
			s.names, s.namesAt = ids, s.now()
			id = ids[identityID]
			s.mu.Unlock()
		}
	}
	return attributed.Author{IdentityID: identityID, DisplayName: id.DisplayName}
}

func (s *mcpServer) self() string { return s.signer.Sender.IdentityID }

// ---- signing and posting ---------------------------------------------------

// signAll signs the drafts in order with consecutive session_seq values,
// each at its At, validates every event with the core (spec §2–§5) and
// spends the numbers only when all are valid. chain links each event
// after the first to the previous one (added to parents).
func (s *mcpServer) signAll(ats []client.At, drafts []client.Draft, chain bool) ([]*correspondence.Event, error) {
	var out []*correspondence.Event
	err := s.seq.take(len(drafts), func(first int64) error {
		out = out[:0]
		for i, d := range drafts {
			at := ats[i]
			if chain && i > 0 {
				at.Parents = append(append([]string{}, at.Parents...), out[i-1].ID)
			}
			if at.Parents == nil {
				at.Parents = []string{}
			}
			sess := &client.Session{Signer: s.signer, Seq: client.NewMemorySequencer(first + int64(i) - 1), Now: s.now}
			ev, err := sess.Sign(at, d)
			if err != nil {
				return err
			}
			raw, err := ev.CanonicalJSON()
			if err != nil {
				return err
			}
			if _, err := correspondence.ParseEvent(raw); err != nil {
				return err
			}
			if len(raw) > maxEventBytes {
				return &toolError{Code: wire.CodeBodyTooLarge, Message: fmt.Sprintf("the event is %d bytes; the relay takes at most %d", len(raw), maxEventBytes)}
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxEventBytes is the relay's POST body bound (spec §3).
const maxEventBytes = 65536

// post sends ev; a refusal comes back as a toolError with Posted false
// (the relay stored nothing).
func (s *mcpServer) post(ctx context.Context, ev *correspondence.Event) (*client.PostResult, error) {
	res, err := s.c.Post(ctx, ev)
	if err != nil {
		te := asToolError(err)
		s.log.Info("post refused", "kind", ev.Kind, "event_id", ev.ID, "err_code", te.Code)
		if mayHaveReached(err) {
			// The request may have been stored before the answer was lost:
			// saying "nothing was posted" would invite a second event (a
			// second claim, with a new claim_id) for the same intent.
			te.OutcomeUnknown, te.EventID = true, ev.ID
			return nil, te
		}
		return nil, err
	}
	s.log.Debug("posted", "kind", ev.Kind, "event_id", ev.ID, "received_seq", res.Record.Receipt.ReceivedSeq)
	if cf, ok := ev.Claim(); ok {
		s.mu.Lock()
		s.claims[cf.ClaimID] = ev
		s.mu.Unlock()
	}
	return res, nil
}
