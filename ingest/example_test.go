package ingest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
)

// A non-HTTP caller, such as a Matrix courier taking a signed submission
// from a room bound to a project, appends the submission's bytes for the
// room's project and decides from the typed error what to tell the room.
func ExampleIngester_Append() {
	var st store.Store // opened by cmd/acrelay: store/sqlite or store/postgres
	in := ingest.New(st, ingest.Options{})
	submit := func(ctx context.Context, roomProjectID string, raw []byte) string {
		res, err := in.Append(ctx, roomProjectID, raw)
		switch {
		case err == nil && res.Created:
			return fmt.Sprintf("stored as received_seq %d", res.Record.ReceivedSeq)
		case err == nil:
			return "already stored" // an exact retry: the original receipt
		case errors.Is(err, ingest.ErrAppendUnavailable):
			return "try again later" // the same bytes; it is idempotent
		case errors.Is(err, ingest.ErrProjectMismatch), errors.Is(err, ingest.ErrSenderNotActive),
			errors.Is(err, correspondence.ErrSignatureInvalid):
			return "refused: " + err.Error()
		default:
			return "invalid: " + err.Error()
		}
	}
	_ = submit
}
