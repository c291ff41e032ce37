package federation

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/store"
)

// Courier is the courier name of the federation leases and remote cursors.
const Courier = "federation"

// Defaults of Options.
const (
	DefaultPollInterval      = 30 * time.Second
	DefaultIdlePollInterval  = 5 * time.Minute
	DefaultKeysInterval      = 2 * time.Second
	DefaultSubscriptionLease = 24 * time.Hour
	DefaultLeaseTTL          = 30 * time.Second
	// MaxPagesPerRound bounds the backfill pages one round reads.
	MaxPagesPerRound = 50
	// MaxPageBytes bounds a page's body: 200 records of at most 64 KiB
	// each, with room for receipts.
	MaxPageBytes = 16 << 20
	pageLimit    = 200
)

// Store is what a Manager needs: peer links, the registry import, the
// leases and cursors of store.Couriers. store.Store satisfies it.
type Store interface {
	Peers(ctx context.Context, projectID string) ([]store.Peer, error)
	Peer(ctx context.Context, projectID, peerID string) (store.Peer, error)
	ImportKey(ctx context.Context, projectID, source string, k store.RegistryKey) (bool, error)
	lease.Store
	TargetStates(ctx context.Context, courier, projectID string) ([]store.TargetState, error)
	AdvanceCursor(ctx context.Context, lease store.Lease, target string, seq int64) error
	ForgetTarget(ctx context.Context, courier, projectID, target string) error
	store.Refusals
	store.PeerSubscriptions
	store.Cosignatures
}

var _ Store = store.Store(nil)

// Appender is the one ingest path for foreign records
// (*ingest.Ingester).
type Appender interface {
	AppendForeign(ctx context.Context, projectID string, page []ingest.ForeignRecord) []ingest.ForeignResult
}

// Options configure a Manager. PublicURL and Holder are required.
type Options struct {
	// PublicURL is this relay's public base (no trailing slash): callbacks
	// are {PublicURL}/v1/federation/callback/{peer_id}.
	PublicURL string
	// Identity is this process's lease holder identity
	// (lease.OpenIdentity); when nil, Holder names a fresh one.
	Identity *lease.Identity
	// Holder names this process in leases when Identity is nil (unique
	// per process).
	Holder string
	// LeaseTTL is the federation lease per project; renewed every third.
	LeaseTTL time.Duration
	// PollInterval: backfill while the subscription is not active.
	PollInterval time.Duration
	// IdlePollInterval: backfill while it is (a safety net for lost
	// deliveries).
	IdlePollInterval time.Duration
	// KeysInterval: the registry's conditional poll.
	KeysInterval time.Duration
	// SubscriptionLease is the hub.lease_seconds asked for.
	SubscriptionLease time.Duration
	// WitnessInterval: how often a link reads and checks the remote's
	// checkpoint besides after each backfill round (witness.go);
	// DefaultWitnessInterval when 0.
	WitnessInterval time.Duration
	// HTTP sends every request to remotes; nil is a client with a 30 s
	// timeout that never follows redirects (the token stays with the
	// remote the operator named).
	HTTP   *http.Client
	Logger *slog.Logger
}

// Manager runs the peer links of the projects whose federation lease it
// holds. Start it with Run; Refresh and ServeCallback are safe for
// concurrent use.
type Manager struct {
	st   Store
	in   Appender
	opt  Options
	log  *slog.Logger
	wake chan struct{}

	// keeper holds the federation leases (package lease): a link runs
	// only while its project's lease is held and safe.
	keeper *lease.Keeper

	mu      sync.Mutex
	links   map[string]*link        // by peer id
	watches map[string]linkLeaseCtx // by peer id: the lease context each link runs under

	shared callbackLinks // the callbacks of links run elsewhere (callback.go)

	wmu     sync.Mutex
	wsigner note.Signer // this relay's witness key, once read (witness.go)
	// refused: per peer id, the remotes that answered 403 to our
	// cosignatures (witness.go submitCosignature): said once per process,
	// then retried with a backoff, across the link's restarts.
	refused map[string]*cosignRefusal
}

// linkLeaseCtx is the lease context of a running link (lease.Keeper
// Context): the link is stopped when it ends.
type linkLeaseCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool // the AfterFunc that stops the link
}

// New returns a Manager. It starts no goroutines.
func New(st Store, in Appender, opt Options) *Manager {
	if opt.LeaseTTL <= 0 {
		opt.LeaseTTL = DefaultLeaseTTL
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = DefaultPollInterval
	}
	if opt.IdlePollInterval <= 0 {
		opt.IdlePollInterval = DefaultIdlePollInterval
	}
	if opt.KeysInterval <= 0 {
		opt.KeysInterval = DefaultKeysInterval
	}
	if opt.SubscriptionLease <= 0 {
		opt.SubscriptionLease = DefaultSubscriptionLease
	}
	if opt.WitnessInterval <= 0 {
		opt.WitnessInterval = DefaultWitnessInterval
	}
	if opt.HTTP == nil {
		opt.HTTP = &http.Client{Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{st: st, in: in, opt: opt, log: opt.Logger.With("courier", Courier),
		wake: make(chan struct{}, 1), links: map[string]*link{}, watches: map[string]linkLeaseCtx{}}
	id := opt.Identity
	if id == nil {
		id = &lease.Identity{ID: opt.Holder}
	}
	m.keeper = lease.New(st, lease.Options{Name: Courier, Holder: id, TTL: opt.LeaseTTL,
		Wanted: m.peerProjects, ListEvery: opt.LeaseTTL / 3, Logger: m.log})
	return m
}

// peerProjects lists the projects that have peer links: the leases the
// keeper wants.
func (m *Manager) peerProjects(ctx context.Context) ([]string, error) {
	peers, err := m.st.Peers(ctx, "")
	if err != nil {
		return nil, err
	}
	var projects []string
	seen := map[string]bool{}
	for _, p := range peers {
		if !seen[p.ProjectID] {
			seen[p.ProjectID] = true
			projects = append(projects, p.ProjectID)
		}
	}
	return projects, nil
}

// Refresh makes Run look at the peer links again now (a link was made or
// removed), and asks for projectID's lease ("" for none in particular).
func (m *Manager) Refresh(projectID string) {
	if projectID != "" {
		m.keeper.Want(projectID, true)
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run takes and renews the leases of the projects that have peer links
// (lease.Keeper) and runs their links until ctx ends; then it stops them
// and releases its leases. A link runs under its lease's context: it is
// stopped when the lease is lost or not renewed by its safe time. It
// returns ctx's cause.
func (m *Manager) Run(ctx context.Context) error {
	// The keeper outlives ctx: it releases the leases once the links
	// (whose cursor writes are fenced) have stopped.
	// The witness key is created at first start (witness.go), not at the
	// first cosignature.
	if _, err := m.witnessSigner(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("federation: witness key", "err", err)
	}
	kctx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	held, changed := m.keeper.Held() // before Run: its first report is not missed
	var keeper sync.WaitGroup
	keeper.Go(func() { _ = m.keeper.Run(kctx) })
	t := time.NewTicker(m.opt.LeaseTTL / 3)
	defer t.Stop()
	wakes := m.st.SubscribePeerWakes()
	defer wakes.Close()
	for {
		select {
		case <-ctx.Done():
			m.stopAll()
			stopKeeper()
			keeper.Wait()
			return context.Cause(ctx)
		case <-changed:
			held, changed = m.keeper.Held()
		case <-m.wake:
		case <-t.C:
		case <-wakes.Ready():
			m.backfillWoken(wakes.Take())
			continue
		}
		m.reconcile(ctx, held)
	}
}

// backfillWoken starts a backfill round at once on each link of ws this
// process runs (every link for the zero PeerWake): another process that
// serves the link's callback saw a gap (store.PeerWakes).
func (m *Manager) backfillWoken(ws []store.PeerWake) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range ws {
		if w == (store.PeerWake{}) {
			for _, l := range m.links {
				l.backfillNow()
			}
			continue
		}
		if l := m.links[w.PeerID]; l != nil && l.peer.ProjectID == w.ProjectID {
			l.backfillNow()
		}
	}
}

func (m *Manager) reconcile(ctx context.Context, held lease.Set) {
	peers, err := m.st.Peers(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("federation: list peers", "err", err)
		}
		return
	}
	leases := make(map[string]store.Lease, len(held))
	for _, h := range held {
		leases[h.ProjectID] = h.Lease
	}
	want := map[string]store.Peer{}
	for _, p := range peers {
		if _, ok := leases[p.ProjectID]; ok {
			want[p.ID] = p
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, l := range m.links {
		p, ok := want[id]
		lease := leases[l.peer.ProjectID]
		w := m.watches[id]
		if !ok || lease.Fence != l.fence() || p.Token != l.peer.Token || w.ctx.Err() != nil {
			l.stop()
			m.unwatch(id)
			delete(m.links, id)
			if _, stillPeer := findPeer(peers, id); !stillPeer {
				go m.forget(l) // the link was removed: its cursor goes too
			}
			continue
		}
		l.setLease(lease)
	}
	for id, p := range want {
		if _, ok := m.links[id]; ok {
			continue
		}
		lctx, cancel := m.keeper.Context(ctx, leases[p.ProjectID])
		if lctx.Err() != nil {
			cancel() // not safe now: the next report starts it
			continue
		}
		l := newLink(m, p, leases[p.ProjectID])
		m.links[id] = l
		m.watches[id] = linkLeaseCtx{ctx: lctx, cancel: cancel, stop: context.AfterFunc(lctx, l.stop)}
		l.start(ctx)
		m.log.Info("federation: link started", "project_id", p.ProjectID, "peer_id", p.ID, "remote_url", p.RemoteURL)
	}
}

// unwatch ends the lease context of link id. Called with m.mu held.
func (m *Manager) unwatch(id string) {
	if w, ok := m.watches[id]; ok {
		w.stop()
		w.cancel()
		delete(m.watches, id)
	}
}

func findPeer(peers []store.Peer, id string) (store.Peer, bool) {
	for _, p := range peers {
		if p.ID == id {
			return p, true
		}
	}
	return store.Peer{}, false
}

func (m *Manager) forget(l *link) {
	l.wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.unsubscribe(ctx)
	if err := m.st.ForgetTarget(ctx, Courier, l.peer.ProjectID, l.peer.ID); err != nil {
		m.log.Warn("federation: forget cursor", "peer_id", l.peer.ID, "err", err)
	}
}

// stopAll stops every link and waits for it; the keeper releases the
// leases after.
func (m *Manager) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, l := range m.links {
		l.stop()
		m.unwatch(id)
		delete(m.links, id)
		l.wait()
	}
}

// ServeCallback serves the WebSub callback of peer link peerID (see
// relay.PeerLinks), whichever process runs the link: its subscriber
// state is in the store (callback.go). A delivery to a link that no
// longer exists is 410 Gone (the hub drops the subscription).
func (m *Manager) ServeCallback(w http.ResponseWriter, r *http.Request, peerID string) {
	m.mu.Lock()
	l := m.links[peerID]
	m.mu.Unlock()
	if l != nil {
		l.sub.ServeHTTP(w, r)
		return
	}
	m.serveShared(w, r, peerID)
}

// Status is what this process knows of a running link (LinkStatus), nil
// when it does not run it.
func (m *Manager) Status(peerID string) any {
	m.mu.Lock()
	l := m.links[peerID]
	m.mu.Unlock()
	if l == nil {
		return nil
	}
	s := l.status()
	return &s
}

// SubscriptionExpired is LinkStatus.Subscription of a subscription that
// was verified but whose lease ended before a renewal was: the remote's hub
// no longer delivers, backfill polls every PollInterval, and the link keeps
// re-subscribing every PollInterval until the remote verifies again.
const SubscriptionExpired = "expired"

// LinkStatus reports one running link.
type LinkStatus struct {
	Running      bool   `json:"running"`
	RemoteCursor string `json:"remote_cursor"` // the remote received_seq up to which every record was handled
	Subscription string `json:"subscription"`  // client.WebSub* state or SubscriptionExpired, "" before the first request
	Stored       int64  `json:"stored"`        // records appended here
	Duplicates   int64  `json:"duplicates"`    // records already stored (no-ops)
	Refused      int64  `json:"refused"`       // records refused since the link started here (a kept one may be stored later: GET …/peers/{peer_id} has the refusals)
	KeysImported int64  `json:"keys_imported"` // registry rows that changed something here
	LastError    string `json:"last_error,omitempty"`
	// Witnessed is the size of the remote's checkpoint this relay cosigned
	// last (since the link started here; 0 before).
	Witnessed int64 `json:"witnessed_size"`
	// WitnessError is the last witnessing failure, "" once it passes.
	WitnessError string `json:"witness_error,omitempty"`
	// SplitView: the remote showed two histories; the link stopped
	// (Running is false) and the evidence is stored.
	SplitView bool `json:"split_view,omitempty"`
}
