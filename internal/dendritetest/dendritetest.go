// Package dendritetest starts a real Dendrite homeserver (v0.13.8, built
// by scripts/provision_dendrite.sh) for tests: a short config in
// t.TempDir(), a free loopback port, users, an optional application
// service registration; stopped on cleanup. Tests skip, saying why, when
// the binaries are absent. Dendrite is never a dependency of the module.
package dendritetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/internal/hstest"
)

// Version is the Dendrite version the helper expects.
const Version = "v0.13.8"

// BinDir is where the binaries are: $ACRELAY_DENDRITE_BIN, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/dendrite-v0.13.8.
func BinDir() string {
	if d := os.Getenv("ACRELAY_DENDRITE_BIN"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "acrelay", "dendrite-"+Version)
}

// Server is one running Dendrite.
type Server struct {
	URL        string // http://127.0.0.1:PORT
	ServerName string
	dir, cfg   string
	addr       string
	bin        string
	cmd        *exec.Cmd
	done       chan struct{}
	t          testing.TB
}

// Options configure Start: AppserviceYAML, when set, is a registration
// written beside the config and listed in app_service_api.config_files.
type Options = hstest.Options

var _ hstest.Homeserver = (*Server)(nil)

// Start starts Dendrite, or skips the test when its binaries are absent.
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	bin := BinDir()
	if err := Available(bin); err != nil {
		t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
	}
	s, err := Launch(bin, t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Stop)
	return s
}

// Available reports whether the Dendrite binaries are in bin.
func Available(bin string) error {
	for _, b := range []string{"dendrite", "generate-keys", "create-account"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("dendrite %s not built at %s", Version, bin)
		}
	}
	return nil
}

// Launch starts Dendrite from the binaries in bin, with its config,
// keys, databases and log in dir, on a free loopback port; for tools
// (cmd/acrelay-bench), where tests use Start. The caller stops it with
// Stop.
func Launch(bin, dir string, opt Options) (*Server, error) {
	s := &Server{ServerName: hstest.ServerName, dir: dir, bin: bin}
	key := filepath.Join(dir, "matrix_key.pem")
	if out, err := exec.Command(filepath.Join(bin, "generate-keys"), "--private-key", key).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("generate-keys: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.addr = l.Addr().String()
	l.Close()
	s.URL = "http://" + s.addr
	var as string
	if opt.AppserviceYAML != "" {
		p := filepath.Join(dir, "appservice.yaml")
		if err := os.WriteFile(p, []byte(opt.AppserviceYAML), 0o600); err != nil {
			return nil, err
		}
		as = fmt.Sprintf("app_service_api:\n  config_files: [%q]\n", p)
	}
	db := func(c string) string { return "file:" + filepath.Join(dir, c+".db") }
	cfg := fmt.Sprintf(`version: 2
global:
  server_name: %s
  private_key: %s
  disable_federation: true
  key_validity_period: 168h0m0s
  jetstream:
    in_memory: true
    storage_path: %s
client_api:
  registration_disabled: true
  registration_shared_secret: "acrelay-test-secret"
  rate_limiting:
    enabled: false
federation_api:
  database: {connection_string: %q}
  key_perspectives: []
key_server:
  database: {connection_string: %q}
media_api:
  base_path: %s
  database: {connection_string: %q}
mscs:
  database: {connection_string: %q}
relay_api:
  database: {connection_string: %q}
room_server:
  database: {connection_string: %q}
sync_api:
  database: {connection_string: %q}
  search: {enabled: false}
user_api:
  bcrypt_cost: 4
  account_database: {connection_string: %q}
%slogging:
  - type: std
    level: warn
`, s.ServerName, key, filepath.Join(dir, "jetstream"), db("federation_api"), db("key_server"), filepath.Join(dir, "media"),
		db("media_api"), db("mscs"), db("relay_api"), db("room_server"), db("sync_api"), db("user_api"), as)
	s.cfg = filepath.Join(dir, "dendrite.yaml")
	if err := os.WriteFile(s.cfg, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if err := s.Resume(); err != nil {
		return nil, err
	}
	return s, nil
}

// Resume starts a stopped Dendrite again on the same port and databases
// (Launch and Start start it the first time).
func (s *Server) Resume() error {
	if s.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "dendrite.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(s.bin, "dendrite"), "-config", s.cfg, "-http-bind-address", s.addr)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start dendrite: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/_matrix/client/versions")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("dendrite exited: %s", s.Log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return errors.New("dendrite did not answer /_matrix/client/versions in 30s")
		}
	}
}

// Stop stops Dendrite with SIGTERM (SIGKILL after 10 s).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Restart stops and starts Dendrite on the same port and databases
// (servers of Start only).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.Resume(); err != nil {
		s.t.Fatal(err)
	}
}

// Log returns Dendrite's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "dendrite.log"))
	return string(b)
}

// CreateUser creates a user (create-account) and logs it in; it returns
// a client of that user (servers of Start only).
func (s *Server) CreateUser(localpart string) *mautrix.Client {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := s.NewUser(ctx, localpart)
	if err != nil {
		s.t.Fatal(err)
	}
	return cli
}

// NewUser creates a user (create-account; an existing one is reused) and
// logs it in; it returns a client of that user with its access token.
func (s *Server) NewUser(ctx context.Context, localpart string) (*mautrix.Client, error) {
	pw := s.Password(localpart)
	out, err := exec.CommandContext(ctx, filepath.Join(s.bin, "create-account"), "-config", s.cfg, "-url", s.URL,
		"-username", localpart, "-password", pw).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "already") {
		return nil, fmt.Errorf("create-account %s: %v: %s", localpart, err, out)
	}
	cli, err := mautrix.NewClient(s.URL, "", "")
	if err != nil {
		return nil, err
	}
	if _, err := cli.Login(ctx, &mautrix.ReqLogin{Type: mautrix.AuthTypePassword,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: localpart}, Password: pw, StoreCredentials: true}); err != nil {
		return nil, fmt.Errorf("login %s: %w", localpart, err)
	}
	return cli, nil
}

// Name is "Dendrite v0.13.8".
func (s *Server) Name() string { return "Dendrite " + Version }

// HomeserverURL is s.URL.
func (s *Server) HomeserverURL() string { return s.URL }

// Password is the password NewUser and CreateUser give localpart:
// "password-" + localpart.
func (s *Server) Password(localpart string) string { return "password-" + localpart }

// UserID is the full id of localpart on this server.
func (s *Server) UserID(localpart string) id.UserID {
	return id.NewUserID(localpart, s.ServerName)
}
