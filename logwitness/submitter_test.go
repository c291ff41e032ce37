package logwitness_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/logwitness"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
	"github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/witness"
)

var ctx = context.Background()

// openSQLite opens a store in a temporary directory.
func openSQLite(t testing.TB) store.Store {
	t.Helper()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// witnessServer is another relay acting as a C2SP tlog-witness of one
// origin (POST /v1/witness/add-checkpoint, its own store), behind a
// handler that notes each request's "old" line and answer.
type witnessServer struct {
	w   logwitness.Witness
	mu  sync.Mutex
	req []string // "old N → status"
}

func newWitnessServer(t testing.TB, origin string, logKey note.Verifier) *witnessServer {
	t.Helper()
	logs := map[string][]note.Verifier{}
	if origin != "" {
		logs[origin] = []note.Verifier{logKey}
	}
	h := relay.New(openSQLite(t), relay.Config{PublicURL: "http://witness.test", WitnessLogs: logs}).Handler()
	ws := &witnessServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if r.URL.Path == "/v1/witness/add-checkpoint" {
			first, _, _ := strings.Cut(string(body), "\n")
			ws.mu.Lock()
			ws.req = append(ws.req, first+" → "+http.StatusText(rec.Code))
			ws.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/v1/witness-key")
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ws.w, err = logwitness.ParseWitness(strings.TrimSpace(string(vkey)) + " " + srv.URL + "/v1/witness/"); err != nil {
		t.Fatal(err)
	}
	return ws
}

func (ws *witnessServer) requests() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]string(nil), ws.req...)
}

// logEnv is a project's log: a store, a public project, its records'
// signer and a sequencer the test drives, and a fake clock.
type logEnv struct {
	st  store.Store
	pid string
	sg  *storetest.Signer
	key tlog.LogKey
	seq *sequencer.Sequencer
	now time.Time
}

func newLog(t testing.TB) *logEnv {
	t.Helper()
	st := openSQLite(t)
	pid := storetest.NewUUID()
	if _, err := st.CreateProject(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if err := st.SetProjectVisibility(ctx, pid, store.VisibilityPublic); err != nil {
		t.Fatal(err)
	}
	skey, _, err := tlog.NewLogKey("relay.test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := tlog.OpenLogKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &logEnv{st: st, pid: pid, sg: storetest.NewSigner(t, pid).Register(t, st), key: key,
		seq: sequencer.New(st, sequencer.Options{PublicURL: "http://relay.test", Key: key}), now: time.Now().UTC().Truncate(time.Millisecond)}
}

func (l *logEnv) origin() string { return tlog.Origin("http://relay.test", l.pid) }

// grow appends n records and integrates them.
func (l *logEnv) grow(t *testing.T, n int) store.TreeHead {
	t.Helper()
	for range n {
		ev, c := l.sg.Event(t, storetest.Spec{})
		if _, err := l.st.Append(ctx, ev, c); err != nil {
			t.Fatal(err)
		}
	}
	h, err := l.seq.Integrate(ctx, l.pid)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (l *logEnv) submitter(logs io.Writer, ws ...logwitness.Witness) *logwitness.Submitter {
	return logwitness.New(l.st, logwitness.Options{Witnesses: ws, LogVerifier: l.key.Verifier, Now: func() time.Time { return l.now },
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
}

// TestSubmitterPacing: a busy log (a record a second) for ten minutes on
// fake time costs one request per Interval (default 10 s): 60, i.e. 360
// per hour per witness, each from the size the witness cosigned last
// with its proof; the latest checkpoint of the now quiet log is cosigned
// at the next interval; the cosignature is stored for the checkpoint.
func TestSubmitterPacing(t *testing.T) {
	l := newLog(t)
	ws := newWitnessServer(t, l.origin(), l.key.Verifier)
	var logs bytes.Buffer
	sub := l.submitter(&logs, ws.w)
	var head store.TreeHead
	for range 600 {
		head = l.grow(t, 1)
		if _, err := sub.Pass(ctx, l.pid, head.Size); err != nil {
			t.Fatal(err)
		}
		l.now = l.now.Add(time.Second)
	}
	reqs := ws.requests()
	if len(reqs) != 60 || reqs[0] != "old 0 → OK" || reqs[1] != "old 1 → OK" || reqs[2] != "old 11 → OK" || reqs[59] != "old 581 → OK" {
		t.Fatalf("%d requests: %v", len(reqs), reqs)
	}
	t.Logf("busy log (1 record/s), default interval: %d requests in 10 simulated minutes = %d per hour per witness", len(reqs), len(reqs)*6)
	// Quiet now: the latest checkpoint (size 600, signed at 599 s) goes
	// at the next interval, 600 s, and nothing more after it.
	if done, err := sub.Pass(ctx, l.pid, 600); !done || err != nil || len(ws.requests()) != 61 || ws.requests()[60] != "old 591 → OK" {
		t.Fatalf("latest not cosigned: %v, %v", err, ws.requests()[60:])
	}
	l.now = l.now.Add(time.Minute)
	if done, err := sub.Pass(ctx, l.pid, 600); !done || err != nil || len(ws.requests()) != 61 {
		t.Fatalf("sent again: %v, %v", err, ws.requests()[60:])
	}
	held, err := l.st.Cosignatures(ctx, l.pid)
	if err != nil || len(held) != 1 || held[0].Size != 600 || held[0].KeyName != "witness.test/witness" || !strings.HasPrefix(string(held[0].Body), l.origin()+"\n600\n") {
		t.Fatalf("held %+v, %v", held, err)
	}
	states, _ := l.st.LogWitnessStates(ctx, l.pid)
	if len(states) != 1 || states[0].KnownSize != 600 || states[0].CosignedSize != 600 || !states[0].CosignedAt.Equal(l.now.Add(-time.Minute)) || states[0].LastError != "" {
		t.Fatalf("state %+v", states)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged:\n%s", logs.String())
	}
}

// TestSubmitterAnswers: a restart with a stored size behind the
// witness's gets a 409 and resubmits from the size it names; a witness
// that does not know the origin (404) is said once and backed off; a
// witness holding another tree of the origin (422) is the split-view
// alarm: evidence, one ERROR line, the metric, nothing more sent.
func TestSubmitterAnswers(t *testing.T) {
	l := newLog(t)
	ws := newWitnessServer(t, l.origin(), l.key.Verifier)
	stranger := newWitnessServer(t, "", nil)
	var logs bytes.Buffer
	sub := l.submitter(&logs, ws.w, stranger.w)
	head := l.grow(t, 30)
	if _, err := sub.Pass(ctx, l.pid, 30); err != nil {
		t.Fatal(err)
	}
	// 404 said once; retried after 10 s, 20 s, 40 s.
	var at []time.Duration
	start := l.now
	for range 80 {
		n := len(stranger.requests())
		if _, err := sub.Pass(ctx, l.pid, 30); err != nil {
			t.Fatal(err)
		}
		if len(stranger.requests()) > n {
			at = append(at, l.now.Sub(start))
		}
		l.now = l.now.Add(time.Second)
	}
	if strings.Count(logs.String(), "level=WARN") != 1 || !strings.Contains(logs.String(), "does not know this log (404)") ||
		len(at) != 3 || at[0] != 10*time.Second || at[1] != 30*time.Second || at[2] != 70*time.Second {
		t.Fatalf("404 retries at %v; logs:\n%s", at, logs.String())
	}

	// A restart whose stored state fell behind (a restored store): 409
	// names 30, the resubmission from 30 is cosigned.
	if err := l.st.SaveLogWitnessState(ctx, store.LogWitnessState{ProjectID: l.pid, Witness: ws.w.VerifierKey}); err != nil {
		t.Fatal(err)
	}
	head = l.grow(t, 5)
	sub = l.submitter(&logs, ws.w)
	if err := sub.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Pass(ctx, l.pid, head.Size); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ws.requests(), ", "); got != "old 0 → OK, old 0 → Conflict, old 30 → OK" {
		t.Fatalf("requests: %s", got)
	}

	// The witness now holds a tree of size 45 sharing our first 35
	// leaves but not the next ten (signed by our log key: a split view).
	recs, _ := l.st.RecordsAfter(ctx, l.pid, 0, 100)
	var stored []xtlog.Hash
	rd := xtlog.HashReaderFunc(func(ix []int64) ([]xtlog.Hash, error) {
		out := make([]xtlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i := range 45 {
		leaf := []byte("forked leaf")
		if i < len(recs) {
			leaf = recs[i].ImmutableJSON()
		}
		hs, _ := xtlog.StoredHashes(int64(i), leaf, rd)
		stored = append(stored, hs...)
	}
	root, _ := xtlog.TreeHash(45, rd)
	proof, _ := xtlog.ProveTree(45, 35, rd)
	forked, _ := tlog.SignCheckpoint(l.key.Signer, tlog.Checkpoint{Origin: l.origin(), Size: 45, Root: root})
	resp, err := http.Post(ws.w.AddCheckpointURL(), "text/plain", bytes.NewReader(witness.AddCheckpoint{OldSize: 35, Proof: proof, Note: forked}.Marshal()))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("forked checkpoint: %v %v", resp, err)
	}
	resp.Body.Close()
	n := len(ws.requests())
	head = l.grow(t, 10) // size 45, another root
	l.now = l.now.Add(time.Minute)
	if _, err := sub.Pass(ctx, l.pid, head.Size); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ws.requests()[n:], ", "); got != "old 35 → Conflict, old 45 → Unprocessable Entity" {
		t.Fatalf("requests after the fork: %s", got)
	}
	views, err := l.st.SplitViews(ctx, l.pid)
	if err != nil || len(views) != 1 || views[0].PeerID != "log-witness:witness.test/witness" || views[0].Kind != store.SplitViewInconsistent ||
		views[0].Origin != l.origin() || !bytes.HasPrefix(views[0].Seen, []byte("old 45\n\n"+l.origin()+"\n45\n")) {
		t.Fatalf("evidence %+v, %v", views, err)
	}
	if strings.Count(logs.String(), "level=ERROR") != 1 || !strings.Contains(logs.String(), "split view") {
		t.Fatalf("logs:\n%s", logs.String())
	}
	m := logwitness.NewMetrics(l.st, []logwitness.Witness{ws.w})
	if got := gauge(t, m, "acrelay_log_witness_split_views"); got != 1 {
		t.Fatalf("split-view metric %v", got)
	}
	// Nothing more is sent to that witness for this project, even after a
	// restart.
	l.grow(t, 3)
	l.now = l.now.Add(time.Hour)
	sub = l.submitter(&logs, ws.w)
	if err := sub.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Pass(ctx, l.pid, 48); err != nil || len(ws.requests()) != n+2 {
		t.Fatalf("sent after the alarm: %v, %v", ws.requests()[n+2:], err)
	}
}

// gauge sums the values of c's metrics named name.
func gauge(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// TestSubmitterRunSkipsWaitingProjects: Run on fake time with a witness
// that does not know the origin: after the first failure the project is
// not read again until its backoff ends (no store reads per second for a
// failing witness), and it is submitted again then.
func TestSubmitterRunSkipsWaitingProjects(t *testing.T) {
	l := newLog(t)
	stranger := newWitnessServer(t, "", nil)
	l.grow(t, 3)
	var mu sync.Mutex
	now := l.now
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	counting := &countingStore{Store: l.st}
	sub := logwitness.New(counting, logwitness.Options{Witnesses: []logwitness.Witness{stranger.w}, LogVerifier: l.key.Verifier, Now: clock,
		Logger: slog.New(slog.DiscardHandler)})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sub.Run(rctx) }()
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10 s: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("the first request", func() bool { return len(stranger.requests()) == 1 })
	reads := counting.treeHeads.Load()
	time.Sleep(2500 * time.Millisecond) // two real ticks, the fake clock still
	if got := counting.treeHeads.Load(); got != reads {
		t.Fatalf("%d tree-head reads while the witness backs off", got-reads)
	}
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	waitUntil("the retry after the backoff", func() bool { return len(stranger.requests()) == 2 })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run: %v", err)
	}
}

// countingStore counts TreeHead reads.
type countingStore struct {
	store.Store
	treeHeads atomic.Int64
}

func (c *countingStore) TreeHead(ctx context.Context, projectID string) (store.TreeHead, error) {
	c.treeHeads.Add(1)
	return c.Store.TreeHead(ctx, projectID)
}
