package couriers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Export is a courier that appends each project's records, one RFC 8785
// {event, receipt} JSON object per line, to <Dir>/<project_id>.jsonl and
// fsyncs after each batch: an append-only archive that any tool can tail.
// Lines may repeat after a crash (at-least-once); de-duplicate by
// event.event_id.
type Export struct {
	Dir  string
	Feed store.Feed // lists the projects (every project has one target)
}

// Name implements Courier.
func (Export) Name() string { return "export" }

// Projects implements Courier: every project of the store.
func (e Export) Projects(ctx context.Context) ([]string, error) {
	var all []string
	after := ""
	for {
		ids, err := e.Feed.ProjectIDs(ctx, after, 500)
		if err != nil {
			return nil, err
		}
		all = append(all, ids...)
		if len(ids) < 500 {
			return all, nil
		}
		after = ids[len(ids)-1]
	}
}

// Targets implements Courier: one file per project.
func (Export) Targets(context.Context, string) ([]Target, error) { return []Target{{}}, nil }

// Deliver implements Courier.
func (e Export) Deliver(_ context.Context, projectID string, _ Target, records []store.Record) error {
	if !correspondence.ValidUUID(projectID) { // never a path outside Dir
		return fmt.Errorf("export: project id is not a UUID")
	}
	f, err := os.OpenFile(filepath.Join(e.Dir, projectID+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	var buf []byte
	for _, rec := range records {
		buf = append(buf, rec.ImmutableJSON()...)
		buf = append(buf, '\n')
	}
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
