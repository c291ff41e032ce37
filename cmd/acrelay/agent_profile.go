package main

// The agent profile: one JSON file naming the relay, the project, the
// agent's identity, key and device, and where its bearer token is kept.
// Every agent command (and acrelay mcp) reads it as the lowest layer of
// its settings: a flag wins over ACRELAY_*, which wins over the profile
// (docs/agents.md "The agent profile").

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Profile file names and locations.
const (
	profileVersion  = 1
	profileDirName  = ".acrelay"   // the repository-local directory
	profileFileName = "agent.json" // in profileDirName or $XDG_CONFIG_HOME/acrelay
	// profileNone as --profile or ACRELAY_PROFILE turns the lookup off:
	// the command runs from flags and ACRELAY_* alone.
	profileNone = "none"
)

// agentProfile is the profile file, a closed JSON object. Paths
// (key_file, token_file, keyring) may be relative: they are relative to
// the profile's own directory. The token is never in the file: only a
// reference to it, token_file (a file holding it) or token_env (the name
// of the environment variable holding it).
type agentProfile struct {
	ProfileVersion int    `json:"profile_version"`
	URL            string `json:"url"`
	ProjectID      string `json:"project_id"`
	RepositoryID   string `json:"repository_id,omitempty"`
	IdentityID     string `json:"identity_id"`
	DisplayName    string `json:"display_name,omitempty"`
	SigningKeyID   string `json:"signing_key_id"`
	DeviceID       string `json:"device_id"`
	KeyFile        string `json:"key_file"`
	TokenFile      string `json:"token_file,omitempty"`
	TokenEnv       string `json:"token_env,omitempty"`
	Keyring        string `json:"keyring,omitempty"`

	path string // where it was read from; "" for a profile not on disk
}

// errProfileHoldsToken refuses a profile with the token written inline.
var errProfileHoldsToken = errors.New(`the profile holds a "token": a profile names its token only by reference ("token_file" or "token_env"); move the token to a file (mode 0600) and name it in "token_file"`)

// parseProfile reads a profile: a closed object (unknown members and an
// inline token are errors), profile_version 1, a token by reference.
// Error messages never quote values.
func parseProfile(data []byte) (*agentProfile, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, errors.New("not a JSON object")
	}
	for _, secret := range []string{"token", "bearer_token", "access_token"} {
		if _, ok := probe[secret]; ok {
			return nil, errProfileHoldsToken
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p agentProfile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a profile: %w", err)
	}
	if p.ProfileVersion != profileVersion {
		return nil, fmt.Errorf("profile_version %d: this acrelay reads version %d", p.ProfileVersion, profileVersion)
	}
	if p.TokenFile != "" && p.TokenEnv != "" {
		return nil, errors.New(`"token_file" and "token_env" are both set: name the token one way`)
	}
	if p.TokenEnv != "" && !validEnvName(p.TokenEnv) {
		return nil, errors.New(`"token_env" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)`)
	}
	return &p, nil
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// loadProfile reads and parses the profile at path.
func loadProfile(path string) (*agentProfile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent profile: %w", err)
	}
	p, err := parseProfile(data)
	if err != nil {
		return nil, fmt.Errorf("agent profile %s: %w", path, err)
	}
	p.path = path
	return p, nil
}

// resolve returns a profile path made absolute against the profile's
// directory ("" stays "").
func (p *agentProfile) resolve(rel string) string {
	if rel == "" || filepath.IsAbs(rel) || p.path == "" {
		return rel
	}
	return filepath.Join(filepath.Dir(p.path), rel)
}

// token reads the token the profile refers to. Errors name the reference,
// never the value.
func (p *agentProfile) token() (string, error) {
	switch {
	case p.TokenFile != "":
		b, err := os.ReadFile(p.resolve(p.TokenFile))
		if err != nil {
			return "", fmt.Errorf("agent profile %s: token_file: %w", p.path, err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("agent profile %s: token_file %s is empty", p.path, p.resolve(p.TokenFile))
	case p.TokenEnv != "":
		if t := os.Getenv(p.TokenEnv); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("agent profile %s: token_env %s is not set", p.path, p.TokenEnv)
	}
	return "", fmt.Errorf("agent profile %s names no token (token_file or token_env)", p.path)
}

// defaultProfilePaths lists where a profile is looked for when neither
// --profile nor ACRELAY_PROFILE names one, first match wins:
// .acrelay/agent.json in the working directory or its nearest parent that
// has one, then $XDG_CONFIG_HOME/acrelay/agent.json (or
// $HOME/.config/acrelay/agent.json; neither when both are empty).
func defaultProfilePaths(cwd string) []string {
	var out []string
	if cwd != "" {
		for dir := cwd; ; {
			out = append(out, filepath.Join(dir, profileDirName, profileFileName))
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if dir := userConfigDir(); dir != "" {
		out = append(out, filepath.Join(dir, "acrelay", profileFileName))
	}
	return out
}

// userConfigDir is $XDG_CONFIG_HOME, else $HOME/.config, else "".
func userConfigDir() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return d
	}
	if h := os.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".config")
	}
	return ""
}

// findProfile loads the profile named by explicit (the --profile flag or
// ACRELAY_PROFILE; it must exist), else the first default location that
// exists; nil when there is none or explicit is "none".
func findProfile(explicit string) (*agentProfile, error) {
	switch explicit {
	case profileNone:
		return nil, nil
	case "":
	default:
		return loadProfile(explicit)
	}
	cwd, _ := os.Getwd()
	for _, path := range defaultProfilePaths(cwd) {
		if _, err := os.Stat(path); err == nil {
			return loadProfile(path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("agent profile: %w", err)
		}
	}
	return nil, nil
}

// profileFlagName is the flag every agent command shares.
const profileFlagName = "profile"

// addProfileFlag registers --profile on cmd once (relayFlags and
// signerFlags of one command share it) and returns its value.
func addProfileFlag(cmd *cobra.Command) pflag.Value {
	fs := cmd.Flags()
	if f := fs.Lookup(profileFlagName); f != nil {
		return f.Value
	}
	var s string
	fs.StringVar(&s, profileFlagName, envOr("ACRELAY_PROFILE", ""),
		`agent profile file (env ACRELAY_PROFILE; default .acrelay/agent.json here or in a parent directory, then $XDG_CONFIG_HOME/acrelay/agent.json; "none" reads none); flags and ACRELAY_* win over its values`)
	return fs.Lookup(profileFlagName).Value
}

// profileSource loads the profile of one command once.
type profileSource struct {
	flag   pflag.Value
	loaded bool
	p      *agentProfile
	err    error
}

// get returns the command's profile (nil when none).
func (s *profileSource) get() (*agentProfile, error) {
	if !s.loaded {
		s.loaded = true
		explicit := ""
		if s.flag != nil {
			explicit = s.flag.String()
		} else {
			explicit = os.Getenv("ACRELAY_PROFILE")
		}
		s.p, s.err = findProfile(explicit)
	}
	return s.p, s.err
}

// fillRelay sets what flags and ACRELAY_* left empty in f from the
// profile: the URL and keyring (the token is resolveToken's last layer).
func (p *agentProfile) fillRelay(f *relayFlags) {
	if f.url == "" {
		f.url = p.URL
	}
	if f.keyring == "" && p.Keyring != "" && f.withKeyring {
		f.keyring = p.resolve(p.Keyring)
	}
}

// fillSigner sets what flags and ACRELAY_* left empty in f: key file,
// project, identity, signing key and device ids (never the session id,
// which is one per run).
func (p *agentProfile) fillSigner(f *signerFlags) {
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&f.keyFile, p.resolve(p.KeyFile))
	fill(&f.projectID, p.ProjectID)
	fill(&f.sender.IdentityID, p.IdentityID)
	fill(&f.sender.SigningKeyID, p.SigningKeyID)
	fill(&f.sender.DeviceID, p.DeviceID)
}

// overriddenBy lists, sorted, the ACRELAY_* variables set in the
// environment that differ from what the profile says: each wins over
// the profile (flags and variables are the upper layers), which in a
// shell left with another agent's exports mixes two agents' settings
// (one's identity id, the other's key). Names only, never values.
func (p *agentProfile) overriddenBy(getenv func(string) string) []string {
	var out []string
	same := func(a, b string) bool {
		if a == b {
			return true
		}
		aa, err1 := filepath.Abs(a)
		bb, err2 := filepath.Abs(b)
		return err1 == nil && err2 == nil && aa == bb
	}
	for name, v := range map[string]string{
		"ACRELAY_URL": p.URL, "ACRELAY_PROJECT_ID": p.ProjectID, "ACRELAY_IDENTITY_ID": p.IdentityID,
		"ACRELAY_SIGNING_KEY_ID": p.SigningKeyID, "ACRELAY_DEVICE_ID": p.DeviceID,
	} {
		if e := getenv(name); e != "" && e != v {
			out = append(out, name)
		}
	}
	if e := getenv("ACRELAY_KEY_FILE"); e != "" && !same(e, p.resolve(p.KeyFile)) {
		out = append(out, "ACRELAY_KEY_FILE")
	}
	if getenv("ACRELAY_TOKEN") != "" && p.TokenEnv != "ACRELAY_TOKEN" {
		out = append(out, "ACRELAY_TOKEN")
	}
	if e := getenv("ACRELAY_TOKEN_FILE"); e != "" && !same(e, p.resolve(p.TokenFile)) {
		out = append(out, "ACRELAY_TOKEN_FILE")
	}
	slices.Sort(out)
	return out
}
