package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/store"
)

// newVisibilityCmd is "acrelay project visibility --project-id P
// public|private": who may read a project (spec/websub.md "Topics").
func newVisibilityCmd() *cobra.Command {
	var l localCmd
	var projectID string
	c := &cobra.Command{
		Use:   "visibility public|private",
		Short: "Make a project's reads public (no token) or private (a read token)",
		Args:  cobra.ExactArgs(1),
		Example: "  acrelay project visibility --project-id 11111111-1111-4111-8111-111111111111 public\n" +
			"  acrelay project visibility --project 11111111-1111-4111-8111-111111111111 private",
		RunE: func(cmd *cobra.Command, args []string) error {
			vis := args[0]
			if vis != store.VisibilityPublic && vis != store.VisibilityPrivate {
				return errors.New(`visibility must be "public" or "private"`)
			}
			if projectID == "" {
				return errors.New("--project-id is required")
			}
			return l.run(cmd, func(ctx context.Context, st store.Store) (any, string, error) {
				if err := st.SetProjectVisibility(ctx, projectID, vis); err != nil {
					return nil, "", notFound(err, "project %s", projectID)
				}
				return map[string]string{"project_id": projectID, "visibility": vis}, fmt.Sprintf("%s %s", projectID, vis), nil
			})
		},
	}
	l.flags(c)
	c.Flags().StringVar(&projectID, "project-id", "", "project id (required)")
	c.Flags().StringVar(&projectID, "project", "", "the same as --project-id")
	return c
}
