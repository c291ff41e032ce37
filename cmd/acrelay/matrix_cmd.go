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
					b := &matrix.Binder{Store: st, CanEncrypt: e2ee.Built}
					if create || mc.Homeserver != "" {
						cli, _, err := mc.client(ctx)
						if err != nil {
							return nil, "", err
						}
						if cli == nil && create {
							return nil, "", errors.New("--create needs --matrix-homeserver and credentials")
						}
						b.Client = cli
					}
					bd, err := b.Bind(ctx, projectID, matrix.BindRequest{RepositoryID: repositoryID, RoomID: room, Create: create, Invite: invite, Encrypted: encrypted})
					if errors.Is(err, matrix.ErrEncryptionUnavailable) {
						return nil, "", fmt.Errorf("matrix bind: %w (a relay built with -tags goolm can)", err)
					}
					if err != nil {
						return nil, "", notFound(err, "project %s", projectID)
					}
					out := map[string]any{"binding_id": bd.ID, "project_id": bd.ProjectID, "repository_id": bd.RepositoryID, "room_id": bd.RoomID}
					text := bd.ID + " " + bd.RoomID
					if bd.Encrypted {
						out["encrypted"] = true
						text += " (end-to-end encrypted)"
					}
					return out, text, nil
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
		var projectID string
		c := &cobra.Command{
			Use: "bindings", Short: "List a project's Matrix bindings", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					bs, err := st.MatrixBindings(ctx, projectID)
					if err != nil {
						return nil, "", err
					}
					var lines []string
					out := []map[string]string{}
					for _, b := range bs {
						lines = append(lines, b.ID+" "+b.RoomID+" "+b.RepositoryID)
						out = append(out, map[string]string{"binding_id": b.ID, "room_id": b.RoomID, "repository_id": b.RepositoryID})
					}
					return out, strings.Join(lines, "\n"), nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&projectID, "project", "", "project id")
		root.AddCommand(c)
	}
	root.AddCommand(newMatrixDoctorCmd())
	return root
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func init() { rootCmd.AddCommand(newMatrixCmd()) }
