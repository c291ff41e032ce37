package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestHealthcheckURL: healthcheck takes the base URL from --url or
// ACRELAY_URL like every other command, and still takes a full /healthz
// URL (older deploy manifests).
func TestHealthcheckURL(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/relay/healthz" && r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, env string
		args      []string
		wantPath  string
		wantErr   string
	}{
		{name: "ACRELAY_URL", env: srv.URL, wantPath: "/healthz"},
		{name: "ACRELAY_URL with a path", env: srv.URL + "/relay/", wantPath: "/relay/healthz"},
		{name: "--url base", args: []string{"--url", srv.URL}, wantPath: "/healthz"},
		{name: "--url over ACRELAY_URL", env: "http://127.0.0.1:1", args: []string{"--url", srv.URL}, wantPath: "/healthz"},
		{name: "old full URL", args: []string{"--url", srv.URL + "/healthz"}, wantPath: "/healthz"},
		{name: "not 200", args: []string{"--url", srv.URL + "/other"}, wantPath: "/other/healthz", wantErr: "healthz answered 404"},
		{name: "not a URL", args: []string{"--url", "127.0.0.1:8080"}, wantErr: "want the relay's base URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ACRELAY_URL", tc.env)
			mu.Lock()
			paths = nil
			mu.Unlock()
			_, _, err := runAgent(t, newHealthcheckCmd(), "", tc.args...)
			mu.Lock()
			defer mu.Unlock()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if tc.wantPath != "" && (len(paths) != 1 || paths[0] != tc.wantPath) {
				t.Fatalf("asked for %v, want %s", paths, tc.wantPath)
			}
		})
	}
}
