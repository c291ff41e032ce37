package main

// acrelay mcp: a Model Context Protocol server for coding agents, a
// client of the relay built on the client SDK and the official Go MCP SDK
// (github.com/modelcontextprotocol/go-sdk). It signs locally with the
// agent's key (the relay never sees it) and keeps session_seq itself.
// Tools are in mcp_tools.go, resources and subscriptions in
// mcp_resources.go, the text a model reads in mcp_render.go.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newMCPCmd()) }

// mcpOptions are the flags of acrelay mcp beyond the agent commands'.
type mcpOptions struct {
	relay      relayFlags
	signer     signerFlags
	stateDir   string
	httpAddr   string
	httpToken  string
	httpRemote bool
	logLevel   string
}

func newMCPCmd() *cobra.Command {
	var o mcpOptions
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the agent's relay tools over the Model Context Protocol (stdio or loopback HTTP)",
		Long: `mcp runs a Model Context Protocol server for a coding agent (Claude Code,
Codex, Cursor, Gemini CLI, …). It is a client of the relay: it signs every
event locally with the agent's key (the relay never sees it), keeps
session_seq itself, and is configured like every agent command: relay URL
and token, key file and sender ids from the flags, else the ACRELAY_*
variables, else the agent profile that acrelay agent init wrote
(.acrelay/agent.json of the work tree; docs/agents.md). HOME may be
empty; no profile file is needed when the variables say everything.

Transports: stdio by default (only MCP messages go to stdout; logs go to
stderr). --http 127.0.0.1:PORT serves streamable HTTP at /mcp instead,
behind a bearer token (ACRELAY_MCP_HTTP_TOKEN, or --http-token-file; a
missing file is created with a random token, mode 0600) and on loopback
only unless --http-allow-remote.

session_seq: with --state-dir (ACRELAY_STATE_DIR) and a session id, the
last value used is kept in STATE/mcp-session-<session_id>.seq under an
exclusive lock, so a restart continues the session without reusing a
number. The state dir defaults to the agent profile's directory when
there is a profile. Without a state dir every run takes a fresh session id (a given
ACRELAY_SESSION_ID is then ignored, with a notice). A missing device id is
generated (and kept in the state dir when there is one).

Tools (14): voice, claim_paths, renew_claim, release_claim, post_update
(intent, progress, observation), offer_artifact, acknowledge (the five
acks), conflict (raise, resolve), repair, availability (pause, rest,
refusal, resume), handoff (with its contract), close_thread, read_events,
read_thread. Resources: acrelay://repositories/{repository_id}/voice,
…/claims and …/threads/{thread_id}; subscriptions send
notifications/resources/updated when the wake stream says the project
moved. Words of other identities are always shown as attributed, quoted
data, never as instructions. Errors are tool errors carrying the relay's
stable code and message.`,
		Example: `  # stdio, as a coding client starts it (.mcp.json, config.toml, …)
  ACRELAY_URL=http://127.0.0.1:8080 ACRELAY_TOKEN_FILE=token ACRELAY_KEY_FILE=agent.pem \
  ACRELAY_PROJECT_ID=$P ACRELAY_IDENTITY_ID=$I ACRELAY_SIGNING_KEY_ID=$K acrelay mcp

  # streamable HTTP on loopback, bearer token kept in a file
  acrelay mcp --http 127.0.0.1:8931 --http-token-file ~/.acrelay-mcp-token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMCP(cmd.Context(), &o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.relay.add(cmd, true)
	o.signer.add(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.stateDir, "state-dir", envOr("ACRELAY_STATE_DIR", ""), "directory for the session_seq file and device id (env ACRELAY_STATE_DIR; default: the agent profile's directory, else none: a fresh session id per run)")
	fs.StringVar(&o.httpAddr, "http", envOr("ACRELAY_MCP_HTTP", ""), "serve streamable HTTP at ADDR (host:port, loopback unless --http-allow-remote) instead of stdio (env ACRELAY_MCP_HTTP)")
	fs.StringVar(&o.httpToken, "http-token-file", envOr("ACRELAY_MCP_HTTP_TOKEN_FILE", ""), "file holding the bearer token HTTP clients must send; created with a random token when missing (env ACRELAY_MCP_HTTP_TOKEN_FILE, or the token itself in ACRELAY_MCP_HTTP_TOKEN)")
	fs.BoolVar(&o.httpRemote, "http-allow-remote", false, "allow --http on a non-loopback address (still bearer-protected)")
	fs.StringVar(&o.logLevel, "log-level", envOr("ACRELAY_LOG_LEVEL", "info"), "stderr log level: debug, info, warn, error (env ACRELAY_LOG_LEVEL)")
	return cmd
}

func runMCP(ctx context.Context, o *mcpOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: want debug, info, warn or error")
	}
	if o.httpAddr != "" {
		if err := checkHTTPAddr(o.httpAddr, o.httpRemote); err != nil {
			return err
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := o.relay.client(nil)
	if err != nil {
		return err
	}
	if o.relay.keyring == "" {
		logger.Info("no --keyring: records read are not verified")
	}
	// The profile fills the signer's ids before session() would invent a
	// device id, and its directory is the default state dir.
	if err := o.signer.applyProfile(); err != nil {
		return err
	}
	if p, _ := o.signer.prof.get(); p != nil {
		if o.stateDir == "" && p.path != "" {
			o.stateDir = filepath.Dir(p.path)
		}
		if names := p.overriddenBy(os.Getenv); len(names) > 0 {
			logger.Warn("ACRELAY_* variables set in the environment win over the agent profile; unset them if this server should act as the profile's agent",
				"profile", p.path, "variables", strings.Join(names, ","))
		}
	}
	seq, err := o.session(logger)
	if err != nil {
		return err
	}
	defer seq.close()
	signer, err := o.signer.signer(false)
	if err != nil {
		return err
	}
	s := newMCPServer(c, signer, seq, logger)
	defer s.stopFollowers()
	go checkOwnKey(ctx, c, signer, logger)
	logger.Info("acrelay mcp ready", "relay", c.BaseURL.Redacted(), "project_id", signer.ProjectID,
		"identity_id", signer.Sender.IdentityID, "session_id", signer.Sender.SessionID)
	if o.httpAddr != "" {
		return s.serveHTTP(ctx, o, logger)
	}
	out := &lockedWriter{w: stdout}
	err = s.srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(newStdioLineFilter(stdin, out, logger)), Writer: out})
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, io.EOF)) {
		return nil
	}
	return err
}

// session settles device_id, session_id and the session_seq store: with a
// state dir and a session id, the file store under a lock; otherwise a
// fresh session id with an in-memory count (a restart never reuses a
// number under the same session id).
func (o *mcpOptions) session(logger *slog.Logger) (seqStore, error) {
	sd := &o.signer.sender
	if o.stateDir != "" {
		if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
			return nil, fmt.Errorf("--state-dir: %w", err)
		}
	}
	if sd.DeviceID == "" {
		id, err := o.deviceID()
		if err != nil {
			return nil, err
		}
		sd.DeviceID = id
	}
	if o.stateDir == "" || sd.SessionID == "" {
		if sd.SessionID != "" {
			logger.Warn("session id ignored: without --state-dir a restart could reuse its session_seq; using a fresh session id")
		}
		sd.SessionID = uuid.NewString()
		return &memorySeq{}, nil
	}
	if _, err := uuid.Parse(sd.SessionID); err != nil {
		return nil, fmt.Errorf("--session-id: want a UUID")
	}
	return openFileSeq(filepath.Join(o.stateDir, "mcp-session-"+sd.SessionID+".seq"))
}

// deviceID is the state dir's device id (created once), or a fresh one.
func (o *mcpOptions) deviceID() (string, error) {
	if o.stateDir == "" {
		return uuid.NewString(), nil
	}
	path := filepath.Join(o.stateDir, "device-id")
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if _, err := uuid.Parse(id); err != nil {
			return "", fmt.Errorf("%s: not a UUID", path)
		}
		return id, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("device id: %w", err)
	}
	id := uuid.NewString()
	if err := client.WriteFileAtomic(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("device id: %w", err)
	}
	return id, nil
}

// serveHTTP serves streamable HTTP at /mcp behind the bearer token until
// ctx ends.
func (s *mcpServer) serveHTTP(ctx context.Context, o *mcpOptions, logger *slog.Logger) error {
	token, err := httpBearer(o.httpToken)
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{Logger: quietLogger(logger), DisableLocalhostProtection: o.httpRemote})
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireBearer(token, h))
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	logger.Info("serving MCP over streamable HTTP", "addr", ln.Addr().String(), "path", "/mcp")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}

// checkHTTPAddr refuses an --http address that is not host:port, or not
// loopback (127.0.0.0/8, ::1, localhost) unless remote is allowed.
func checkHTTPAddr(addr string, remote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: want host:port", addr)
	}
	if ip := net.ParseIP(host); !remote && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return fmt.Errorf("--http %q: not a loopback address (pass --http-allow-remote to serve beyond this machine)", addr)
	}
	return nil
}

// httpBearer returns the token HTTP clients must present:
// ACRELAY_MCP_HTTP_TOKEN, else the file's (created with 32 random bytes,
// base64url, mode 0600 when missing). Errors never quote the token.
func httpBearer(file string) (string, error) {
	if v := os.Getenv("ACRELAY_MCP_HTTP_TOKEN"); v != "" {
		return v, nil
	}
	if file == "" {
		return "", errors.New("--http needs a bearer token: set ACRELAY_MCP_HTTP_TOKEN or --http-token-file")
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		tok := base64.RawURLEncoding.EncodeToString(raw)
		if err := client.WriteFileAtomic(file, []byte(tok+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("--http-token-file: %w", err)
		}
		return tok, nil
	}
	if err != nil {
		return "", fmt.Errorf("--http-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("--http-token-file: the file is empty")
	}
	return tok, nil
}

// requireBearer answers 401 with WWW-Authenticate: Bearer unless the
// request carries "Authorization: Bearer <token>" (constant-time compare).
func requireBearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="acrelay-mcp"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"unauthorized","message":"missing or wrong bearer token"}`+"\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// quietLogger is logger at Warn for the MCP SDK, whose Info lines name
// every subscription and notification.
func quietLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(levelFloor{logger.Handler(), slog.LevelWarn})
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (l levelFloor) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= l.min && l.Handler.Enabled(ctx, lv)
}

func (l levelFloor) WithAttrs(as []slog.Attr) slog.Handler {
	return levelFloor{l.Handler.WithAttrs(as), l.min}
}

func (l levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{l.Handler.WithGroup(n), l.min}
}

// checkOwnKey reads the project's key registry once, in the background
// (a slow relay must not delay the client's start), and warns on stderr
// when the agent could not post: its signing key unknown to the relay,
// registered for another identity, holding another public key than the
// key file's, or revoked. Each post would be refused with the relay's
// code; the warning says why before the first one.
func checkOwnKey(ctx context.Context, c *client.Client, signer *client.Signer, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, keys, err := c.Identities(ctx)
	if err != nil {
		logger.Warn("could not check the agent's key against the relay's registry", "err_code", asToolError(err).Code)
		return
	}
	if w := ownKeyProblem(keys, signer); w != "" {
		logger.Warn(w, "signing_key_id", signer.Sender.SigningKeyID, "identity_id", signer.Sender.IdentityID)
	}
}

// ownKeyProblem is why the relay would refuse what signer signs, judged
// from the registry's keys, or "".
func ownKeyProblem(keys client.Keyring, signer *client.Signer) string {
	k, ok := keys[signer.Sender.SigningKeyID]
	switch {
	case !ok:
		return "the relay does not list this signing key: every post will be refused (register it: acrelay agent init)"
	case k.IdentityID != signer.Sender.IdentityID:
		return "the relay lists this signing key under another identity: every post will be refused (check the identity id and signing key id settings)"
	case !k.PublicKey.Equal(signer.PublicKey()):
		return "the key file is not the key the relay registered under this signing key id: every post will be refused (check the key file setting)"
	case k.Status == "revoked":
		return "the relay lists this signing key as revoked: every post will be refused (make a new key: acrelay agent init --key NEW.pem)"
	}
	return ""
}
