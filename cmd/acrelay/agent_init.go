package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

func init() {
	agent := &cobra.Command{
		Use:   "agent",
		Short: "Set up this agent: key, registration and the agent profile",
		Long: `agent groups the commands that prepare an agent to take part: agent init
creates its key, registers it and writes the agent profile every agent
command and acrelay mcp read.`,
		Example: `  acrelay agent init --url http://127.0.0.1:8080 --display-name parser-agent --repository-id repo:example/app`,
	}
	agent.AddCommand(newAgentInitCmd())
	rootCmd.AddCommand(agent)
}

// agentInitOptions are the inputs of agent init.
type agentInitOptions struct {
	profile        string // where to write the profile ("" = default)
	url            string
	projectID      string
	repositoryID   string
	displayName    string
	keyFile        string
	tokenFile      string
	tokenEnv       string
	adminTokenFile string
	issueToken     bool
	keyring        string
}

func newAgentInitCmd() *cobra.Command {
	var o agentInitOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the agent's key, register it with the relay and write its profile",
		Long: `init prepares this agent in one step and may be run again at any time:

  1. the key: the profile's key_file if it exists, else a new Ed25519 key
     (PKCS#8 PEM, mode 0600) written to --key (default agent.pem beside the
     profile);
  2. the registration: with an admin token (--admin-token-file or
     ACRELAY_ADMIN_TOKEN; a project token with the admin scope) it creates
     the identity and registers the public key (POST
     /v1/admin/projects/{project}/identities, POST
     /v1/admin/identities/{identity}/keys). A key the relay already knows
     is not registered twice. Without an admin token it chooses the ids
     and prints the two admin calls an operator must make;
  3. the profile (mode 0600): url, project_id, repository_id, identity_id,
     signing_key_id, device_id, key_file and the token by reference only,
     token_file or token_env, never the token itself. With --issue-token
     and an admin token, a read+append token is issued, written to the
     file "token" beside the profile (mode 0600) and named as token_file.

The profile goes to --profile (env ACRELAY_PROFILE), else to
.acrelay/agent.json at the top of the current git work tree (which is
then listed in .git/info/exclude so it is never committed), else to
$XDG_CONFIG_HOME/acrelay/agent.json. Values already in the profile are
kept unless a flag names a new one; the device id is chosen once.
Nothing secret is printed: not the token, not the key.`,
		Example: `  # an operator token with the admin scope registers the agent directly:
  ACRELAY_ADMIN_TOKEN=$(cat admin.token) acrelay agent init --url http://127.0.0.1:8080 \
    --display-name parser-agent --repository-id repo:example/app --issue-token
  # without one, init prints the two admin calls to make, then run it again:
  acrelay agent init --url http://127.0.0.1:8080 --project-id "$P" --token-file agent.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := agentInit(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSONLine(cmd.OutOrStdout(), res)
			}
			res.print(cmd.OutOrStdout())
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.profile, "profile", envOr("ACRELAY_PROFILE", ""), "profile file to write (env ACRELAY_PROFILE; default .acrelay/agent.json at the top of this git work tree, else $XDG_CONFIG_HOME/acrelay/agent.json)")
	fs.StringVar(&o.url, "url", envOr("ACRELAY_URL", ""), "relay base URL (env ACRELAY_URL; default: the profile's)")
	fs.StringVar(&o.projectID, "project-id", envOr("ACRELAY_PROJECT_ID", ""), "project UUID (env ACRELAY_PROJECT_ID; default: the profile's, else the token's project from /v1/whoami)")
	fs.StringVar(&o.repositoryID, "repository-id", envOr("ACRELAY_REPOSITORY_ID", ""), "repository id the agent works on, used by guard and inbox (env ACRELAY_REPOSITORY_ID)")
	fs.StringVar(&o.displayName, "display-name", "", "the identity's display name, shown to other agents (default: the profile's, else agent-<host>)")
	fs.StringVar(&o.keyFile, "key", "", "private key file to use or create (default: the profile's key_file, else agent.pem beside the profile)")
	fs.StringVar(&o.tokenFile, "token-file", envOr("ACRELAY_TOKEN_FILE", ""), "file holding the agent's bearer token, recorded as token_file (env ACRELAY_TOKEN_FILE)")
	fs.StringVar(&o.tokenEnv, "token-env", "", "name of the environment variable holding the agent's bearer token, recorded as token_env (default ACRELAY_TOKEN when it is set)")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", "", "file holding a token with the admin scope, to register the agent (env ACRELAY_ADMIN_TOKEN holds the token itself)")
	fs.BoolVar(&o.issueToken, "issue-token", false, "with an admin token and no token reference yet: issue a read+append token into the file \"token\" beside the profile")
	fs.StringVar(&o.keyring, "keyring", envOr("ACRELAY_KEYRING", ""), "keyring file to record in the profile (env ACRELAY_KEYRING)")
	fs.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

// agentInitResult is what init did. Registration is "registered" (done
// now), "already_registered" (the relay knew the key), "pending" (the
// operator calls in Commands are needed) or "unknown" (no token could
// read the registry).
type agentInitResult struct {
	Profile       string   `json:"profile"`
	ProfileStatus string   `json:"profile_status"` // created, updated, unchanged
	KeyFile       string   `json:"key_file"`
	KeyStatus     string   `json:"key_status"` // created, existing
	PublicKey     string   `json:"public_key_b64url"`
	ProjectID     string   `json:"project_id"`
	IdentityID    string   `json:"identity_id"`
	SigningKeyID  string   `json:"signing_key_id"`
	DeviceID      string   `json:"device_id"`
	Registration  string   `json:"registration"`
	TokenRef      string   `json:"token_ref"` // "token_file PATH", "token_env NAME" or ""
	Commands      []string `json:"operator_commands,omitempty"`
	Notes         []string `json:"notes,omitempty"`
}

func (r *agentInitResult) print(w io.Writer) {
	fmt.Fprintf(w, "profile       %s (%s)\n", r.Profile, r.ProfileStatus)
	fmt.Fprintf(w, "key           %s (%s)\n", r.KeyFile, r.KeyStatus)
	fmt.Fprintf(w, "public key    %s\n", r.PublicKey)
	fmt.Fprintf(w, "project       %s\n", r.ProjectID)
	fmt.Fprintf(w, "identity      %s\n", r.IdentityID)
	fmt.Fprintf(w, "signing key   %s\n", r.SigningKeyID)
	fmt.Fprintf(w, "device        %s\n", r.DeviceID)
	tok := r.TokenRef
	if tok == "" {
		tok = "none (set token_file or token_env: acrelay agent init --token-file F)"
	}
	fmt.Fprintf(w, "token         %s\n", tok)
	fmt.Fprintf(w, "registration  %s\n", r.Registration)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(r.Commands) > 0 {
		fmt.Fprintln(w, "An operator must register this agent once, on the relay host:")
		for _, c := range r.Commands {
			fmt.Fprintf(w, "  %s\n", c)
		}
		fmt.Fprintln(w, "Then run acrelay agent init again to confirm.")
	}
}

// defaultProfileTarget is where init writes when no path is named: the
// git work tree's .acrelay/agent.json, else the user's config directory.
// inRepo reports the first case.
func defaultProfileTarget(cwd string) (path string, inRepo bool, err error) {
	if top := gitTopLevel(cwd); top != "" {
		return filepath.Join(top, profileDirName, profileFileName), true, nil
	}
	dir := userConfigDir()
	if dir == "" {
		return "", false, errors.New("no profile location: not in a git work tree and neither XDG_CONFIG_HOME nor HOME is set; pass --profile")
	}
	return filepath.Join(dir, "acrelay", profileFileName), false, nil
}

// gitTopLevel is the top of the git work tree holding dir, or "".
func gitTopLevel(dir string) string {
	cmd := exec.Command("git", "rev-parse", "--show-toplevel")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// agentInit runs the three steps of init; see the command's Long text.
func agentInit(ctx context.Context, o agentInitOptions, stderr io.Writer) (*agentInitResult, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	path, inRepo := o.profile, false
	if path == "" || path == profileNone {
		if path, inRepo, err = defaultProfileTarget(cwd); err != nil {
			return nil, err
		}
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	res := &agentInitResult{Profile: path, ProfileStatus: "created"}

	// The existing profile, if any, is the base: init only adds.
	p := &agentProfile{ProfileVersion: profileVersion, path: path}
	var before []byte
	switch old, err := loadProfile(path); {
	case err == nil:
		p, res.ProfileStatus = old, "unchanged"
		before, _ = marshalProfile(old)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("profile directory: %w", err)
	}

	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&p.URL, o.url)
	set(&p.RepositoryID, o.repositoryID)
	set(&p.DisplayName, o.displayName)
	set(&p.Keyring, absFrom(cwd, o.keyring))
	if p.URL == "" {
		return nil, errors.New("no relay URL: pass --url or set ACRELAY_URL")
	}
	if _, err := client.New(p.URL, ""); err != nil {
		return nil, err
	}
	if p.DisplayName == "" {
		host, _ := os.Hostname()
		p.DisplayName = "agent-" + strings.ToLower(firstNonEmpty(host, "local"))
	}
	if p.DeviceID == "" {
		p.DeviceID = uuid.NewString()
	}

	// 1. The key.
	if o.keyFile != "" {
		p.KeyFile = absFrom(cwd, o.keyFile)
	} else if p.KeyFile == "" {
		p.KeyFile = "agent.pem" // beside the profile
	}
	res.KeyFile = p.resolve(p.KeyFile)
	pub, created, err := ensureKey(res.KeyFile)
	if err != nil {
		return nil, err
	}
	res.PublicKey = correspondence.EncodePublicKey(pub)
	res.KeyStatus = map[bool]string{true: "created", false: "existing"}[created]

	// The token reference.
	switch {
	case o.tokenFile != "":
		p.TokenFile, p.TokenEnv = absFrom(cwd, o.tokenFile), ""
	case o.tokenEnv != "":
		if !validEnvName(o.tokenEnv) {
			return nil, errors.New("--token-env is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
		}
		p.TokenEnv, p.TokenFile = o.tokenEnv, ""
	case p.TokenFile == "" && p.TokenEnv == "" && !o.issueToken && os.Getenv("ACRELAY_TOKEN") != "":
		p.TokenEnv = "ACRELAY_TOKEN"
	}

	admin, err := adminToken(o.adminTokenFile)
	if err != nil {
		return nil, err
	}
	agentTok, _ := p.token() // "" when the reference does not resolve (yet)

	// The project: flag, profile, else the token's own project.
	set(&p.ProjectID, o.projectID)
	if p.ProjectID == "" {
		for _, tok := range []string{agentTok, admin} {
			if tok == "" {
				continue
			}
			c, _ := client.New(p.URL, tok)
			if who, err := c.Whoami(ctx); err == nil && who.ProjectID != "" {
				p.ProjectID = who.ProjectID
				break
			}
		}
	}
	if p.ProjectID == "" {
		return nil, errors.New("no project: pass --project-id (or a token of the project, by --token-file or ACRELAY_TOKEN)")
	}

	// 2. The registration.
	if err := register(ctx, p, res, admin, agentTok); err != nil {
		return nil, err
	}
	if o.issueToken && p.TokenFile == "" && p.TokenEnv == "" {
		if admin == "" {
			return nil, errors.New("--issue-token needs an admin token (--admin-token-file or ACRELAY_ADMIN_TOKEN)")
		}
		c, _ := client.New(p.URL, admin)
		t, err := c.CreateToken(ctx, p.ProjectID, []string{"read", "append"})
		if err != nil {
			return nil, fmt.Errorf("issue a token: %w", err)
		}
		if err := writeNewFile(filepath.Join(dir, "token"), []byte(t.Token+"\n")); err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		p.TokenFile = "token"
		res.Notes = append(res.Notes, "issued token "+t.TokenID+" (read, append) into "+filepath.Join(dir, "token"))
	}

	// 3. The profile.
	after, err := marshalProfile(p)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(before, after) {
		if res.ProfileStatus == "unchanged" {
			res.ProfileStatus = "updated"
		}
		if err := client.WriteFileAtomic(path, after, 0o600); err != nil {
			return nil, fmt.Errorf("write profile: %w", err)
		}
	}
	if o.profile == "" || inRepo {
		if top := gitTopLevel(dir); top != "" && filepath.Dir(dir) == top && filepath.Base(dir) == profileDirName {
			if err := gitExclude(top, "/"+profileDirName+"/"); err != nil {
				fmt.Fprintf(stderr, "acrelay: note: could not add /%s/ to .git/info/exclude: %v\n", profileDirName, err)
			}
		}
	}
	res.ProjectID, res.IdentityID, res.SigningKeyID, res.DeviceID = p.ProjectID, p.IdentityID, p.SigningKeyID, p.DeviceID
	switch {
	case p.TokenFile != "":
		res.TokenRef = "token_file " + p.resolve(p.TokenFile)
	case p.TokenEnv != "":
		res.TokenRef = "token_env " + p.TokenEnv
	}
	if p.RepositoryID == "" {
		res.Notes = append(res.Notes, "no repository_id: guard and inbox need one (acrelay agent init --repository-id R)")
	}
	return res, nil
}

// register makes sure the relay knows the profile's key, filling
// IdentityID and SigningKeyID. A key already in the registry is adopted
// (idempotence); with an admin token, the identity and key are created;
// without one, the ids are chosen here and the operator's calls listed.
func register(ctx context.Context, p *agentProfile, res *agentInitResult, admin, agentTok string) error {
	pub := res.PublicKey
	res.Registration = "unknown"
	for _, tok := range []string{agentTok, admin} {
		if tok == "" {
			continue
		}
		c, _ := client.New(p.URL, tok)
		ids, keys, err := c.Identities(ctx)
		if err != nil {
			continue
		}
		res.Registration = "pending"
		for keyID, k := range keys {
			if correspondence.EncodePublicKey(k.PublicKey) != pub {
				continue
			}
			if st := ids[k.IdentityID].Status; st != "active" {
				return fmt.Errorf("the relay knows this key under an identity that is %s: make a new key with --key", st)
			}
			if k.Status == "revoked" {
				return fmt.Errorf("the relay lists this key (signing key %s) as revoked: every event it signs is refused (sender_or_signing_key_not_active). Make a new key: run init again with --key NEW.pem (a file that does not exist yet), with an admin token to register it", keyID)
			}
			p.IdentityID, p.SigningKeyID, res.Registration = k.IdentityID, keyID, "already_registered"
			return nil
		}
		break
	}
	if admin != "" {
		c, _ := client.New(p.URL, admin)
		if p.IdentityID == "" {
			id, err := c.CreateIdentity(ctx, p.ProjectID, "", p.DisplayName)
			if err != nil {
				return fmt.Errorf("register the identity: %w", err)
			}
			p.IdentityID = id.IdentityID
		} else if _, err := c.CreateIdentity(ctx, p.ProjectID, p.IdentityID, p.DisplayName); err != nil {
			// The identity chosen by an earlier run may exist already.
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != 409 {
				return fmt.Errorf("register the identity: %w", err)
			}
		}
		k, err := c.AddKey(ctx, p.IdentityID, "", pub)
		if err != nil {
			return fmt.Errorf("register the key: %w", err)
		}
		p.SigningKeyID, res.Registration = k.SigningKeyID, "registered"
		return nil
	}
	if p.IdentityID == "" {
		p.IdentityID = uuid.NewString()
	}
	if p.SigningKeyID == "" {
		p.SigningKeyID = uuid.NewString()
	}
	if res.Registration == "unknown" {
		res.Notes = append(res.Notes, "no token could read the relay's key registry: registration not checked")
	}
	res.Registration = "pending"
	res.Commands = []string{
		fmt.Sprintf("acrelay identity create --project-id %s --identity-id %s --display-name %s", p.ProjectID, p.IdentityID, shellQuote(p.DisplayName)),
		fmt.Sprintf("acrelay key add --project-id %s --identity-id %s --signing-key-id %s --public-key %s", p.ProjectID, p.IdentityID, p.SigningKeyID, pub),
	}
	return nil
}

// adminToken reads the admin token from file, else ACRELAY_ADMIN_TOKEN
// ("" when neither).
func adminToken(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("admin token file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv("ACRELAY_ADMIN_TOKEN"), nil
}

// ensureKey loads the private key at path, or creates it (mode 0600) when
// the file does not exist; created reports the second case.
func ensureKey(path string) (ed25519.PublicKey, bool, error) {
	priv, err := client.LoadPrivateKey(path)
	if err == nil {
		return priv.Public().(ed25519.PublicKey), false, nil
	}
	if _, serr := os.Lstat(path); !errors.Is(serr, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("key file %s: %w", path, err)
	}
	if priv, err = client.GenerateKey(); err != nil {
		return nil, false, err
	}
	pemBytes, err := client.MarshalPrivateKeyPEM(priv)
	if err != nil {
		return nil, false, err
	}
	if err := writeNewFile(path, pemBytes); err != nil {
		return nil, false, fmt.Errorf("key file: %w", err)
	}
	return priv.Public().(ed25519.PublicKey), true, nil
}

// marshalProfile is the profile as written: indented JSON, a newline.
func marshalProfile(p *agentProfile) ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// gitExclude adds line to the work tree's info/exclude unless present.
func gitExclude(top, line string) error {
	cmd := exec.Command("git", "rev-parse", "--git-path", "info/exclude")
	cmd.Dir = top
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	path := strings.TrimSpace(string(out))
	if !filepath.IsAbs(path) {
		path = filepath.Join(top, path)
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	data = append(data, line+"\n"...)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// absFrom makes a non-empty relative path absolute against dir.
func absFrom(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@+=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
