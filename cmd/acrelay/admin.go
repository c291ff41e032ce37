package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/store"
)

// Local registry administration: these commands open the store directly
// (same --data-dir / --database-url as serve) and apply the same rules as
// the relay's /v1/admin routes.

type localCmd struct {
	store storeConfig
	json  bool
}

func (l *localCmd) flags(cmd *cobra.Command) {
	addStoreFlags(cmd, &l.store)
	// SQLite's tuning is serve's business: an admin command's handful of
	// writes gains nothing from it. The flags still parse (a script may
	// pass serve's flags to both), but --help does not list them.
	for _, name := range []string{"sqlite-max-batch", "sqlite-sync"} {
		if err := cmd.Flags().MarkHidden(name); err != nil {
			panic(err)
		}
	}
	cmd.Flags().BoolVar(&l.json, "json", false, "print the result as JSON")
}

func (l *localCmd) run(cmd *cobra.Command, f func(ctx context.Context, st store.Store) (any, string, error)) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := openStore(ctx, l.store, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer st.Close()
	v, text, err := f(ctx, st)
	if err != nil {
		return err
	}
	return printResult(cmd.OutOrStdout(), l.json, v, text)
}

func printResult(w io.Writer, asJSON bool, v any, text string) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	if text == "" {
		return nil // an empty list prints nothing
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

func newAdminCmds() []*cobra.Command {
	project := &cobra.Command{Use: "project", Short: "Manage projects in the local store"}
	{
		var l localCmd
		var id string
		var public bool
		c := &cobra.Command{
			Use: "create", Short: "Create a project", Args: cobra.NoArgs,
			Example: "  acrelay project create\n  acrelay project create --public\n  acrelay project create --project-id 11111111-1111-4111-8111-111111111111 --json",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					p, err := registry.CreateProject(ctx, st, id)
					if err != nil {
						return nil, "", err
					}
					vis := store.VisibilityPrivate
					if public {
						vis = store.VisibilityPublic
						if err := st.SetProjectVisibility(ctx, p.ID, vis); err != nil {
							return nil, "", fmt.Errorf("project %s created private: %w", p.ID, err)
						}
					}
					return map[string]string{"project_id": p.ID, "visibility": vis}, p.ID, nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&id, "project-id", "", "project id (canonical UUID; default: a fresh one)")
		c.Flags().BoolVar(&public, "public", false, "make the project's reads public (no token needed; writes still need one)")
		project.AddCommand(c)
		project.AddCommand(newVisibilityCmd())
		project.AddCommand(newProjectListCmd())
	}

	identity := &cobra.Command{Use: "identity", Short: "Manage identities in the local store"}
	{
		var l localCmd
		var projectID, id, name string
		c := &cobra.Command{
			Use: "create", Short: "Create an active identity in a project", Args: cobra.NoArgs,
			Example: "  acrelay identity create --project-id P --display-name builder-agent",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					i, err := registry.CreateIdentity(ctx, st, projectID, id, name)
					if err != nil {
						return nil, "", notFound(err, "project %s", projectID)
					}
					return map[string]string{"identity_id": i.ID, "project_id": i.ProjectID, "status": i.Status}, i.ID, nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&projectID, "project-id", "", "project id (required)")
		c.Flags().StringVar(&id, "identity-id", "", "identity id (default: a fresh UUID)")
		c.Flags().StringVar(&name, "display-name", "", "display name")
		_ = c.MarkFlagRequired("project-id")
		identity.AddCommand(c)

		var l2 localCmd
		var dProject string
		d := &cobra.Command{
			Use: "deactivate IDENTITY_ID", Short: "Deactivate an identity (history is kept)", Args: cobra.ExactArgs(1),
			Example: "  acrelay identity deactivate --project-id P 22222222-2222-4222-8222-222222222222",
			RunE: func(cmd *cobra.Command, args []string) error {
				return l2.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					i, err := st.DeactivateIdentity(ctx, dProject, args[0])
					if err != nil {
						return nil, "", notFound(err, "identity %s in project %s", args[0], dProject)
					}
					return map[string]string{"identity_id": i.ID, "status": i.Status}, i.Status, nil
				})
			},
		}
		l2.flags(d)
		d.Flags().StringVar(&dProject, "project-id", "", "project of the identity (required)")
		_ = d.MarkFlagRequired("project-id")
		identity.AddCommand(d)
	}

	key := &cobra.Command{Use: "key", Short: "Manage signing keys in the local store"}
	{
		var l localCmd
		var projectID, identityID, id, pub string
		c := &cobra.Command{
			Use: "add", Short: "Register an Ed25519 public key for an identity", Args: cobra.NoArgs,
			Example: "  acrelay key add --project-id P --identity-id I --public-key A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					ident, err := st.GetIdentity(ctx, projectID, identityID)
					if err != nil {
						return nil, "", notFound(fmt.Errorf("identity: %w", err), "identity %s in project %s", identityID, projectID)
					}
					k, err := registry.AddKey(ctx, st, ident, id, pub)
					if err != nil {
						return nil, "", err
					}
					return map[string]string{"signing_key_id": k.ID, "identity_id": k.IdentityID, "status": k.Status}, k.ID, nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&projectID, "project-id", "", "project of the identity (required)")
		_ = c.MarkFlagRequired("project-id")
		c.Flags().StringVar(&identityID, "identity-id", "", "identity id (required)")
		c.Flags().StringVar(&id, "signing-key-id", "", "signing key id (default: a fresh UUID)")
		c.Flags().StringVar(&pub, "public-key", "", "public key, 43 characters of unpadded base64url (required)")
		_ = c.MarkFlagRequired("identity-id")
		_ = c.MarkFlagRequired("public-key")
		key.AddCommand(c)

		var l2 localCmd
		var rProject string
		r := &cobra.Command{
			Use: "revoke SIGNING_KEY_ID", Short: "Revoke a signing key (history is kept)", Args: cobra.ExactArgs(1),
			Example: "  acrelay key revoke --project-id P 33333333-3333-4333-8333-333333333333",
			RunE: func(cmd *cobra.Command, args []string) error {
				return l2.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					k, err := st.RevokeKey(ctx, rProject, args[0])
					if err != nil {
						return nil, "", notFound(err, "signing key %s in project %s", args[0], rProject)
					}
					return map[string]string{"signing_key_id": k.ID, "status": k.Status}, k.Status, nil
				})
			},
		}
		l2.flags(r)
		r.Flags().StringVar(&rProject, "project-id", "", "project of the key (required)")
		_ = r.MarkFlagRequired("project-id")
		key.AddCommand(r)
	}

	tok := &cobra.Command{Use: "token", Short: "Manage project bearer tokens in the local store"}
	{
		var l localCmd
		var projectID, scopes string
		c := &cobra.Command{
			Use: "create", Short: "Mint a project token (shown once; only its hash is stored)", Args: cobra.NoArgs,
			Example: "  acrelay token create --project-id P --scopes read,append",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					t, secret, err := registry.CreateToken(ctx, st, projectID, strings.Split(scopes, ","))
					if err != nil {
						return nil, "", notFound(err, "project %s", projectID)
					}
					return map[string]any{"token_id": t.ID, "token": secret, "scopes": t.Scopes}, secret, nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&projectID, "project-id", "", "project id (required)")
		c.Flags().StringVar(&scopes, "scopes", "read,append", "comma-separated scopes: read, append, admin")
		_ = c.MarkFlagRequired("project-id")
		tok.AddCommand(c)

		var l2 localCmd
		r := &cobra.Command{
			Use: "revoke TOKEN_ID", Short: "Revoke a token", Args: cobra.ExactArgs(1),
			Example: "  acrelay token revoke abcdefghijklmnopqrstuvwxyz",
			RunE: func(cmd *cobra.Command, args []string) error {
				if !tokenIDShape.MatchString(args[0]) {
					// Not echoed: it may be a whole token or its secret.
					return errors.New(`token revoke takes a token id: 26 characters of a-z and 2-7, the part after "acr_" of a whole token (acrelay token list shows the ids); the argument is not one`)
				}
				return l2.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					if err := st.RevokeToken(ctx, args[0]); err != nil {
						return nil, "", notFound(err, "token %s", args[0])
					}
					return map[string]string{"token_id": args[0], "status": "revoked"}, "revoked", nil
				})
			},
		}
		l2.flags(r)
		tok.AddCommand(r)
	}
	identity.AddCommand(newListCmd("identities", "List a project's identities, every status",
		"  acrelay identity list --project-id P", false,
		func(ctx context.Context, st store.Store, projectID, _ string) (any, string, error) {
			rows, err := listAll(func(after string, limit int) ([]store.Identity, error) {
				return st.ListIdentities(ctx, projectID, after, limit)
			}, func(i store.Identity) string { return i.ID })
			out, lines := make([]map[string]string, 0, len(rows)), make([]string, 0, len(rows))
			for _, i := range rows {
				at := correspondence.FormatTimestamp(i.CreatedAt)
				out = append(out, map[string]string{"identity_id": i.ID, "display_name": i.DisplayName, "status": i.Status, "created_at": at})
				lines = append(lines, strings.Join([]string{i.ID, i.Status, at, i.DisplayName}, "\t"))
			}
			return map[string]any{"identities": out}, strings.Join(lines, "\n"), err
		}))
	key.AddCommand(newListCmd("keys", "List an identity's signing keys, every status",
		"  acrelay key list --project-id P --identity-id I", true,
		func(ctx context.Context, st store.Store, projectID, identityID string) (any, string, error) {
			if _, err := st.GetIdentity(ctx, projectID, identityID); err != nil {
				return nil, "", notFound(fmt.Errorf("identity: %w", err), "identity %s in project %s", identityID, projectID)
			}
			rows, err := listAll(func(after string, limit int) ([]store.SigningKey, error) {
				return st.ListKeys(ctx, projectID, identityID, after, limit)
			}, func(k store.SigningKey) string { return k.ID })
			out, lines := make([]map[string]string, 0, len(rows)), make([]string, 0, len(rows))
			for _, k := range rows {
				at := correspondence.FormatTimestamp(k.CreatedAt)
				out = append(out, map[string]string{"signing_key_id": k.ID, "identity_id": k.IdentityID, "public_key_b64url": k.PublicKey, "status": k.Status, "created_at": at})
				lines = append(lines, strings.Join([]string{k.ID, k.Status, at, k.PublicKey}, "\t"))
			}
			return map[string]any{"keys": out}, strings.Join(lines, "\n"), err
		}))
	tok.AddCommand(newListCmd("tokens", "List a project's tokens, revoked ones included (never their secrets)",
		"  acrelay token list --project-id P", false,
		func(ctx context.Context, st store.Store, projectID, _ string) (any, string, error) {
			rows, err := listAll(func(after string, limit int) ([]store.Token, error) {
				return st.ListTokens(ctx, projectID, after, limit)
			}, func(t store.Token) string { return t.ID })
			out, lines := make([]map[string]any, 0, len(rows)), make([]string, 0, len(rows))
			for _, t := range rows {
				at := correspondence.FormatTimestamp(t.CreatedAt)
				status := map[bool]string{true: "revoked", false: "active"}[t.Revoked]
				out = append(out, map[string]any{"token_id": t.ID, "scopes": t.Scopes, "revoked": t.Revoked, "created_at": at})
				lines = append(lines, strings.Join([]string{t.ID, status, at, strings.Join(t.Scopes, ",")}, "\t"))
			}
			return map[string]any{"tokens": out}, strings.Join(lines, "\n"), err
		}))
	return []*cobra.Command{project, identity, key, tok}
}

// newProjectListCmd is "acrelay project list": every project of the store
// (for a lost project id), one per line (id, visibility, created_at) or,
// with --json, {projects: [{project_id, visibility, created_at}]}, as
// GET /v1/admin/projects answers the operator.
func newProjectListCmd() *cobra.Command {
	var l localCmd
	c := &cobra.Command{
		Use: "list", Short: "List every project with its visibility", Args: cobra.NoArgs,
		Example: "  acrelay project list\n  acrelay project list --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
				rows, err := listAll(func(after string, limit int) ([]registry.ProjectRow, error) {
					return registry.ListProjects(ctx, st, after, limit)
				}, func(p registry.ProjectRow) string { return p.ID })
				if err != nil {
					return nil, "", fmt.Errorf("list projects: %w", err)
				}
				out, lines := make([]map[string]string, 0, len(rows)), make([]string, 0, len(rows))
				for _, p := range rows {
					at := correspondence.FormatTimestamp(p.CreatedAt)
					out = append(out, map[string]string{"project_id": p.ID, "visibility": p.Visibility, "created_at": at})
					lines = append(lines, strings.Join([]string{p.ID, p.Visibility, at}, "\t"))
				}
				return map[string]any{"projects": out}, strings.Join(lines, "\n"), nil
			})
		},
	}
	l.flags(c)
	return c
}

// newListCmd is a local "list" command over one project (and, withIdentity,
// one identity of it): list prints every row, one per line (tab-separated:
// id, status, created_at, then the rest) or, with --json, one object
// {<what>: [...]}. An unknown project is an error, not an empty list.
func newListCmd(what, short, example string, withIdentity bool,
	list func(ctx context.Context, st store.Store, projectID, identityID string) (any, string, error)) *cobra.Command {
	var l localCmd
	var projectID, identityID string
	c := &cobra.Command{
		Use: "list", Short: short, Args: cobra.NoArgs, Example: example,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
				if _, err := st.GetProject(ctx, projectID); err != nil {
					return nil, "", notFound(fmt.Errorf("project: %w", err), "project %s", projectID)
				}
				v, text, err := list(ctx, st, projectID, identityID)
				if errors.Is(err, store.ErrNotFound) {
					return nil, "", err // names what was not found
				}
				if err != nil {
					return nil, "", fmt.Errorf("list %s: %w", what, err)
				}
				return v, text, nil
			})
		},
	}
	l.flags(c)
	c.Flags().StringVar(&projectID, "project-id", "", "project id (required)")
	_ = c.MarkFlagRequired("project-id")
	if withIdentity {
		c.Flags().StringVar(&identityID, "identity-id", "", "identity id (required)")
		_ = c.MarkFlagRequired("identity-id")
	}
	return c
}

// tokenIDShape is a token id (internal/token): 26 characters of
// lowercase base32.
var tokenIDShape = regexp.MustCompile(`^[a-z2-7]{26}$`)

// notFound names what was looked up when err is store.ErrNotFound
// (`project "P": not found`) and returns any other error as it is. The
// ids are the caller's input: each is shown, quoted, only when it has the
// shape of an id (a canonical UUID, or a token id), since anything else
// may be a secret pasted in the wrong place.
func notFound(err error, format string, ids ...string) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		if correspondence.ValidUUID(id) || tokenIDShape.MatchString(id) {
			args = append(args, strconv.Quote(id))
		} else {
			args = append(args, "(not an id, not shown)")
		}
	}
	return fmt.Errorf(format+": %w", append(args, store.ErrNotFound)...)
}

// listAll pages a registry listing to its end.
func listAll[T any](list func(after string, limit int) ([]T, error), id func(T) string) ([]T, error) {
	const page = 200
	var out []T
	after := ""
	for {
		rows, err := list(after, page)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		if len(rows) < page {
			return out, nil
		}
		after = id(rows[len(rows)-1])
	}
}

func init() { rootCmd.AddCommand(newAdminCmds()...) }
