package apierror_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		e       *apierror.Error
		status  int
		body    string
		headers map[string]string
	}{
		{"table row", "GET", apierror.New(wire.CodeNotFound), 404,
			`{"error":"not_found","message":"no such resource"}`, nil},
		{"401 with hint", "POST", apierror.New(wire.CodeUnauthorized), 401,
			`{"error":"unauthorized","message":"a valid bearer token is required","hint":"send Authorization: Bearer <token>"}`,
			map[string]string{"WWW-Authenticate": `Bearer realm="acrelay"`}},
		{"503 retries", "GET", apierror.New(wire.CodeUnavailable), 503,
			`{"error":"unavailable","message":"the relay's store is unavailable","hint":"retry later"}`,
			map[string]string{"Retry-After": "1"}},
		{"own Retry-After", "POST", apierror.New(wire.CodeHubHostVerificationsLimit).WithRetryAfter("7"), 409,
			`{"error":"hub_host_verifications_limit","message":"the callback's host has as many verifications of intent waiting as this hub allows; retry after Retry-After seconds"}`,
			map[string]string{"Retry-After": "7"}},
		{"said and hinted", "GET", apierror.New(wire.CodeAfterInvalid).Say("after must be x").WithHint("h"), 400,
			`{"error":"after_invalid","message":"after must be x","hint":"h"}`, nil},
		{"issues", "POST", apierror.New(wire.CodeContractInvalid).WithIssues([]map[string]string{{"pointer": "/a"}}), 422,
			`{"error":"contract_invalid","message":"the contract violates the handoff contract schema","issues":[{"pointer":"/a"}]}`, nil},
		{"empty issues left out", "POST", apierror.New(wire.CodeContractInvalid).WithIssues([]string{}), 422,
			`{"error":"contract_invalid","message":"the contract violates the handoff contract schema"}`, nil},
		{"HEAD has no body", "HEAD", apierror.New(wire.CodeNotFound), 404, ``, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			apierror.Write(w, httptest.NewRequest(tc.method, "/x", nil), tc.e)
			if w.Code != tc.status || w.Body.String() != tc.body {
				t.Fatalf("%d %s, want %d %s", w.Code, w.Body, tc.status, tc.body)
			}
			h := w.Header()
			if h.Get("Content-Type") != wire.ContentTypeJSON || h.Get("X-Content-Type-Options") != "nosniff" ||
				h.Get("Content-Length") != fmt.Sprint(len(tc.e.Body())) {
				t.Fatalf("headers %v", h)
			}
			for k, v := range tc.headers {
				if h.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, h.Get(k), v)
				}
			}
			if _, ok := tc.headers["Retry-After"]; !ok && h.Get("Retry-After") != "" {
				t.Errorf("Retry-After %q on a %d", h.Get("Retry-After"), tc.status)
			}
			if _, ok := tc.headers["WWW-Authenticate"]; !ok && h.Get("WWW-Authenticate") != "" {
				t.Errorf("WWW-Authenticate on a %d", tc.status)
			}
		})
	}
}

func TestWriteHTML(t *testing.T) {
	w := httptest.NewRecorder()
	apierror.WriteHTML(w, httptest.NewRequest("GET", "/ui", nil), apierror.New(wire.CodeUnavailable), []byte("<p>later</p>"))
	h := w.Header()
	if w.Code != 503 || w.Body.String() != "<p>later</p>" || h.Get("Content-Type") != "text/html; charset=utf-8" ||
		h.Get("Retry-After") != "1" || h.Get("Cache-Control") != "no-store" || h.Get("Content-Length") != "12" {
		t.Fatalf("%d %q %v", w.Code, w.Body, h)
	}
}

func TestFrom(t *testing.T) {
	own := apierror.New(wire.CodeLogEmpty)
	tests := []struct {
		name string
		err  error
		code string
		ok   bool
	}{
		{"an Error in the chain", fmt.Errorf("read: %w", own), wire.CodeLogEmpty, true},
		{"cancelled", fmt.Errorf("x: %w", context.Canceled), wire.CodeRequestCancelled, true},
		{"deadline", context.DeadlineExceeded, wire.CodeRequestCancelled, true},
		{"store unavailable", fmt.Errorf("x: %w", store.ErrUnavailable), wire.CodeUnavailable, true},
		{"not found", store.ErrNotFound, wire.CodeNotFound, true},
		{"unknown", errors.New("boom"), wire.CodeInternalError, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := apierror.From(tc.err)
			if e.Code != tc.code || ok != tc.ok || e.Status != wire.ErrorStatus(tc.code) {
				t.Fatalf("From = %+v, %v; want %s, %v", e, ok, tc.code, tc.ok)
			}
		})
	}
}

func TestNewPanicsOnUnknownCode(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted a code the table does not hold")
		}
	}()
	apierror.New("no_such_code")
}

func TestLowerAndInput(t *testing.T) {
	if e := apierror.Lower("invalid_json", 500); e.Status != 400 || e.Message != "the JSON is outside the strict profile" {
		t.Fatalf("Lower(invalid_json) = %+v", e)
	}
	if e := apierror.Lower("not_in_table", 409); e.Status != 409 || e.Code != "not_in_table" {
		t.Fatalf("Lower(not_in_table) = %+v", e)
	}
	// A registry input error is 400 whatever the code's status elsewhere.
	if e := apierror.Input(wire.CodeIdentityNotActive, "keys can be added only to an active identity"); e.Status != http.StatusBadRequest {
		t.Fatalf("Input = %+v", e)
	}
}
