// Package deploy_test runs the files under deploy/ as an operator would:
// the container image (podman), the compose file (podman-compose), the
// systemd unit (systemd-analyze verify, and its ExecStart line). Each test
// skips, saying exactly why, when this machine lacks the tool or cannot
// run it; scripts/test.sh provisions the tools (scripts/provision_podman.sh).
// The Kubernetes manifests are validated by their own module,
// deploy/kubernetes/validate.
package deploy_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/google/uuid"
)

// repoRoot is the repository (the parent of deploy/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// freePort returns a port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitHealthy polls base+"/healthz" until it answers 200 "ok", or fails
// the test after timeout with what logs returns.
func waitHealthy(t *testing.T, base string, timeout time.Duration, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 200 && strings.TrimSpace(string(b)) == "ok" {
				return
			}
			last = res.Status + " " + string(b)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s/healthz not healthy after %s (last: %s)\n%s", base, timeout, last, logs())
}

// adminJSON sends an operator or admin request and decodes the answer,
// failing unless the status is want.
func adminJSON(t *testing.T, method, url, token string, in any, want int) map[string]any {
	t.Helper()
	b, _ := json.Marshal(in)
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, res.StatusCode, body, want)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s %s: %v in %s", method, url, err, body)
	}
	return m
}

// posted is what postEvent stored: the repository, the project token that
// reads it, and the exact bytes of the replay page after the append.
type posted struct {
	repository string
	token      string
	eventID    string
	page       []byte
}

// postEvent makes a project through the operator token, registers an
// identity and key with the project's admin token, posts one signed
// intent and checks it is received_seq 1; it returns the replay page as
// read right after, byte for byte.
func postEvent(t *testing.T, base, operatorToken string) posted {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	project := adminJSON(t, "POST", base+"/v1/admin/projects", operatorToken, map[string]any{}, 201)["project_id"].(string)
	tok := adminJSON(t, "POST", base+"/v1/admin/projects/"+project+"/tokens", operatorToken,
		map[string]any{"scopes": []string{"read", "append", "admin"}}, 201)["token"].(string)
	c, err := client.New(base, tok)
	if err != nil {
		t.Fatal(err)
	}
	ident, err := c.CreateIdentity(ctx, project, "", "deploy-test")
	if err != nil {
		t.Fatal(err)
	}
	priv, err := client.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	key, err := c.AddKey(ctx, ident.IdentityID, "", pub)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := client.NewSigner(priv, project, correspondence.Sender{
		IdentityID: ident.IdentityID, SigningKeyID: key.SigningKeyID,
		DeviceID: uuid.NewString(), SessionID: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	sess := client.NewSession(signer, &client.MemorySequencer{})
	at := client.At{RepositoryID: "repo:deploy", ThreadID: "task:restart",
		Scope: correspondence.Scope{Paths: []string{"deploy"}}, Parents: []string{}}
	ev, err := sess.Sign(at, client.Intent("survive a restart"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Post(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Record.Receipt.ReceivedSeq != 1 {
		t.Fatalf("post: created=%v received_seq=%d, want true 1", res.Created, res.Record.Receipt.ReceivedSeq)
	}
	p := posted{repository: at.RepositoryID, token: tok, eventID: ev.ID}
	p.page = readPage(t, base, p)
	if !bytes.Contains(p.page, []byte(`"`+ev.ID+`"`)) {
		t.Fatalf("replay does not hold %s: %s", ev.ID, p.page)
	}
	return p
}

// readPage is GET /v1/correspondence/events of p's repository, the body's
// exact bytes (200 expected).
func readPage(t *testing.T, base string, p posted) []byte {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/v1/correspondence/events?repository_id="+p.repository, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET events: %d %s", res.StatusCode, b)
	}
	return b
}

// readBack checks that the relay at base serves p's page unchanged.
func readBack(t *testing.T, base string, p posted) {
	t.Helper()
	if got := readPage(t, base, p); !bytes.Equal(got, p.page) {
		t.Fatalf("after the restart the replay changed:\n got %s\nwant %s", got, p.page)
	}
}

// randomToken is an operator token for a test relay.
func randomToken() string {
	return "deploy-test-" + strings.ReplaceAll(uuid.NewString(), "-", "")
}
