package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// TestUIViewErrorStatus: the web view answers an error with the status
// and code the JSON API gives it (toAPIError over wire's table), as an
// HTML page, where it once made every error but a 404 a 503.
func TestUIViewErrorStatus(t *testing.T) {
	u := newUI(&Server{log: slog.New(slog.DiscardHandler)})
	tests := []struct {
		name    string
		err     error
		status  int
		code    string
		message string
		header  [2]string
	}{
		{"not found", fmt.Errorf("x: %w", store.ErrNotFound), 404, "not_found", "No such project.", [2]string{}},
		{"store unavailable", store.ErrUnavailable, 503, "unavailable", "The relay cannot read this project right now; try again.", [2]string{"Retry-After", "1"}},
		{"scope", errScopeRead, 403, "scope_insufficient", "this request needs the read scope", [2]string{}},
		{"token refused", errTokenRejected, 401, "unauthorized", "a valid bearer token is required", [2]string{"WWW-Authenticate", `Bearer realm="acrelay"`}},
		{"client gone", context.Canceled, 503, "request_cancelled", "the request ended before it could be answered", [2]string{"Retry-After", "1"}},
		{"our fault", errors.New("boom"), 500, "internal_error", "internal error", [2]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			u.viewError(w, httptest.NewRequest("GET", "/ui/projects/p", nil), tc.err)
			body := w.Body.String()
			if w.Code != tc.status || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
				t.Fatalf("%d %s", w.Code, w.Header().Get("Content-Type"))
			}
			for _, want := range []string{fmt.Sprintf("<h2>%d ", tc.status), "<code>" + tc.code + "</code>", "<p>" + tc.message + "</p>"} {
				if !strings.Contains(body, want) {
					t.Errorf("page lacks %q:\n%s", want, body)
				}
			}
			if tc.header[0] != "" && w.Header().Get(tc.header[0]) != tc.header[1] {
				t.Errorf("%s: %q", tc.header[0], w.Header().Get(tc.header[0]))
			}
		})
	}
}
