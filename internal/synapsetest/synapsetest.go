// Package synapsetest starts a real Synapse homeserver for tests: Debian's
// matrix-synapse in the Debian sid root that scripts/provision_synapse.sh
// makes ($ACRELAY_SYNAPSE_ROOT), run on a free 127.0.0.1 port with a
// short config, its SQLite database and log in t.TempDir(), users made
// through the shared-secret admin API, an optional application service
// registration; stopped on cleanup. Tests skip, saying why, when the root
// is absent or this process cannot make a mount namespace (it needs root).
//
// How it runs: `unshare --mount` gives Synapse a private mount namespace
// in which the test's directory is bind-mounted at /srv/acrelay of the
// root, then `chroot` into the root executes python3 in place, so the
// process the test started is Synapse itself (SIGTERM stops it, Wait
// sees it end). The bind mount dies with the namespace whatever happens:
// nothing is left mounted and nothing is written into the cached root,
// which any number of tests share read-only. Synapse needs neither /proc
// nor /dev there. It shares the host's network namespace, so it reaches
// an application service on 127.0.0.1 and tests reach it.
package synapsetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/synapseadmin"

	"github.com/acrelay/acrelay/internal/hstest"
)

// Version is the Synapse version the provisioning script asks for; the
// root may hold the version sid had when it was made (Server.Version).
const Version = "1.160.0"

// mountPoint is where the test's directory appears inside the root (the
// provisioning script creates it).
const mountPoint = "/srv/acrelay"

// Root is the Debian sid root with Synapse: $ACRELAY_SYNAPSE_ROOT, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/synapse-sid-1.160.0.
func Root() string {
	if d := os.Getenv("ACRELAY_SYNAPSE_ROOT"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "acrelay", "synapse-sid-"+Version)
}

var (
	nsOnce sync.Once
	nsErr  error
)

// Available reports whether root is a complete Synapse root (the marker
// the provisioning script writes last) and this process can run it (it
// may make a mount namespace and chroot: root).
func Available(root string) error {
	if _, err := os.Stat(filepath.Join(root, ".acrelay-synapse-version")); err != nil {
		return fmt.Errorf("no Synapse root at %s", root)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/lib/python3/dist-packages/synapse")); err != nil {
		return fmt.Errorf("no Synapse in the root at %s", root)
	}
	nsOnce.Do(func() {
		if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
			nsErr = fmt.Errorf("cannot make a mount namespace to run Synapse (needs root): %v: %s", err, strings.TrimSpace(string(out)))
		}
	})
	return nsErr
}

// Server is one running Synapse.
type Server struct {
	URL        string // http://127.0.0.1:PORT
	ServerName string
	// Secret is the registration_shared_secret of the admin API.
	Secret string
	root   string
	dir    string
	addr   string
	cmd    *exec.Cmd
	done   chan struct{}
	t      testing.TB
}

var _ hstest.Homeserver = (*Server)(nil)

// Start starts Synapse, or skips the test when it is not available.
func Start(t testing.TB, opt hstest.Options) *Server {
	t.Helper()
	root := Root()
	if err := Available(root); err != nil {
		t.Skipf("%v (scripts/test.sh provisions it: scripts/provision_synapse.sh, ACRELAY_SYNAPSE_ROOT)", err)
	}
	s, err := Launch(root, t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() { // Synapse's warnings and errors (its 500s come with a traceback)
			l := s.Log()
			t.Logf("Synapse's log (last 8000 bytes):\n%s", l[max(0, len(l)-8000):])
		}
	})
	return s
}

// Launch starts Synapse from root with its config, signing key, SQLite
// database, media and log in dir, on a free loopback port; for tools,
// where tests use Start. The caller stops it with Stop.
func Launch(root, dir string, opt hstest.Options) (*Server, error) {
	s := &Server{ServerName: hstest.ServerName, root: root, dir: dir, Secret: randomHex(24)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.addr = l.Addr().String()
	l.Close()
	s.URL = "http://" + s.addr
	port := s.addr[strings.LastIndexByte(s.addr, ':')+1:]
	// The signing key in Synapse's format: "ed25519 <key id> <seed,
	// unpadded base64>" (written here: asking python for it costs a
	// second start of the interpreter).
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key := "ed25519 a_test " + base64.RawStdEncoding.EncodeToString(priv.Seed()) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "signing.key"), []byte(key), 0o600); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	var as string
	if opt.AppserviceYAML != "" {
		if err := os.WriteFile(filepath.Join(dir, "appservice.yaml"), []byte(opt.AppserviceYAML), 0o600); err != nil {
			return nil, err
		}
		as = "app_service_config_files: [" + mountPoint + "/appservice.yaml]\n"
	}
	// Rate limits out of the way (the tests send bursts from one user);
	// no federation in or out, no key servers, no phoning home. The two
	// experimental features push an application service's to-device
	// traffic, device-list changes and one-time-key counts in its
	// transactions (MSC2409, MSC3202) to a registration that asks for them
	// (receive_ephemeral, org.matrix.msc3202): Synapse refuses /sync to an
	// application service's sender, so this is how its device gets room
	// keys (docs/matrix.md "Encrypted rooms").
	const many = "{per_second: 10000, burst_count: 100000}"
	cfg := fmt.Sprintf(`server_name: %[1]s
public_baseurl: %[2]s/
pid_file: %[3]s/homeserver.pid
listeners:
  - port: %[4]s
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: %[3]s/homeserver.db
media_store_path: %[3]s/media
signing_key_path: %[3]s/signing.key
log_config: %[3]s/log.yaml
registration_shared_secret: %[5]q
enable_registration: false
bcrypt_rounds: 4
report_stats: false
enable_metrics: false
url_preview_enabled: false
suppress_key_server_warning: true
trusted_key_servers: []
federation_domain_whitelist: []
federation_sender_instances: []
presence:
  enabled: false
rc_message: %[6]s
rc_registration: %[6]s
rc_room_creation: %[6]s
rc_admin_redaction: %[6]s
rc_key_requests: %[6]s
rc_3pid_validation: %[6]s
rc_presence:
  per_user: %[6]s
rc_login:
  address: %[6]s
  account: %[6]s
  failed_attempts: %[6]s
rc_joins:
  local: %[6]s
  remote: %[6]s
rc_joins_per_room: %[6]s
rc_invites:
  per_room: %[6]s
  per_user: %[6]s
  per_issuer: %[6]s
rc_delayed_event_mgmt: %[6]s
rc_reports: %[6]s
rc_media_create: %[6]s
experimental_features:
  msc2409_to_device_messages_enabled: true
  msc3202_transaction_extensions: true
%[7]s`, s.ServerName, s.URL, mountPoint, port, s.Secret, many, as)
	if err := os.WriteFile(filepath.Join(dir, "homeserver.yaml"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	const logCfg = `version: 1
formatters:
  precise:
    format: '%(asctime)s %(name)s %(levelname)s %(message)s'
handlers:
  console:
    class: logging.StreamHandler
    formatter: precise
root:
  level: WARNING
  handlers: [console]
disable_existing_loggers: false
`
	if err := os.WriteFile(filepath.Join(dir, "log.yaml"), []byte(logCfg), 0o600); err != nil {
		return nil, err
	}
	if err := s.Resume(); err != nil {
		return nil, err
	}
	return s, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Resume starts a stopped Synapse again on the same port and database
// (Launch and Start start it the first time).
func (s *Server) Resume() error {
	if s.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "synapse.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// unshare makes the mount namespace and executes sh, which mounts
	// and executes chroot, which executes python3: one process, Synapse.
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-euc",
		`mount --bind "$1" "$2`+mountPoint+`" && exec chroot "$2" /usr/bin/python3 -m synapse.app.homeserver -c `+mountPoint+`/homeserver.yaml`,
		"sh", s.dir, s.root)
	cmd.Dir, cmd.Stdout, cmd.Stderr = "/", log, log
	// Its own environment: nothing of the test's.
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=" + mountPoint, "TMPDIR=" + mountPoint + "/tmp"}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start synapse: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	// A cold start on a loaded machine (schema creation on SQLite) takes
	// several seconds.
	deadline := time.Now().Add(90 * time.Second)
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
			return fmt.Errorf("synapse exited: %s", s.Log())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return errors.New("synapse did not answer /_matrix/client/versions in 90s: " + s.Log())
		}
	}
}

// Stop stops Synapse with SIGTERM (SIGKILL after 15 s).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Restart stops and starts Synapse on the same port and database
// (servers of Start only).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.Resume(); err != nil {
		s.t.Fatal(err)
	}
}

// Log returns Synapse's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "synapse.log"))
	return string(b)
}

// Version is the matrix-synapse package's version in the root, e.g.
// "1.160.0-1".
func (s *Server) Version() string {
	b, _ := os.ReadFile(filepath.Join(s.root, ".acrelay-synapse-version"))
	return strings.TrimSpace(string(b))
}

// Name is "Synapse " and the package's version.
func (s *Server) Name() string { return "Synapse " + s.Version() }

// HomeserverURL is s.URL.
func (s *Server) HomeserverURL() string { return s.URL }

// Password is the password NewUser and CreateUser give localpart:
// "password-" + localpart.
func (s *Server) Password(localpart string) string { return "password-" + localpart }

// UserID is the full id of localpart on this server.
func (s *Server) UserID(localpart string) id.UserID {
	return id.NewUserID(localpart, s.ServerName)
}

// CreateUser creates a user (the shared-secret admin API; an existing
// one logs in) and returns a client of that user (servers of Start only).
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

// NewUser registers localpart through /_synapse/admin/v1/register with
// the shared secret (not an admin) and returns a client of that user on
// the device the registration made; a user that exists already logs in
// with its password on a new device.
func (s *Server) NewUser(ctx context.Context, localpart string) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(s.URL, "", "")
	if err != nil {
		return nil, err
	}
	admin := synapseadmin.Client{Client: cli}
	resp, err := admin.SharedSecretRegister(ctx, s.Secret, synapseadmin.ReqSharedSecretRegister{Username: localpart, Password: s.Password(localpart)})
	switch {
	case err == nil:
		cli.UserID, cli.AccessToken, cli.DeviceID = resp.UserID, resp.AccessToken, resp.DeviceID
		return cli, nil
	case errors.Is(err, mautrix.MUserInUse):
		if _, err := cli.Login(ctx, &mautrix.ReqLogin{Type: mautrix.AuthTypePassword,
			Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: localpart}, Password: s.Password(localpart), StoreCredentials: true}); err != nil {
			return nil, fmt.Errorf("login %s: %w", localpart, err)
		}
		return cli, nil
	default:
		return nil, fmt.Errorf("register %s: %w", localpart, err)
	}
}
