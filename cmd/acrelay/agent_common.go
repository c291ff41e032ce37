package main

// Shared flags and helpers of the agent commands (keygen, sign, post,
// events, follow, claims, voice, demo): relay URL and token, the signer's
// key and sender ids, the keyring that verifies what is read.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

// relayFlags name the relay and the bearer token.
type relayFlags struct {
	url         string
	token       string
	tokenFile   string
	keyring     string
	withKeyring bool
	prof        profileSource // the agent profile, the lowest layer (agent_profile.go)
}

func (f *relayFlags) add(cmd *cobra.Command, withKeyring bool) {
	fs := cmd.Flags()
	f.prof.flag, f.withKeyring = addProfileFlag(cmd), withKeyring
	fs.StringVar(&f.url, "url", envOr("ACRELAY_URL", ""), "relay base URL, e.g. http://127.0.0.1:8080 (env ACRELAY_URL)")
	fs.StringVar(&f.token, "token", "", "bearer token (env ACRELAY_TOKEN; prefer the env or --token-file over the command line)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token; wins over ACRELAY_TOKEN (env ACRELAY_TOKEN_FILE)")
	if withKeyring {
		fs.StringVar(&f.keyring, "keyring", envOr("ACRELAY_KEYRING", ""),
			`JSON file [{"signing_key_id","identity_id","public_key_b64url"}] to verify every record read (env ACRELAY_KEYRING)`)
	}
}

// applyProfile fills what flags and ACRELAY_* left empty from the agent
// profile, when there is one.
func (f *relayFlags) applyProfile() error {
	p, err := f.prof.get()
	if p != nil {
		p.fillRelay(f)
	}
	return err
}

// resolveToken applies the precedence --token, --token-file, ACRELAY_TOKEN,
// ACRELAY_TOKEN_FILE, then the agent profile's token_file or token_env:
// what the command line names wins over the environment, so an explicit
// --token-file is never silently overridden by an exported ACRELAY_TOKEN.
func (f *relayFlags) resolveToken() (string, error) {
	if f.token != "" {
		return f.token, nil
	}
	if f.tokenFile != "" {
		return readTokenFile(f.tokenFile)
	}
	if v := os.Getenv("ACRELAY_TOKEN"); v != "" {
		return v, nil
	}
	if v := os.Getenv("ACRELAY_TOKEN_FILE"); v != "" {
		return readTokenFile(v)
	}
	if p, err := f.prof.get(); err != nil || p != nil {
		if err != nil {
			return "", err
		}
		return p.token()
	}
	return "", errors.New("no bearer token: set --token, --token-file, ACRELAY_TOKEN or ACRELAY_TOKEN_FILE (or an agent profile: acrelay agent init)")
}

func readTokenFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// client builds the SDK client; stderr gets one notice when records will
// not be verified.
func (f *relayFlags) client(stderr io.Writer) (*client.Client, error) {
	if err := f.applyProfile(); err != nil {
		return nil, err
	}
	if f.url == "" {
		return nil, errors.New("no relay URL: set --url or ACRELAY_URL, or run acrelay agent init here (its profile names the relay)")
	}
	tok, err := f.resolveToken()
	if err != nil {
		return nil, err
	}
	c, err := client.New(f.url, tok)
	if err != nil {
		return nil, err
	}
	if f.keyring != "" {
		if c.Keys, err = client.LoadKeyring(f.keyring); err != nil {
			return nil, err
		}
	} else if stderr != nil {
		fmt.Fprintln(stderr, "acrelay: note: no --keyring, records are not verified")
	}
	return c, nil
}

// signerFlags name the key file and the sender ids of spec §3.
type signerFlags struct {
	keyFile   string
	projectID string
	sender    correspondence.Sender
	prof      profileSource // the agent profile, the lowest layer (agent_profile.go)
}

func (f *signerFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.prof.flag = addProfileFlag(cmd)
	fs.StringVar(&f.keyFile, "key", envOr("ACRELAY_KEY_FILE", ""), "Ed25519 private key file: PKCS#8 PEM, or a 32-byte hex/base64url seed (env ACRELAY_KEY_FILE)")
	fs.StringVar(&f.projectID, "project-id", envOr("ACRELAY_PROJECT_ID", ""), "project UUID (env ACRELAY_PROJECT_ID)")
	fs.StringVar(&f.sender.IdentityID, "identity-id", envOr("ACRELAY_IDENTITY_ID", ""), "sender identity UUID (env ACRELAY_IDENTITY_ID)")
	fs.StringVar(&f.sender.SigningKeyID, "signing-key-id", envOr("ACRELAY_SIGNING_KEY_ID", ""), "signing key UUID registered for the identity (env ACRELAY_SIGNING_KEY_ID)")
	fs.StringVar(&f.sender.DeviceID, "device-id", envOr("ACRELAY_DEVICE_ID", ""), "device UUID, chosen once per installation (env ACRELAY_DEVICE_ID)")
	fs.StringVar(&f.sender.SessionID, "session-id", envOr("ACRELAY_SESSION_ID", ""), "session UUID, one per run (env ACRELAY_SESSION_ID)")
}

// applyProfile fills what flags and ACRELAY_* left empty (key file,
// project, identity, signing key and device ids) from the agent profile,
// when there is one; a caller that settles ids itself before signer
// (acrelay mcp's device id) calls it first.
func (f *signerFlags) applyProfile() error {
	p, err := f.prof.get()
	if p != nil {
		p.fillSigner(f)
	}
	return err
}

// signer loads the key; ids must all be set unless partial is true (then
// the caller fills the rest from a core event).
func (f *signerFlags) signer(partial bool) (*client.Signer, error) {
	if partial {
		// A core event's own ids win over the profile's: only the key.
		if p, err := f.prof.get(); err != nil {
			return nil, err
		} else if p != nil && f.keyFile == "" {
			f.keyFile = p.resolve(p.KeyFile)
		}
	} else if err := f.applyProfile(); err != nil {
		return nil, err
	}
	if f.keyFile == "" {
		return nil, errors.New("no key: set --key or ACRELAY_KEY_FILE (acrelay keygen writes one)")
	}
	priv, err := client.LoadPrivateKey(f.keyFile)
	if err != nil {
		return nil, err
	}
	if !partial {
		for _, id := range []struct{ flag, env, v string }{
			{"--project-id", "ACRELAY_PROJECT_ID", f.projectID},
			{"--identity-id", "ACRELAY_IDENTITY_ID", f.sender.IdentityID},
			{"--signing-key-id", "ACRELAY_SIGNING_KEY_ID", f.sender.SigningKeyID},
			{"--device-id", "ACRELAY_DEVICE_ID", f.sender.DeviceID},
			{"--session-id", "ACRELAY_SESSION_ID", f.sender.SessionID},
		} {
			if id.v != "" {
				continue
			}
			if id.flag == "--session-id" {
				// The one id no profile holds: one per run of the agent.
				return nil, errors.New("--session-id (or ACRELAY_SESSION_ID) is required: a new UUID for each run of the agent, e.g. export ACRELAY_SESSION_ID=$(cat /proc/sys/kernel/random/uuid); the agent profile holds no session id")
			}
			return nil, fmt.Errorf("%s (or %s, or the agent profile: acrelay agent init) is required", id.flag, id.env)
		}
	}
	return client.NewSigner(priv, f.projectID, f.sender)
}

// writeJSONLine writes v as one line of JSON without HTML escaping.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeRawLine writes already-encoded JSON bytes and a newline.
func writeRawLine(w io.Writer, raw []byte) error {
	if _, err := w.Write(raw); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// inclusionChecker is the --verify-log of follow and subscribe: each
// record read must be included in its project's verifiable log, at a
// checkpoint signed by logKey (when "", the relay's /v1/log-key, trusted
// on first use with a notice on stderr).
func inclusionChecker(ctx context.Context, c *client.Client, logKey string, stderr io.Writer) (*client.InclusionChecker, error) {
	if logKey == "" {
		k, err := c.LogKey(ctx)
		if err != nil {
			return nil, fmt.Errorf("--verify-log: read the relay's log key: %w", err)
		}
		logKey = k
		fmt.Fprintf(stderr, "acrelay: note: --verify-log trusts the relay's log key %s (pin it with --log-key)\n", logKey)
	}
	v, err := note.NewVerifier(logKey)
	if err != nil {
		return nil, fmt.Errorf("--log-key: %w", err)
	}
	return c.NewInclusionChecker(v), nil
}

// addVerifyLogFlags registers --verify-log and --log-key.
func addVerifyLogFlags(cmd *cobra.Command, verify *bool, logKey *string) {
	cmd.Flags().BoolVar(verify, "verify-log", false, "check each record's inclusion in the project's verifiable log (waits up to 5 s for a checkpoint covering it); a record that fails ends the command with an error")
	cmd.Flags().StringVar(logKey, "log-key", "", "the relay's log verifier key (name+hash+key) for --verify-log (default: the relay's /v1/log-key, trusted on first use)")
}
