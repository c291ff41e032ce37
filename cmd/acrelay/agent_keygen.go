package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

func init() { rootCmd.AddCommand(newKeygenCmd()) }

func newKeygenCmd() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Create an Ed25519 signing key file and print its public key",
		Long: `keygen writes a fresh Ed25519 private key as PKCS#8 PEM ("PRIVATE KEY") with
mode 0600 and prints the public key as 43 characters of unpadded base64url,
the form the admin key route takes (POST /v1/admin/identities/{id}/keys).
It refuses to overwrite an existing file unless --force is given.`,
		Example: `  acrelay keygen --out agent.pem > pub.txt
  # then register the printed key for your identity (on the relay host):
  acrelay key add --project-id P --identity-id I --public-key "$(cat pub.txt)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return keygen(cmd.OutOrStdout(), out, force)
		},
	}
	cmd.Flags().StringVar(&out, "out", "acrelay-key.pem", "key file to write (mode 0600)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing key file")
	return cmd
}

// keygen writes a fresh key to out and prints its public key. Everything
// that can be checked is checked before a file is created, and a failure
// after that removes what was written: a failed keygen leaves no key file
// behind (a second run would otherwise refuse with "exists"). With force
// the new key is written beside out and renamed over it, so a failure
// keeps the old key whole.
func keygen(stdout io.Writer, out string, force bool) (err error) {
	if out == "" {
		return errors.New("--out is empty: name the key file to write")
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return fmt.Errorf("key file %s: its directory does not exist", out)
	}
	switch fi, err := os.Lstat(out); {
	case err == nil && !force:
		return fmt.Errorf("%s exists; pass --force to replace it", out)
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%s exists and is not a regular file; not replaced", out)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("key file: %w", err)
	}
	priv, err := client.GenerateKey()
	if err != nil {
		return err
	}
	pemBytes, err := client.MarshalPrivateKeyPEM(priv)
	if err != nil {
		return err
	}
	if force {
		err = client.WriteFileAtomic(out, pemBytes, 0o600)
	} else {
		err = writeNewFile(out, pemBytes)
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; pass --force to replace it", out)
	}
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	// A key whose public half could not be printed cannot be registered
	// from this run's output: take the file back.
	if _, err := fmt.Fprintln(stdout, correspondence.EncodePublicKey(priv.Public().(ed25519.PublicKey))); err != nil {
		os.Remove(out)
		return fmt.Errorf("print the public key (key file removed): %w", err)
	}
	return nil
}

// writeNewFile creates path (mode 0600; an error wrapping fs.ErrExist if
// it exists) with data, removing it again if the write fails.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
