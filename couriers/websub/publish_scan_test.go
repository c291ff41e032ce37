package websub_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// projectReads counts the publish courier's reads of projects.
type projectReads struct {
	store.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *projectReads) count(m string) {
	c.mu.Lock()
	c.calls[m]++
	c.mu.Unlock()
}

func (c *projectReads) ProjectIDs(ctx context.Context, after string, limit int) ([]string, error) {
	c.count("ProjectIDs")
	return c.Store.ProjectIDs(ctx, after, limit)
}

func (c *projectReads) ProjectVisibility(ctx context.Context, pid string) (string, error) {
	c.count("ProjectVisibility")
	return c.Store.ProjectVisibility(ctx, pid)
}

func (c *projectReads) PublicProjectIDs(ctx context.Context, after string, limit int) ([]string, error) {
	c.count("PublicProjectIDs")
	return c.Store.PublicProjectIDs(ctx, after, limit)
}

// TestPublishProjectsIsOneQuery: the publish courier's listing of 30
// projects, 10 public, is one query for the public ones (it was a
// visibility read per project).
func TestPublishProjectsIsOneQuery(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		ctx := context.Background()
		st := &projectReads{Store: open(t), calls: map[string]int{}}
		var public []string
		for i := range 30 {
			p, err := st.Store.CreateProject(ctx, storetest.NewUUID())
			if err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				if err := st.Store.SetProjectVisibility(ctx, p.ID, store.VisibilityPublic); err != nil {
					t.Fatal(err)
				}
				public = append(public, p.ID)
			}
		}
		slices.Sort(public)
		pub := &websub.Publisher{Hubs: []string{"https://hub.example/"}, Store: st}
		got, err := pub.Projects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, public) {
			t.Fatalf("Projects = %v, want the public %v", got, public)
		}
		if want := map[string]int{"PublicProjectIDs": 1}; !maps.Equal(st.calls, want) {
			t.Fatalf("reads = %v, want %v", st.calls, want)
		}
	})
}
