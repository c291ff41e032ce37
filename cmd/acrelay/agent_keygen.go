package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"

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
		Example: `  acrelay keygen --out agent.pem
  # then register the printed key for your identity (on the relay host):
  acrelay key add --identity-id I --public-key "$(acrelay keygen --out agent2.pem)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, err := client.GenerateKey()
			if err != nil {
				return err
			}
			pemBytes, err := client.MarshalPrivateKeyPEM(priv)
			if err != nil {
				return err
			}
			flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
			if force {
				flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			}
			f, err := os.OpenFile(out, flags, 0o600)
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%s exists; pass --force to replace it", out)
			}
			if err != nil {
				return fmt.Errorf("key file: %w", err)
			}
			// O_TRUNC keeps an old file's mode: make it 0600 either way.
			if err := f.Chmod(0o600); err != nil {
				f.Close()
				return fmt.Errorf("key file: %w", err)
			}
			if _, err := f.Write(pemBytes); err != nil {
				f.Close()
				return fmt.Errorf("key file: %w", err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("key file: %w", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), correspondence.EncodePublicKey(priv.Public().(ed25519.PublicKey)))
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "acrelay-key.pem", "key file to write (mode 0600)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing key file")
	return cmd
}
