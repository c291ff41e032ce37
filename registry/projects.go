package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

// ProjectRow is one project of a listing: what an operator needs to find a
// project id again (spec §10; spec/websub.md "Topics" for visibility).
type ProjectRow struct {
	store.Project
	Visibility string // store.VisibilityPrivate or store.VisibilityPublic
}

// ProjectLister is the part of the store ListProjects reads.
type ProjectLister interface {
	ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)
	GetProject(ctx context.Context, id string) (store.Project, error)
	ProjectVisibility(ctx context.Context, projectID string) (string, error)
}

// ListProjects pages projects in ascending id order strictly after afterID
// ("" for the first page), at most limit, with their creation time and
// visibility. A project is read once per row: listings are an operator's
// occasional look-up, not a hot path. Errors: the store's
// (store.ErrUnavailable).
func ListProjects(ctx context.Context, st ProjectLister, afterID string, limit int) ([]ProjectRow, error) {
	ids, err := st.ProjectIDs(ctx, afterID, limit)
	if err != nil {
		return nil, err
	}
	rows := make([]ProjectRow, 0, len(ids))
	for _, id := range ids {
		p, err := st.GetProject(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // projects are never deleted; tolerate it anyway
		}
		if err != nil {
			return nil, fmt.Errorf("project %s: %w", id, err)
		}
		vis, err := st.ProjectVisibility(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("project %s visibility: %w", id, err)
		}
		rows = append(rows, ProjectRow{Project: p, Visibility: vis})
	}
	return rows, nil
}
