package federation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/acrelay/acrelay/couriers"
	websubcourier "github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/federation"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
	acrtlog "github.com/acrelay/acrelay/tlog"
)

// These tests run real relays (relay.Server with the embedded hub, the
// WebSub courier and a federation.Manager) on loopback listeners over real
// stores, SQLite and (when ACRELAY_TEST_DATABASE_URL is set) PostgreSQL.

const operatorToken = "federation-test-operator"

var ctx = context.Background()

// timing of the test relays: short polls and leases.
type timing struct {
	poll, idlePoll, keys, subLease time.Duration
	// transport, when set, carries the link's requests to remotes (a
	// test's partition).
	transport http.RoundTripper
	// verifyDelay, when set, delays this relay's answers to a hub's
	// verification of intent (GET on a peer link's callback): the link's
	// subscription becomes active that much later.
	verifyDelay time.Duration
	// dropPush, when set, makes this relay acknowledge (204) and drop the
	// next delivery to a peer link's callback while it is true, then
	// clears it: a push that is lost.
	dropPush *atomic.Bool
	// publicURL, when set, is the public URL the federation Manager
	// names in callbacks (a load balancer in front of several relays).
	publicURL string
	// noLinks: the federation Manager takes no lease and runs no link; it
	// only serves callbacks.
	noLinks bool
	// log: the relay keeps its verifiable log (a log key in its store, the
	// sequencer, /v1/log-key) and its links witness their remotes' logs
	// every 150 ms.
	log bool
	// logTo, when set, receives the relay's log lines (JSON, Info and up).
	logTo io.Writer
}

var fast = timing{poll: 150 * time.Millisecond, idlePoll: time.Second, keys: 200 * time.Millisecond, subLease: time.Hour}

type testRelay struct {
	t       *testing.T
	name    string
	st      store.Store
	public  string
	srv     *httptest.Server
	fed     *federation.Manager
	logKey  acrtlog.LogKey // when timing.log
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
}

// storeKind names a dialect: "sqlite" or "postgres".
func openStore(t *testing.T, kind, path string) store.Store {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if kind == "postgres" {
		if path == "" {
			path = pgtest.FreshDatabase(t)
		}
		db, err := postgres.Open(ctx, path, log)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	if path == "" {
		path = tempDB(t, "relay")
	}
	db, err := sqlite.Open(ctx, path, log)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// pgOr returns "postgres" when a test database is configured, else sqlite.
func pgOr() string {
	if os.Getenv("ACRELAY_TEST_DATABASE_URL") != "" {
		return "postgres"
	}
	return "sqlite"
}

// engines is SQLite, and PostgreSQL when a test database is configured.
func engines() []string {
	if pgOr() == "postgres" {
		return []string{"sqlite", "postgres"}
	}
	return []string{"sqlite"}
}

// startRelay serves st on addr ("127.0.0.1:0" for a fresh port).
func startRelay(t *testing.T, name string, st store.Store, addr string, tm timing) *testRelay {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("ACRELAY_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("relay", name)
	}
	if tm.logTo != nil {
		log = slog.New(slog.NewJSONHandler(tm.logTo, &slog.HandlerOptions{Level: slog.LevelInfo})).With("relay", name)
	}
	var logKey acrtlog.LogKey
	witnessEvery := time.Duration(0)
	if tm.log {
		skey, err := st.LogKey(ctx, func() (string, error) {
			s, _, err := acrtlog.NewLogKey(acrtlog.KeyName(public))
			return s, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if logKey, err = acrtlog.OpenLogKey(skey); err != nil {
			t.Fatal(err)
		}
		witnessEvery = 150 * time.Millisecond
	}
	guard, err := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	holder := name + "-" + storetest.NewUUID()[:8]
	var srv *relay.Server
	var runner *couriers.Runner
	h := hub.New(st, hub.Options{PublicURL: public, LeaseMin: time.Second, LeaseDefault: time.Hour, LeaseMax: 24 * time.Hour,
		Guard: guard, Logger: log,
		Authorize: func(r *http.Request, projectID string) (string, bool, error) { return srv.AuthorizeTopic(r, projectID) },
		Refresh:   func(projectID string) { runner.Refresh(projectID) }})
	runner = couriers.NewRunner(st, &websubcourier.Courier{Store: st, Client: guard.HTTPClient(), PublicURL: public, Denier: h, Logger: log},
		couriers.Options{Holder: holder, LeaseTTL: 3 * time.Second, Logger: log,
			Backoff: couriers.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}})
	fedPublic := public
	if tm.publicURL != "" {
		fedPublic = tm.publicURL
	}
	fed := federation.New(st, ingest.New(st, ingest.Options{}), federation.Options{PublicURL: fedPublic, Holder: holder,
		LeaseTTL: 3 * time.Second, PollInterval: tm.poll, IdlePollInterval: tm.idlePoll, KeysInterval: tm.keys,
		SubscriptionLease: tm.subLease, WitnessInterval: witnessEvery, Logger: log,
		HTTP: &http.Client{Timeout: 2 * time.Second, Transport: tm.transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}})
	srv = relay.New(st, relay.Config{PublicURL: public, OperatorToken: operatorToken, Logger: log, Hub: h,
		TokenRevoked: h.DenyRevoked, Peers: fed, LogVerifierKey: logKey.VerifierKey})
	handler := srv.Handler()
	if d, drop := tm.verifyDelay, tm.dropPush; d > 0 || drop != nil {
		inner := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, relay.CallbackPath) {
				switch {
				case r.Method == http.MethodGet:
					time.Sleep(d)
				case drop != nil && drop.CompareAndSwap(true, false):
					_, _ = io.Copy(io.Discard, r.Body)
					w.WriteHeader(http.StatusNoContent)
					return
				}
			}
			inner.ServeHTTP(w, r)
		})
	}
	hs := httptest.NewUnstartedServer(handler)
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	r := &testRelay{t: t, name: name, st: st, public: public, srv: hs, fed: fed, logKey: logKey}
	bg, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.wg.Go(func() { _ = runner.Run(bg) })
	r.wg.Go(func() { _ = h.Run(bg) })
	if !tm.noLinks {
		r.wg.Go(func() { _ = fed.Run(bg) })
	}
	if tm.log {
		seq := sequencer.New(st, sequencer.Options{PublicURL: public, Key: logKey, Logger: log})
		r.wg.Go(func() { _ = seq.Run(bg) })
	}
	t.Cleanup(r.stop)
	return r
}

// stop ends the relay (its store stays open).
func (r *testRelay) stop() {
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel()
	r.srv.CloseClientConnections()
	r.srv.Close()
	r.wg.Wait()
}

// project creates the shared project pid on r and returns a read token.
func (r *testRelay) project(pid string) string {
	r.t.Helper()
	if _, err := r.st.CreateProject(ctx, pid); err != nil {
		r.t.Fatal(err)
	}
	_, tok, err := registry.CreateToken(ctx, r.st, pid, []string{store.ScopeRead})
	if err != nil {
		r.t.Fatal(err)
	}
	return tok
}

// appendToken creates an append token of pid on r.
func (r *testRelay) appendToken(pid string) string {
	r.t.Helper()
	_, tok, err := registry.CreateToken(ctx, r.st, pid, []string{store.ScopeAppend, store.ScopeRead})
	if err != nil {
		r.t.Fatal(err)
	}
	return tok
}

// do sends one request with a bearer token and returns status and body.
func (r *testRelay) do(method, path, token string, body any) (int, []byte) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(ctx, method, r.public+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// peer links r to remote for pid (the whole project, or repo).
func (r *testRelay) peer(pid string, remote *testRelay, remoteToken, repo string) string {
	r.t.Helper()
	body := map[string]any{"remote_url": remote.public, "token": remoteToken}
	if repo != "" {
		body["repository_id"] = repo
	}
	status, b := r.do("POST", "/v1/admin/projects/"+pid+"/peers", operatorToken, body)
	if status != http.StatusCreated {
		r.t.Fatalf("peer add on %s: %d %s", r.name, status, b)
	}
	var out struct {
		PeerID string `json:"peer_id"`
		Token  string `json:"token"`
	}
	_ = json.Unmarshal(b, &out)
	if out.Token != "[redacted]" || bytes.Contains(b, []byte(remoteToken)) {
		r.t.Fatalf("peer add answer shows the token: %s", b)
	}
	return out.PeerID
}

// post appends a signed event through r's HTTP POST.
func (r *testRelay) post(token string, raw []byte) {
	r.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", r.public+"/v1/correspondence/events", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Errorf("post on %s: %v", r.name, err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		r.t.Errorf("post on %s: %d %s", r.name, resp.StatusCode, b)
	}
}

// eventIDs reads every event id of pid stored on r, sorted.
func (r *testRelay) eventIDs(pid string) []string {
	r.t.Helper()
	var ids []string
	var after int64
	for {
		page, err := r.st.ProjectEvents(ctx, pid, after, 200)
		for try := 0; err != nil && try < 5; try++ {
			// A read may meet a transient store error on a loaded machine
			// (the relays write all the while): try again before failing.
			r.t.Logf("read %s's events: %v (trying again)", r.name, err)
			time.Sleep(100 * time.Millisecond)
			page, err = r.st.ProjectEvents(ctx, pid, after, 200)
		}
		if err != nil {
			r.t.Fatal(err)
		}
		for _, rec := range page.Records {
			ids = append(ids, rec.EventID)
			after = rec.ReceivedSeq
		}
		if !page.HasMore {
			break
		}
	}
	sort.Strings(ids)
	return ids
}

func (r *testRelay) head(pid string) int64 {
	r.t.Helper()
	seq, _, err := r.st.Head(ctx, pid)
	if err != nil {
		r.t.Fatal(err)
	}
	return seq
}

// eventually polls cond every 50ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %s", what, d, last)
}

// converged waits until every relay holds the same event ids, want of them.
func converged(t *testing.T, pid string, want int, d time.Duration, rs ...*testRelay) {
	t.Helper()
	eventually(t, d, "convergence", func() (bool, string) {
		first := rs[0].eventIDs(pid)
		msg := fmt.Sprintf("%s=%d", rs[0].name, len(first))
		ok := len(first) == want
		for _, r := range rs[1:] {
			ids := r.eventIDs(pid)
			msg += fmt.Sprintf(" %s=%d", r.name, len(ids))
			ok = ok && slicesEqual(ids, first)
		}
		return ok, msg + fmt.Sprintf(" want %d", want)
	})
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func tempDB(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name+".db") }

// scrape reads r's federation metrics through a Prometheus text
// exposition served over HTTP (as cmd registers the Manager).
func scrape(t *testing.T, r *testRelay) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.fed)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
