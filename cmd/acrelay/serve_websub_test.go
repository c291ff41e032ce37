package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebSubLeaseFlags: the hub's lease settings are checked (each at
// least 1s, min ≤ default ≤ max) before anything starts, from flags and
// from ACRELAY_WEBSUB_*.
func TestWebSubLeaseFlags(t *testing.T) {
	never := filepath.Join(t.TempDir(), "never")
	serve := []string{"serve", "--data-dir", never, "--addr", "127.0.0.1:0", "--log-level", "error"}
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		wantErr string
	}{
		{"min above default", nil, []string{"--websub-lease-min", "300h"}, "want min ≤ default ≤ max"},
		{"default above max", nil, []string{"--websub-lease-default", "241h"}, "want min ≤ default ≤ max"},
		{"zero", nil, []string{"--websub-lease-min", "0s"}, "--websub-lease-min (ACRELAY_WEBSUB_LEASE_MIN) 0s: want at least 1s"},
		{"env max below default", []string{"ACRELAY_WEBSUB_LEASE_MAX", "1h"}, nil, "want min ≤ default ≤ max"},
		{"env not a duration", []string{"ACRELAY_WEBSUB_LEASE_DEFAULT", "10"}, nil, "ACRELAY_WEBSUB_LEASE_DEFAULT"},
		{"no concurrency", nil, []string{"--websub-concurrency", "0"}, "--websub-concurrency 0, --websub-host-limit 4: want each at least 1"},
		{"env host limit", []string{"ACRELAY_WEBSUB_HOST_LIMIT", "-1"}, nil, "--websub-concurrency 32, --websub-host-limit -1: want each at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for _, n := range []string{"ACRELAY_WEBSUB_LEASE_MIN", "ACRELAY_WEBSUB_LEASE_DEFAULT", "ACRELAY_WEBSUB_LEASE_MAX",
				"ACRELAY_WEBSUB_CONCURRENCY", "ACRELAY_WEBSUB_HOST_LIMIT"} {
				t.Setenv(n, "")
			}
			if tc.env != nil {
				t.Setenv(tc.env[0], tc.env[1])
			}
			root := newTestRoot(newServeCmd())
			root.SetArgs(append(append([]string{}, serve...), tc.args...))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if got := (serveConfig{WebSubAllowHosts: " 127.0.0.1, ,::1"}).webSubAllowHosts(); strings.Join(got, "|") != "127.0.0.1|::1" {
		t.Fatalf("allow hosts = %q", got)
	}
}

// TestHTTPCallbacksBehindHTTPSPublicURL: through the binary, a relay
// published over https refuses an http callback with 400
// hub_callback_invalid whose message names the setting that lifts it; with
// --websub-allow-http-callbacks (or its ACRELAY_ variable) the same
// subscribe is accepted (202).
func TestHTTPCallbacksBehindHTTPSPublicURL(t *testing.T) {
	bin := acrelayBinary(t)
	const op = "op-token-for-http-callbacks"
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
	}))
	t.Cleanup(callback.Close)
	for _, tc := range []struct {
		name   string
		args   []string
		env    string
		status int
		body   string
	}{
		{"refused by default", nil, "", 400, `{"error":"hub_callback_invalid","message":"hub.callback must be an https URL: this relay is published over https, and its operator has not allowed http callbacks (acrelay serve --websub-allow-http-callbacks)"}`},
		{"allowed by the flag", []string{"--websub-allow-http-callbacks"}, "", 202, ""},
		{"allowed by the environment", nil, "ACRELAY_WEBSUB_ALLOW_HTTP_CALLBACKS=true", 202, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--data-dir", t.TempDir(), "--public-url", "https://relay.example",
				"--websub-allow-hosts", "127.0.0.1"}, tc.args...)
			env := []string{"ACRELAY_OPERATOR_TOKEN=" + op, "ACRELAY_WEBSUB_ALLOW_HTTP_CALLBACKS="}
			if tc.env != "" {
				env = append(env, tc.env)
			}
			p := startRelay(t, bin, args, env...)
			status, m := httpJSON(t, "POST", p.url+"/v1/admin/projects", op, map[string]any{"visibility": "public"})
			if status != 201 {
				t.Fatalf("create project: %d %v", status, m)
			}
			form := url.Values{"hub.mode": {"subscribe"}, "hub.callback": {callback.URL + "/cb"},
				"hub.topic": {"https://relay.example/v1/correspondence/events.atom?project_id=" + m["project_id"].(string) + "&repository_id=repo"}}
			res, err := http.PostForm(p.url+"/websub/hub", form)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status || strings.TrimSpace(string(body)) != tc.body {
				t.Fatalf("subscribe: %d %s, want %d %s", res.StatusCode, body, tc.status, tc.body)
			}
		})
	}
}
