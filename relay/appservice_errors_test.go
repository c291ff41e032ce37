package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/relay"
)

// refusingSink refuses every transaction, as a store that is down would.
type refusingSink struct{}

func (refusingSink) Accept(context.Context, []json.RawMessage) error {
	return errors.New("store down")
}

// TestAppserviceErrors: the application-service listener answers Matrix
// errcodes with the status and message of wire's error table, as
// {"errcode", "error"}, byte for byte as before the table.
func TestAppserviceErrors(t *testing.T) {
	h := relay.AppserviceHandler("hs-secret", refusingSink{}, nil)
	tests := []struct {
		name, method, path, auth, body string
		status                         int
		want                           string
	}{
		{"no hs_token", "PUT", "/_matrix/app/v1/transactions/1", "", "{}", 401, `{"errcode":"M_UNAUTHORIZED","error":"missing hs_token"}`},
		{"wrong hs_token", "PUT", "/_matrix/app/v1/transactions/1", "Bearer nope", "{}", 403, `{"errcode":"M_FORBIDDEN","error":"bad hs_token"}`},
		{"not a transaction", "PUT", "/_matrix/app/v1/transactions/1", "Bearer hs-secret", "[", 400, `{"errcode":"M_NOT_JSON","error":"body is not a transaction"}`},
		{"not stored", "PUT", "/_matrix/app/v1/transactions/1", "Bearer hs-secret", `{"events":[]}`, 503, `{"errcode":"M_UNKNOWN","error":"not stored; retry"}`},
		{"user query", "GET", "/_matrix/app/v1/users/@a:b", "Bearer hs-secret", "", 404, `{"errcode":"M_NOT_FOUND","error":"not provisioned here"}`},
		{"other path", "GET", "/_matrix/app/v1/nothing", "", "", 404, `{"errcode":"M_UNRECOGNIZED","error":"unrecognized request"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			b, _ := io.ReadAll(w.Body)
			if w.Code != tc.status || string(b) != tc.want || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s (%s), want %d %s", w.Code, b, w.Header().Get("Content-Type"), tc.status, tc.want)
			}
		})
	}
}
