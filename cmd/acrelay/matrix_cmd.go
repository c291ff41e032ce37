package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/couriers/matrix/e2ee"
	"github.com/acrelay/acrelay/store"
)

func newMatrixCmd() *cobra.Command {
	root := &cobra.Command{Use: "matrix", Short: "Matrix courier: application-service registration and room bindings"}
	{
		var u, name, asID, local string
		c := &cobra.Command{
			Use: "registration", Short: "Print a fresh application-service registration YAML (fresh random tokens) on stdout", Args: cobra.NoArgs,
			Example: "  acrelay matrix registration --url http://127.0.0.1:8009 --homeserver-name example.org > acrelay-registration.yaml",
			RunE: func(cmd *cobra.Command, _ []string) error {
				if u == "" || name == "" {
					return errors.New("--url and --homeserver-name are required")
				}
				reg := appservice.CreateRegistration()
				reg.AppToken, reg.ServerToken = randomToken(), randomToken()
				reg.ID, reg.URL, reg.SenderLocalpart = asID, u, local
				reg.Namespaces.UserIDs.Register(regexp.MustCompile("@"+regexp.QuoteMeta(local)+":"+regexp.QuoteMeta(name)), true)
				// The relay device's to-device traffic, device lists and
				// one-time-key counts in the transactions (MSC2409,
				// MSC3202): Synapse refuses /sync to the sender and pushes
				// them instead; Dendrite ignores both keys.
				reg.EphemeralEvents, reg.MSC3202 = true, true
				y, err := reg.YAML()
				if err != nil {
					return err
				}
				_, err = fmt.Fprint(cmd.OutOrStdout(), y)
				return err
			},
		}
		c.Flags().StringVar(&u, "url", "", "the URL the homeserver reaches the relay's application-service listener at")
		c.Flags().StringVar(&name, "homeserver-name", "", "the homeserver's server name (the part after ':' in user ids)")
		c.Flags().StringVar(&asID, "id", "acrelay", "application service id")
		c.Flags().StringVar(&local, "sender-localpart", "acrelay", "localpart of the courier's Matrix user")
		root.AddCommand(c)
	}
	{
		var l localCmd
		var mc matrixConfig
		var projectID, repositoryID, room string
		var create, encrypted bool
		var invite []string
		c := &cobra.Command{
			Use: "bind", Short: "Bind a project (or one repository) to a Matrix room in the local store", Args: cobra.NoArgs,
			Example: "  acrelay matrix bind --project P --room '!abc:example.org'\n" +
				"  acrelay matrix bind --project P --create --invite '@alice:example.org' --matrix-homeserver http://127.0.0.1:8008 --matrix-registration reg.yaml",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					// The running relay's device, not this process, encrypts:
					// this binary only says whether one like it can.
					b, err := mc.binder(ctx, st, create)
					if err != nil {
						return nil, "", err
					}
					bd, err := b.Bind(ctx, projectID, matrix.BindRequest{RepositoryID: repositoryID, RoomID: room, Create: create, Invite: invite, Encrypted: encrypted})
					if errors.Is(err, matrix.ErrEncryptionUnavailable) {
						return nil, "", fmt.Errorf("matrix bind: %w (a relay built with -tags goolm can)", err)
					}
					if err != nil {
						return nil, "", notFound(err, "project %s", projectID)
					}
					out := b.Describe(ctx, []store.MatrixBinding{bd})[0]
					return out, bindingLine(out), nil
				})
			},
		}
		l.flags(c)
		addMatrixFlags(c.Flags(), &mc)
		c.Flags().StringVar(&projectID, "project", "", "project id")
		c.Flags().StringVar(&repositoryID, "repository", "", "bind only this repository (default: every repository)")
		c.Flags().StringVar(&room, "room", "", "an existing room id (!opaque:server)")
		c.Flags().BoolVar(&create, "create", false, "create a private room (unencrypted unless --encrypted)")
		c.Flags().BoolVar(&encrypted, "encrypted", false, "with --create: make the room end-to-end encrypted (m.room.encryption megolm, as Element does; needs a relay built with -tags goolm)")
		c.Flags().StringArrayVar(&invite, "invite", nil, "with --create: invite this Matrix user (repeatable)")
		root.AddCommand(c)
	}
	{
		var l localCmd
		var projectID, bindingID string
		c := &cobra.Command{
			Use: "unbind", Short: "Remove a binding; nothing more reaches its room", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					b := &matrix.Binder{Store: st}
					if err := b.Unbind(ctx, projectID, bindingID); err != nil {
						return nil, "", notFound(err, "binding %s", bindingID)
					}
					return map[string]string{"binding_id": bindingID}, "", nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&projectID, "project", "", "project id")
		c.Flags().StringVar(&bindingID, "binding", "", "binding id")
		root.AddCommand(c)
	}
	{
		var l localCmd
		var mc matrixConfig
		var projectID string
		c := &cobra.Command{
			Use: "bindings", Short: "List a project's Matrix bindings (with the --matrix-* flags: whether each room is end-to-end encrypted and the relay takes part)",
			Args: cobra.NoArgs,
			Example: "  acrelay matrix bindings --data-dir ./data --project P\n" +
				"  acrelay matrix bindings --data-dir ./data --project P --json --matrix-homeserver http://127.0.0.1:8008 --matrix-user-id @bot:example.org",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					bs, err := st.MatrixBindings(ctx, projectID)
					if err != nil {
						return nil, "", err
					}
					b, err := mc.binder(ctx, st, false)
					if err != nil {
						return nil, "", err
					}
					out := b.Describe(ctx, bs)
					lines := make([]string, 0, len(out))
					for _, o := range out {
						lines = append(lines, bindingLine(o))
					}
					return out, strings.Join(lines, "\n"), nil
				})
			},
		}
		l.flags(c)
		addMatrixFlags(c.Flags(), &mc)
		c.Flags().StringVar(&projectID, "project", "", "project id")
		root.AddCommand(c)
	}
	root.AddCommand(newMatrixDoctorCmd())
	return root
}

// binder is a Binder on the local store for the binding commands: with
// --matrix-homeserver (or needClient) it has the homeserver's client, so
// it sees encrypted rooms and describes the relay's part in them (its
// device, the lease over it in the store) as the running relay would.
func (c *matrixConfig) binder(ctx context.Context, st store.Store, needClient bool) (*matrix.Binder, error) {
	cs, canEncrypt := st.(store.MatrixCrypto)
	b := &matrix.Binder{Store: st, CanEncrypt: e2ee.Built && canEncrypt, Leases: st}
	if !needClient && c.Homeserver == "" {
		return b, nil
	}
	cli, reg, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	if cli == nil {
		return nil, errors.New("--create needs --matrix-homeserver and credentials")
	}
	b.Client, b.Appservice = cli, reg != nil
	if b.CanEncrypt {
		b.Device = func(ctx context.Context) (id.UserID, id.DeviceID, error) {
			return e2ee.RelayDevice(ctx, cli, reg != nil, cs)
		}
	}
	return b, nil
}

// bindingLine is a binding in the commands' text output: binding id,
// room id, repository id (when bound to one), and for an encrypted room
// the relay's part in it.
func bindingLine(b matrix.BindingJSON) string {
	line := b.BindingID + " " + b.RoomID
	if b.RepositoryID != "" {
		line += " " + b.RepositoryID
	}
	switch {
	case b.Encrypted && b.E2EE != nil:
		line += " (end-to-end encrypted: " + b.E2EE.Detail + ")"
	case b.Encrypted:
		line += " (end-to-end encrypted)"
	case b.E2EE != nil:
		line += " (" + b.E2EE.Detail + ")"
	}
	return line
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func init() { rootCmd.AddCommand(newMatrixCmd()) }
