// Package apierror is the one writer of the relay's error answers, used by
// relay (the JSON API and the web view) and hub (POST /websub/hub).
//
// An *Error is a row of wire's error table (wire.LookupError): New takes
// the status, message and hint from the table, so no caller chooses a
// status; Say and WithHint give a more precise message or hint for one
// answer. Write ends a request with the JSON body of spec §9 (wire.Error:
// {"error", "message", "hint"?, "issues"?}); WriteHTML ends it with a page
// the web view rendered for the same Error. Both set the same status and
// headers: WWW-Authenticate on 401, Retry-After on 503 (or the Error's
// own), X-Content-Type-Options: nosniff and Content-Length.
//
// From maps the errors below the HTTP layer that every handler shares
// (context ends, store.ErrNotFound, store.ErrUnavailable); anything it
// does not know is the caller's to log once and answer 500 internal_error.
package apierror

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Error is one error answer: its HTTP status, stable code (wire.Code*),
// fixed English message and hint (never quoting input, secrets or another
// project's data), and, for an invalid event or contract, its issues.
// Errors are shared values: the methods return changed copies.
type Error struct {
	Status  int
	Code    string
	Message string
	Hint    string
	// Issues is marshalled into the body's "issues" member, left out when
	// nil or empty (correspondence.Issue, handoff.Issue lists).
	Issues any
	// RetryAfter, when set, is the Retry-After value in seconds (a 409 of
	// the hub's pending-verifications cap); a 503 without it says "1".
	RetryAfter string
}

func (e *Error) Error() string { return e.Code }

// New returns the answer of code with the table's status, message and
// hint. It panics on a code the table does not hold: codes are constants,
// and the package-level errors built with New fail at start-up (and in
// every test) rather than answer an undocumented code.
func New(code string) *Error {
	row, ok := wire.LookupError(code)
	if !ok {
		panic("apierror: code " + strconv.Quote(code) + " is not in wire's error table")
	}
	return &Error{Status: row.Status, Code: row.Code, Message: row.Message, Hint: row.Hint}
}

// Lower returns the answer of a code a lower package chose (a
// canonicaljson reason, a correspondence validation code, a handoff
// transition code, an ingest refusal): the table's row, or, for a code the
// table lacks (which TestEveryCodeUsedIsInTheTable rules out), status with
// the code alone.
func Lower(code string, status int) *Error {
	if row, ok := wire.LookupError(code); ok {
		return &Error{Status: row.Status, Code: row.Code, Message: row.Message, Hint: row.Hint}
	}
	return &Error{Status: status, Code: code, Message: code}
}

// Input is a 400 with code and message for an input error whose code and
// message come from a lower package (registry.InputError): 400 whatever
// the code's status in the table, since the input is what is wrong.
func Input(code, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: message}
}

// Say returns a copy of e with message m.
func (e *Error) Say(m string) *Error {
	c := *e
	c.Message = m
	return &c
}

// WithHint returns a copy of e with hint h ("" drops the table's hint).
func (e *Error) WithHint(h string) *Error {
	c := *e
	c.Hint = h
	return &c
}

// WithIssues returns a copy of e carrying issues.
func (e *Error) WithIssues(issues any) *Error {
	c := *e
	c.Issues = issues
	return &c
}

// WithRetryAfter returns a copy of e answered with Retry-After: seconds.
func (e *Error) WithRetryAfter(seconds string) *Error {
	c := *e
	c.RetryAfter = seconds
	return &c
}

// The answers From gives.
var (
	errRequestCancelled = New(wire.CodeRequestCancelled)
	errUnavailable      = New(wire.CodeUnavailable)
	errNotFound         = New(wire.CodeNotFound)
	// Internal is 500 internal_error, the answer to an error nobody
	// mapped (logged once by the caller).
	Internal = New(wire.CodeInternalError)
)

// From maps err to its answer: an *Error in its chain as it is; a context
// that ended to 503 request_cancelled; store.ErrUnavailable to 503
// unavailable; store.ErrNotFound to 404 not_found. ok is false for any
// other error: the caller logs it and answers Internal.
func From(err error) (e *Error, ok bool) {
	if errors.As(err, &e) {
		return e, true
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errRequestCancelled, true
	case errors.Is(err, store.ErrUnavailable):
		return errUnavailable, true
	case errors.Is(err, store.ErrNotFound):
		return errNotFound, true
	}
	return Internal, false
}

// SetHeaders sets the headers e's status calls for: WWW-Authenticate on
// 401 (RFC 6750 §3), Retry-After on 503 ("1") or as e.RetryAfter says.
func (e *Error) SetHeaders(h http.Header) {
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="acrelay"`)
	}
	switch {
	case e.RetryAfter != "":
		h.Set("Retry-After", e.RetryAfter)
	case e.Status == http.StatusServiceUnavailable:
		h.Set("Retry-After", "1")
	}
}

// Body returns e's JSON body (wire.Error), members in declaration order.
func (e *Error) Body() []byte {
	body := wire.Error{Error: e.Code, Message: e.Message, Hint: e.Hint}
	if e.Issues != nil {
		// An empty list is left out, as omitempty left it out before.
		if b, err := json.Marshal(e.Issues, json.Deterministic(true)); err == nil && !emptyJSON(b) {
			body.Issues = b
		}
	}
	b, err := json.Marshal(body, json.Deterministic(true))
	if err != nil { // strings and a valid jsontext.Value: cannot fail
		return []byte(`{"error":"internal_error","message":"internal error"}`)
	}
	return b
}

// Write ends a request with e as JSON (wire.ContentTypeJSON), the body
// left out on HEAD.
func Write(w http.ResponseWriter, r *http.Request, e *Error) {
	write(w, r, e, wire.ContentTypeJSON, e.Body())
}

// WriteHTML ends a request with page, the web view's rendering of e, as
// text/html with e's status and headers; Cache-Control is no-store unless
// set.
func WriteHTML(w http.ResponseWriter, r *http.Request, e *Error, page []byte) {
	if w.Header().Get("Cache-Control") == "" {
		w.Header().Set("Cache-Control", "no-store")
	}
	write(w, r, e, "text/html; charset=utf-8", page)
}

func write(w http.ResponseWriter, r *http.Request, e *Error, contentType string, b []byte) {
	h := w.Header()
	e.SetHeaders(h)
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func emptyJSON(b []byte) bool {
	switch string(b) {
	case "[]", "{}", "null", `""`:
		return true
	}
	return false
}
