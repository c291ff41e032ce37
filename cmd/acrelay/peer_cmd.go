package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
)

// Federation (spec/federation.md): acrelay peer add|list|remove on the
// local store, and the serve flags of the peer links. A running relay
// picks up links made or removed here at its next lease renewal (a third
// of --courier-lease); the admin routes (POST/GET/DELETE
// /v1/admin/projects/{project_id}/peers) apply at once.

type peerOut struct {
	PeerID       string  `json:"peer_id"`
	ProjectID    string  `json:"project_id"`
	RemoteURL    string  `json:"remote_url"`
	RepositoryID *string `json:"repository_id"`
	Token        string  `json:"token"`
	CreatedAt    string  `json:"created_at"`
}

func peerOutOf(p store.Peer) peerOut {
	out := peerOut{PeerID: p.ID, ProjectID: p.ProjectID, RemoteURL: p.RemoteURL, Token: "[redacted]",
		CreatedAt: correspondence.FormatTimestamp(p.CreatedAt)}
	if p.RepositoryID != "" {
		out.RepositoryID = &p.RepositoryID
	}
	return out
}

func newPeerCmd() *cobra.Command {
	peer := &cobra.Command{Use: "peer", Short: "Manage federation peer links in the local store"}
	{
		var l localCmd
		var project, remote, token, tokenFile, repo string
		c := &cobra.Command{
			Use: "add", Short: "Mirror a shared project from a remote relay (the project must exist here with the same id)", Args: cobra.NoArgs,
			Example: "  acrelay peer add --project P --remote https://relay-b.example --token-file /run/secrets/b-read\n" +
				"  ACRELAY_PEER_TOKEN=... acrelay peer add --project P --remote https://relay-b.example --repository repo-1",
			RunE: func(cmd *cobra.Command, _ []string) error {
				if token == "" && tokenFile != "" {
					b, err := readSecretFile(tokenFile)
					if err != nil {
						return fmt.Errorf("--token-file: %w", err)
					}
					token = b
				}
				if token == "" {
					v, err := secretFromEnv("ACRELAY_PEER_TOKEN")
					if err != nil {
						return err
					}
					token = strings.TrimSpace(v)
				}
				if token == "" {
					return fmt.Errorf("--token, --token-file or ACRELAY_PEER_TOKEN: a read token of the project on the remote relay is required")
				}
				u, ok := relay.NormalizeRemoteURL(remote)
				if !ok {
					return fmt.Errorf("--remote %q: want an absolute http or https URL without userinfo, query or fragment", remote)
				}
				if repo != "" && !correspondence.ValidOpaqueID(repo) {
					return fmt.Errorf("--repository %q: not a valid repository id", repo)
				}
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					p, err := st.CreatePeer(ctx, store.Peer{ID: uuid.NewString(), ProjectID: project, RemoteURL: u, Token: token, RepositoryID: repo})
					if err != nil {
						return nil, "", fmt.Errorf("peer add: %w", err)
					}
					return peerOutOf(p), p.ID, nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&project, "project", "", "the shared project's id (the same on both relays)")
		c.Flags().StringVar(&remote, "remote", "", "the remote relay's public URL")
		c.Flags().StringVar(&token, "token", "", "a read token of the project on the remote relay (prefer --token-file or ACRELAY_PEER_TOKEN: flags show in ps)")
		c.Flags().StringVar(&tokenFile, "token-file", "", "file holding the remote read token")
		c.Flags().StringVar(&repo, "repository", "", "mirror only this repository (default: the whole project)")
		_ = c.MarkFlagRequired("project")
		_ = c.MarkFlagRequired("remote")
		peer.AddCommand(c)
	}
	{
		var l localCmd
		var project string
		c := &cobra.Command{
			Use: "list", Short: "List peer links (tokens redacted)", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					peers, err := st.Peers(ctx, project)
					if err != nil {
						return nil, "", err
					}
					out := make([]peerOut, 0, len(peers))
					var lines []string
					for _, p := range peers {
						out = append(out, peerOutOf(p))
						repo := "*"
						if p.RepositoryID != "" {
							repo = p.RepositoryID
						}
						lines = append(lines, strings.Join([]string{p.ID, p.ProjectID, p.RemoteURL, repo}, "\t"))
					}
					return map[string]any{"peers": out}, strings.Join(lines, "\n"), nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&project, "project", "", "only this project's links (default: every project's)")
		peer.AddCommand(c)
	}
	{
		var l localCmd
		var project string
		c := &cobra.Command{
			Use: "remove PEER_ID", Short: "Remove a peer link (its imported keys and records stay)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
					if err := st.RemovePeer(ctx, project, args[0]); err != nil {
						return nil, "", fmt.Errorf("peer remove: %w", err)
					}
					return map[string]string{"peer_id": args[0], "removed": "true"}, "", nil
				})
			},
		}
		l.flags(c)
		c.Flags().StringVar(&project, "project", "", "the link's project")
		_ = c.MarkFlagRequired("project")
		peer.AddCommand(c)
	}
	return peer
}

func init() { rootCmd.AddCommand(newPeerCmd()) }
