package store

import "context"

// ArchiveSize is the number of entries of every RFC 5005 archive document:
// archive k holds the records of a selection at positions [k·ArchiveSize,
// (k+1)·ArchiveSize) in receipt order, and only complete archives exist.
const ArchiveSize = 200

// Selection is one project's records of one repository, optionally of one
// thread: what a topic, a feed or an archive shows.
type Selection struct {
	ProjectID    string
	RepositoryID string
	ThreadID     string // "" for every thread
}

// Archives reads a selection by position (RFC 5005 archived feeds). Both
// methods walk the existing repository and thread indexes: no index exists
// for positions, so the cost grows with the selection's length (index-only
// in both dialects), which archive caching makes rare.
type Archives interface {
	// CountRecords returns how many records the selection holds (0 for an
	// unknown project or repository). Errors: ErrUnavailable.
	CountRecords(ctx context.Context, sel Selection) (int64, error)
	// RecordsAt returns at most limit (1–ArchiveSize+1) records of the
	// selection at 0-based positions offset, offset+1, … in ascending
	// received_seq, fewer when the selection ends sooner. Errors:
	// ErrUnavailable.
	RecordsAt(ctx context.Context, sel Selection, offset int64, limit int) ([]Record, error)
}
