package matrix_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/dendritetest"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

var ctx = context.Background()

func openStore(t *testing.T, dir string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.OpenWith(ctx, filepath.Join(dir, "acrelay.db"), slog.New(slog.DiscardHandler), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func token() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is a relay's Matrix side against a real Dendrite in appservice mode.
type env struct {
	t       *testing.T
	dir     string
	st      *sqlite.DB
	hs      *dendritetest.Server
	reg     *appservice.Registration
	as      *httptest.Server
	inbox   atomicInbox
	signer  *storetest.Signer
	alice   *mautrix.Client
	room    id.RoomID
	botID   id.UserID
	hsURL   string           // what the courier talks to (Dendrite, or a proxy before it)
	runner  *couriers.Runner // the running relay's courier runner
	runStop context.CancelFunc
	runDone chan struct{}
}

// atomicInbox lets a test replace the process behind the appservice URL
// (a restarted relay keeps its listener address).
type atomicInbox struct {
	mu sync.Mutex
	in *matrix.Inbox
}

func (a *atomicInbox) Accept(ctx context.Context, evs []json.RawMessage) error {
	a.mu.Lock()
	in := a.in
	a.mu.Unlock()
	if in == nil {
		return fmt.Errorf("relay down")
	}
	return in.Accept(ctx, evs)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.st = openStore(t, e.dir)
	t.Cleanup(func() { e.stopRelay(); e.st.Close() })
	reg := appservice.CreateRegistration()
	reg.ID, reg.SenderLocalpart = "acrelay", "acrelay"
	reg.AppToken, reg.ServerToken = token(), token()
	reg.Namespaces.UserIDs.Register(regexp.MustCompile(`@acrelay.*:acrelay\.test`), true)
	e.reg = reg
	e.as = httptest.NewServer(relay.AppserviceHandler(reg.ServerToken, &e.inbox, nil))
	t.Cleanup(e.as.Close)
	reg.URL = e.as.URL
	y, err := reg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	e.hs = dendritetest.Start(t, dendritetest.Options{AppserviceYAML: y})
	e.hsURL = e.hs.URL
	e.botID = e.hs.UserID("acrelay")
	p, err := e.st.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	e.signer = storetest.NewSigner(t, p.ID).Register(t, e.st)
	e.alice = e.hs.CreateUser("alice")
	return e
}

func (e *env) client() *mautrix.Client {
	cli, err := matrix.NewClient(e.hsURL, e.botID, e.reg.AppToken)
	if err != nil {
		e.t.Fatal(err)
	}
	cli.Client.Timeout = 3 * time.Second
	return cli
}

// bind creates the project's room, inviting alice, who joins.
func (e *env) bind() {
	e.t.Helper()
	b := &matrix.Binder{Store: e.st, Client: e.client()}
	bd, err := b.Bind(ctx, e.signer.ProjectID, matrix.BindRequest{Create: true, Invite: []string{e.alice.UserID.String()}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.room = id.RoomID(bd.RoomID)
	if _, err := e.alice.JoinRoomByID(ctx, e.room); err != nil {
		e.t.Fatal(err)
	}
}

// startRelay starts the courier's runner and the inbox, as a relay
// process would.
func (e *env) startRelay(st matrix.Store) {
	e.t.Helper()
	cli := e.client()
	c := &matrix.Courier{Store: st, Client: cli, PublicURL: "http://relay.test", Host: "hs"}
	r := couriers.NewRunner(e.st, c, couriers.Options{Holder: "relay-" + token()[:6], LeaseTTL: 3 * time.Second,
		Backoff: couriers.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}, DeliveryTimeout: 5 * time.Second, Batch: 5, Refresh: time.Second})
	in := &matrix.Inbox{Store: e.st, Ingest: ingest.New(e.st, ingest.Options{}), Client: cli}
	e.runner = r
	rctx, cancel := context.WithCancel(ctx)
	e.runStop, e.runDone = cancel, make(chan struct{})
	e.inbox.mu.Lock()
	e.inbox.in = in
	e.inbox.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	wg.Go(func() { _ = in.Run(rctx) })
	go func() { wg.Wait(); close(e.runDone) }()
}

func (e *env) stopRelay() {
	if e.runStop == nil {
		return
	}
	e.inbox.mu.Lock()
	e.inbox.in = nil
	e.inbox.mu.Unlock()
	e.runStop()
	<-e.runDone
	e.runStop = nil
}

func (e *env) appendN(n int) []string {
	e.t.Helper()
	in := ingest.New(e.st, ingest.Options{})
	var ids []string
	for range n {
		_, raw := e.signer.Event(e.t, storetest.Spec{Summary: "step"})
		res, err := in.Append(ctx, e.signer.ProjectID, raw)
		if err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, res.Record.EventID)
	}
	return ids
}

// roomEvents reads, as alice, every event the courier's user sent, oldest
// first.
func (e *env) roomEvents() []*event.Event {
	e.t.Helper()
	var out []*event.Event
	from := ""
	for {
		resp, err := e.alice.Messages(ctx, e.room, from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, ev := range resp.Chunk {
			if ev.Sender == e.botID {
				out = append(out, ev)
			}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// verifyRoom waits until the room holds each of ids exactly once as a
// record event and once as a notice, in order, and re-verifies every
// record's signature and id from the content (spec §6).
func (e *env) verifyRoom(ids []string, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		last = e.checkRoom(ids)
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("room never held every record exactly once: %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) checkRoom(ids []string) string {
	var recs, notices []string
	for _, ev := range e.roomEvents() {
		var raw json.RawMessage = ev.Content.VeryRaw
		switch {
		case ev.Type.Type == matrix.EventTypeRecord:
		case ev.Type == event.EventMessage:
			var n map[string]json.RawMessage
			if json.Unmarshal(raw, &n) != nil || n[matrix.KeyRecord] == nil {
				continue // a reply to a submission
			}
			raw = n[matrix.KeyRecord]
		default:
			continue
		}
		var c struct {
			Event   json.RawMessage `json:"event"`
			Receipt struct {
				ReceivedSeq string `json:"received_seq"`
			} `json:"receipt"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return "undecodable content: " + err.Error()
		}
		// The homeserver re-serializes content: re-parse and re-verify the
		// values, never compare bytes.
		pe, err := correspondence.ParseEvent(c.Event)
		if err != nil {
			return "parse: " + err.Error()
		}
		if err := pe.Verify(e.signer.Pub); err != nil {
			return "verify: " + err.Error()
		}
		if ev.Type.Type == matrix.EventTypeRecord {
			recs = append(recs, pe.ID)
		} else {
			notices = append(notices, pe.ID)
		}
	}
	want := strings.Join(ids, ",")
	if strings.Join(recs, ",") != want {
		return fmt.Sprintf("record events %d %v, want %d", len(recs), short(recs), len(ids))
	}
	if strings.Join(notices, ",") != want {
		return fmt.Sprintf("notices %d %v, want %d", len(notices), short(notices), len(ids))
	}
	return ""
}

func short(ids []string) []string {
	out := make([]string, len(ids))
	for i, s := range ids {
		out[i] = s[7:13]
	}
	return out
}

func (e *env) caughtUp() {
	e.t.Helper()
	head, _, _ := e.st.Head(ctx, e.signer.ProjectID)
	waitFor(e.t, 20*time.Second, fmt.Sprintf("courier caught up to %d", head), func() bool {
		bs, _ := e.st.MatrixBindings(ctx, e.signer.ProjectID)
		ts, _ := e.st.TargetStates(ctx, matrix.Name, e.signer.ProjectID)
		return len(bs) == 1 && len(ts) == 1 && ts[0].ReceivedSeq == head
	})
}

// cursor is the courier's cursor in the one bound room (0 before any).
func (e *env) cursor() int64 {
	ts, _ := e.st.TargetStates(ctx, matrix.Name, e.signer.ProjectID)
	if len(ts) != 1 {
		return 0
	}
	return ts[0].ReceivedSeq
}

// delivering waits until the courier has delivered past from: the
// stream is under way (mid-stream, unless it was quick to finish).
func (e *env) delivering(from int64) {
	e.t.Helper()
	waitFor(e.t, 20*time.Second, "the courier delivering", func() bool { return e.cursor() > from })
}

// TestMatrixCourierDendrite: records reach a real Dendrite room exactly
// once across a relay killed mid-stream, Dendrite restarted mid-stream,
// and a crash between a send and its record.
func TestMatrixCourierDendrite(t *testing.T) {
	e := newEnv(t)
	e.bind()
	e.startRelay(e.st)
	ids := e.appendN(6)
	e.verifyRoom(ids, 20*time.Second)
	e.caughtUp()

	t.Run("relay killed mid-stream", func(t *testing.T) {
		from := e.cursor()
		ids = append(ids, e.appendN(20)...)
		e.delivering(from)
		e.stopRelay()
		e.startRelay(e.st)
		e.verifyRoom(ids, 30*time.Second)
		e.caughtUp()
	})
	t.Run("dendrite restarted mid-stream", func(t *testing.T) {
		from := e.cursor()
		ids = append(ids, e.appendN(20)...)
		e.delivering(from)
		e.hs.Restart()
		e.verifyRoom(ids, 40*time.Second)
		e.caughtUp()
	})
	t.Run("crash between send and record", func(t *testing.T) {
		e.stopRelay()
		lossy := &lossyStore{DB: e.st, drop: 2}
		e.startRelay(lossy)
		ids = append(ids, e.appendN(5)...)
		e.verifyRoom(ids, 30*time.Second)
		e.caughtUp()
		if lossy.dropped() == 0 {
			t.Fatal("no record of a send was lost: the test tested nothing")
		}
	})
}

// lossyStore loses the record of the first drop sends, as a crash right
// after the homeserver's answer would.
type lossyStore struct {
	*sqlite.DB
	mu   sync.Mutex
	drop int
	n    int
}

func (l *lossyStore) RecordMatrixSent(ctx context.Context, s store.MatrixSent) error {
	if err := l.lose(); err != nil {
		return err
	}
	return l.DB.RecordMatrixSent(ctx, s)
}

func (l *lossyStore) RecordMatrixSentBound(ctx context.Context, s store.MatrixSent, projectID, bindingID string) (bool, error) {
	if err := l.lose(); err != nil {
		return false, err
	}
	return l.DB.RecordMatrixSentBound(ctx, s, projectID, bindingID)
}

// lose fails the first drop writes.
func (l *lossyStore) lose() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n < l.drop {
		l.n++
		return fmt.Errorf("crash after send: %w", store.ErrUnavailable)
	}
	return nil
}

func (l *lossyStore) dropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// faultProxy stands between the courier and Dendrite and misbehaves on
// chosen sends: a 429 with retry_after_ms, a 502, and a send that Dendrite
// stores but whose answer never comes.
type faultProxy struct {
	mu      sync.Mutex
	target  *url.URL
	sends   map[string][]time.Time // txn id → attempts
	faults  map[int]string         // n-th distinct record send → fault
	nth     map[string]int
	counter int
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp := httputil.NewSingleHostReverseProxy(p.target)
	if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/send/") {
		rp.ServeHTTP(w, r)
		return
	}
	txn := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	p.mu.Lock()
	p.sends[txn] = append(p.sends[txn], time.Now())
	attempt := len(p.sends[txn])
	if _, ok := p.nth[txn]; !ok {
		p.counter++
		p.nth[txn] = p.counter
	}
	fault := ""
	if attempt == 1 {
		fault = p.faults[p.nth[txn]]
	}
	p.mu.Unlock()
	switch fault {
	case "429":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"errcode":"M_LIMIT_EXCEEDED","error":"slow down","retry_after_ms":1500}`)
	case "502":
		w.WriteHeader(http.StatusBadGateway)
	case "hang":
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r) // stored by Dendrite …
		<-r.Context().Done() // … but the answer never comes
	default:
		rp.ServeHTTP(w, r)
	}
}

// TestMatrixCourierFaults: 429 M_LIMIT_EXCEEDED (the retry waits at least
// retry_after_ms, same transaction id), 502, and a send stored but never
// answered (timeout, then the same transaction id): every record once.
func TestMatrixCourierFaults(t *testing.T) {
	e := newEnv(t)
	e.bind()
	u, _ := url.Parse(e.hs.URL)
	p := &faultProxy{target: u, sends: map[string][]time.Time{}, nth: map[string]int{},
		faults: map[int]string{2: "429", 4: "502", 6: "hang"}}
	px := httptest.NewServer(p)
	t.Cleanup(px.Close)
	e.hsURL = px.URL
	e.startRelay(e.st)
	ids := e.appendN(6)
	e.verifyRoom(ids, 40*time.Second)
	e.caughtUp()
	p.mu.Lock()
	defer p.mu.Unlock()
	for txn, n := range p.nth {
		at := p.sends[txn]
		switch p.faults[n] {
		case "429":
			if len(at) < 2 || at[1].Sub(at[0]) < 1500*time.Millisecond {
				t.Errorf("429: attempts %v, want a retry of %s at least 1.5s later", at, txn)
			}
		case "502":
			if len(at) < 2 {
				t.Errorf("502: no retry with the same transaction id %s", txn)
			}
		case "hang":
			// Stored but unanswered: after the timeout the courier either
			// finds it in the room's history (no resend) or resends it
			// under the same transaction id; the room holds it once either
			// way (verifyRoom above).
			t.Logf("unanswered send %s: %d attempts", txn, len(at))
		}
	}
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}
