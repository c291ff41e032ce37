package relay

import (
	"context"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Store is the part of the store a Server reads and writes, grouped by
// the store interface each method comes from (see there for semantics and
// errors); store.Store satisfies it. A Server also asks its store, by
// type assertion, for store.HealthChecker (/healthz, /readyz) and
// store.MigrationChecker (/readyz).
type Store interface {
	// The registry, whole: the admin routes' projects, identities, keys
	// and tokens (registry.CreateProject and its kin take a
	// store.Registry), token checks on every request, and the signing
	// keys ingest verifies appends against.
	store.Registry

	// store.Log: appends (through ingest) and the event log's reads.
	Append(ctx context.Context, ev *correspondence.Event, canonical []byte) (store.AppendResult, error)
	Events(ctx context.Context, q store.EventQuery) (store.EventPage, error)
	Head(ctx context.Context, projectID string) (seq int64, at time.Time, err error)
	// Projections (projection.go, the web view).
	ClaimsSnapshot(ctx context.Context, q store.ClaimsQuery) (store.ClaimsSnapshot, error)
	VoiceSnapshot(ctx context.Context, q store.VoiceQuery) (store.VoiceSnapshot, error)
	LineageWatermark(ctx context.Context, projectID string) (incomplete bool, changedAt time.Time, err error)
	ReconcileLineage(ctx context.Context, projectID string, max int) (incomplete bool, err error)

	// store.Feed: every project (project listings) and records in receipt
	// order (the web view, wake frames).
	ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)
	RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]store.Record, error)

	// store.Advances: the wake streams and the web view's live updates.
	SubscribeAdvances() *store.AdvanceSubscription

	// store.Archives: the feed and archive pages of topics (topics.go).
	CountRecords(ctx context.Context, sel store.Selection) (int64, error)
	RecordsAt(ctx context.Context, sel store.Selection, offset int64, limit int) ([]store.Record, error)

	// store.Handoffs: the handoff routes (handoffs.go).
	CreateHandoff(ctx context.Context, v store.HandoffVersion) (current store.HandoffVersion, created bool, err error)
	AppendHandoffVersion(ctx context.Context, v store.HandoffVersion) (store.HandoffVersion, error)
	Handoff(ctx context.Context, projectID, handoffID string) (store.HandoffVersion, error)
	Handoffs(ctx context.Context, q store.HandoffQuery) (store.HandoffPage, error)
	HandoffVersions(ctx context.Context, projectID, handoffID string, afterVersion int64, limit int) (versions []store.HandoffVersion, hasMore bool, err error)
	HandoffEvents(ctx context.Context, projectID, handoffID string) (ids []string, truncated bool, err error)

	// store.Cosignatures with the tree head and log key of store.Tree:
	// witnessing (witness.go, ready.go).
	witnessStore
	// store.LogWitnesses: the logs this relay witnesses (witness.go).
	WitnessedLog(ctx context.Context, origin string) (store.WitnessedLog, error)
	SaveWitnessedLog(ctx context.Context, l store.WitnessedLog, oldSize int64) (bool, error)

	// store.Visibility: public projects (public.go, admin.go).
	ProjectVisibility(ctx context.Context, projectID string) (string, error)
	SetProjectVisibility(ctx context.Context, projectID, visibility string) error

	// store.FeedTokens: feed capabilities (feeds.go).
	CreateFeedToken(ctx context.Context, t store.FeedToken) (store.FeedToken, error)
	FeedToken(ctx context.Context, id string) (store.FeedToken, error)
	RevokeFeedToken(ctx context.Context, projectID, id string) error

	// store.WebSubScans: the subscription gauge (metrics.go), one
	// counting query per scrape.
	CountSubscriptionStates(ctx context.Context) (map[string]int, error)

	// store.Matrix: a project's room bindings (appservice.go).
	MatrixBindings(ctx context.Context, projectID string) ([]store.MatrixBinding, error)

	// store.Federation: peer links (peers.go), the key registry
	// (keys.go) and project events for remotes (project_events.go).
	CreatePeer(ctx context.Context, p store.Peer) (store.Peer, error)
	Peer(ctx context.Context, projectID, peerID string) (store.Peer, error)
	Peers(ctx context.Context, projectID string) ([]store.Peer, error)
	RemovePeer(ctx context.Context, projectID, peerID string) error
	SummarizeRefusals(ctx context.Context, projectID, peerID string) (store.RefusalSummary, error)
	RegistryKeys(ctx context.Context, projectID, afterKeyID string, limit int) ([]store.RegistryKey, error)
	ProjectEvents(ctx context.Context, projectID string, after int64, limit int) (store.EventPage, error)

	// store.Tree: the verifiable log's reads (log.go); entry bundles come
	// from RecordsAfter.
	TreeHead(ctx context.Context, projectID string) (store.TreeHead, error)
	ReadTiles(ctx context.Context, projectID string, tiles []tlog.Tile) ([][]byte, error)

	// store.UISessions: the web view's sessions (ui.go).
	CreateUISession(ctx context.Context, s store.UISession) error
	UISession(ctx context.Context, hash []byte) (store.UISession, error)
	DeleteUISession(ctx context.Context, hash []byte) error
}

var _ Store = store.Store(nil)
