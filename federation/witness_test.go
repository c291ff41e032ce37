package federation_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/federation"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/witness"
)

// witnessTiming: the relays keep their logs and witness every 150 ms.
func witnessTiming() timing {
	tm := fast
	tm.log = true
	return tm
}

// peerStatus is r's running link peerID as it reports itself.
func peerStatus(t *testing.T, r *testRelay, peerID string) federation.LinkStatus {
	t.Helper()
	s, _ := r.fed.Status(peerID).(*federation.LinkStatus)
	if s == nil {
		return federation.LinkStatus{}
	}
	return *s
}

// getText GETs r's path with token and returns status and body.
func (r *testRelay) getText(path, token string) (int, []byte) {
	r.t.Helper()
	return r.do("GET", path, token, nil)
}

// witnessVerifier is r's witness verifier, read from its /v1/witness-key.
func witnessVerifier(t *testing.T, r *testRelay) note.Verifier {
	t.Helper()
	status, body := r.getText(witness.KeyPath, "")
	if status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", r.name, witness.KeyPath, status, body)
	}
	v, err := witness.NewVerifier(strings.TrimSpace(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWitnessCosigns: A (SQLite) and B (PostgreSQL when configured),
// linked both ways, each keeping its log. B mirrors A's records, checks
// A's checkpoints and cosigns them; A serves its checkpoint, at the size
// of every record, with B's cosignature, which verifies with the key B
// publishes; and the other way round. B's witness state holds A's
// checkpoint with its cosignature.
func TestWitnessCosigns(t *testing.T) {
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", witnessTiming())
	b := startRelay(t, "B", openStore(t, pgOr(), ""), "127.0.0.1:0", witnessTiming())
	readA, readB := a.project(pid), b.project(pid)
	appendA, appendB := a.appendToken(pid), b.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)
	sb := storetest.NewSigner(t, pid).Register(t, b.st)
	for range 6 {
		_, raw := sa.Event(t, storetest.Spec{RepositoryID: "repo-a", Summary: "from A"})
		a.post(appendA, raw)
	}
	onA := a.peer(pid, b, readB, "")
	onB := b.peer(pid, a, readA, "")
	for range 3 {
		_, raw := sb.Event(t, storetest.Spec{RepositoryID: "repo-b", Summary: "from B"})
		b.post(appendB, raw)
	}
	converged(t, pid, 9, 20*time.Second, a, b)

	cosignedBy := func(origin *testRelay, w *testRelay, read string) func() (bool, string) {
		lv, err := note.NewVerifier(origin.logKey.VerifierKey)
		if err != nil {
			t.Fatal(err)
		}
		wv := witnessVerifier(t, w)
		return func() (bool, string) {
			status, body := origin.getText("/v1/log/"+pid+"/checkpoint", read)
			if status != http.StatusOK {
				return false, fmt.Sprintf("checkpoint %d %s", status, body)
			}
			c, _, cs, err := witness.OpenCosigned(body, lv, acrtlog.Origin(origin.public, pid), []note.Verifier{wv}, time.Now(), time.Minute)
			if err != nil {
				return false, fmt.Sprintf("checkpoint %q: %v", body, err)
			}
			if c.Size != 9 || len(cs) != 1 || cs[0].Name != wv.Name() {
				return false, fmt.Sprintf("checkpoint size %d with %d cosignatures", c.Size, len(cs))
			}
			return true, ""
		}
	}
	eventually(t, 20*time.Second, "A's checkpoint cosigned by B", cosignedBy(a, b, readA))
	eventually(t, 20*time.Second, "B's checkpoint cosigned by A", cosignedBy(b, a, readB))

	if s := peerStatus(t, b, onB); !s.Running || s.SplitView || s.Witnessed != 9 || s.WitnessError != "" {
		t.Fatalf("B's link status %+v, want running, witnessed 9, no error", s)
	}
	if s := peerStatus(t, a, onA); s.Witnessed != 9 {
		t.Fatalf("A's link status %+v, want witnessed 9", s)
	}
	ws, err := b.st.WitnessState(ctx, pid, onB)
	if err != nil {
		t.Fatal(err)
	}
	head, err := a.st.TreeHead(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Size != 9 || ws.Root != head.Root || ws.LogKey != a.logKey.VerifierKey || !bytes.HasPrefix(ws.Checkpoint, head.Checkpoint) {
		t.Fatalf("B's witness state %+v\nwant A's head %+v with its log key %s", ws, head, a.logKey.VerifierKey)
	}
	if views, err := b.st.SplitViews(ctx, ""); err != nil || len(views) != 0 {
		t.Fatalf("split views on B = %v, %v; want none", views, err)
	}
}

// forger is a front on B's requests to A (the link's transport): while
// mode is set it serves, for A's checkpoint, a note signed by A's real
// log key over another root: "fork" at the size B cosigned, or
// "inconsistent" at A's real size once it is past that one.
type forger struct {
	base      http.RoundTripper
	a         *testRelay
	pid       string
	mode      atomic.Value // string
	cosigned  atomic.Int64
	mu        sync.Mutex
	forged    []byte // the last note served
	forgedHit atomic.Int64
	inflight  atomic.Int64 // checkpoint reads passed through, not yet answered
}

func (f *forger) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.HasPrefix(req.URL.String(), f.a.public+"/v1/log/"+f.pid+"/checkpoint") {
		return f.base.RoundTrip(req)
	}
	// A checkpoint read passed through while mode was unset is counted
	// until A answered it, so the test can wait for every read that began
	// before it set mode (one such read answered after A's tree grew would
	// let B cosign A's real larger checkpoint first).
	f.inflight.Add(1)
	mode, _ := f.mode.Load().(string)
	if mode == "" {
		defer f.inflight.Add(-1)
		return f.base.RoundTrip(req)
	}
	f.inflight.Add(-1)
	head, err := f.a.st.TreeHead(req.Context(), f.pid)
	if err != nil {
		return nil, err
	}
	c := acrtlog.Checkpoint{Origin: acrtlog.Origin(f.a.public, f.pid), Size: f.cosigned.Load(), Root: xtlog.RecordHash([]byte("a forged history"))}
	msg := head.Checkpoint // A's real note at the head just read
	if mode == "inconsistent" && head.Size <= f.cosigned.Load() {
		return checkpointResponse(req, msg), nil
	}
	if mode == "inconsistent" {
		c.Size = head.Size
	}
	msg, err = acrtlog.SignCheckpoint(f.a.logKey.Signer, c)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.forged = msg
	f.mu.Unlock()
	f.forgedHit.Add(1)
	return checkpointResponse(req, msg), nil
}

// checkpointResponse answers req with the checkpoint note msg.
func checkpointResponse(req *http.Request, msg []byte) *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body: io.NopCloser(bytes.NewReader(msg)), ContentLength: int64(len(msg)), Request: req}
}

// TestWitnessRefusesSplitView: B witnesses A through a front that, once
// B cosigned A's checkpoint at size 4, serves checkpoints signed by A's
// real log key over another history: one at the same size with another
// root (fork), or a larger one that A's own consistency proof does not
// join to the one cosigned (inconsistent). B refuses to cosign it,
// stores both notes as evidence (store and the peer route show them),
// stops the link (A's later records never reach B, pushed or polled),
// logs one ERROR line, counts it in acrelay_federation_split_views and
// reports /readyz degraded. On each engine, for B's store.
func TestWitnessRefusesSplitView(t *testing.T) {
	for _, kind := range engines() {
		for _, mode := range []string{store.SplitViewFork, store.SplitViewInconsistent} {
			t.Run(kind+"/"+mode, func(t *testing.T) { testWitnessRefusesSplitView(t, kind, mode) })
		}
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(s.b.String(), "\n")
}

func testWitnessRefusesSplitView(t *testing.T, kind, mode string) {
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", witnessTiming())
	front := &forger{base: http.DefaultTransport, a: a, pid: pid}
	tb := witnessTiming()
	tb.transport = front
	logs := &syncBuffer{}
	tb.logTo = logs
	b := startRelay(t, "B", openStore(t, kind, ""), "127.0.0.1:0", tb)
	readA, readB := a.project(pid), b.project(pid)
	appendA := a.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)
	post := func(n int) {
		for range n {
			_, raw := sa.Event(t, storetest.Spec{RepositoryID: "repo-a", Summary: "from A"})
			a.post(appendA, raw)
		}
	}
	post(4)
	a.peer(pid, b, readB, "")
	onB := b.peer(pid, a, readA, "")
	converged(t, pid, 4, 20*time.Second, a, b)
	eventually(t, 20*time.Second, "B cosigned A's checkpoint at 4", func() (bool, string) {
		s := peerStatus(t, b, onB)
		return s.Witnessed == 4, fmt.Sprintf("%+v", s)
	})
	cosigned, err := b.st.WitnessState(ctx, pid, onB)
	if err != nil {
		t.Fatal(err)
	}

	front.cosigned.Store(4)
	front.mode.Store(mode)
	eventually(t, 20*time.Second, "reads begun before the front forged are answered", func() (bool, string) {
		n := front.inflight.Load()
		return n == 0, fmt.Sprintf("%d in flight", n)
	})
	if mode == store.SplitViewInconsistent {
		post(1) // A's real tree grows to 5; the front serves 5 with another root
	}
	var view store.SplitView
	eventually(t, 20*time.Second, "the split view is stored", func() (bool, string) {
		views, err := b.st.SplitViews(ctx, pid)
		if err != nil || len(views) == 0 {
			return false, fmt.Sprintf("%v, %v", views, err)
		}
		view = views[0]
		return len(views) == 1, fmt.Sprintf("%d views", len(views))
	})
	front.mu.Lock()
	forged := front.forged
	front.mu.Unlock()
	if view.PeerID != onB || view.Kind != mode || view.Origin != acrtlog.Origin(a.public, pid) || view.LinkRemoved ||
		!bytes.Equal(view.Cosigned, cosigned.Checkpoint) || !bytes.Equal(view.Seen, forged) {
		t.Fatalf("evidence %+v\nwant kind %s, the cosigned note %q and the forged one %q", view, mode, cosigned.Checkpoint, forged)
	}
	// Both notes are signed by A's log key: anyone can check them.
	lv, _ := note.NewVerifier(a.logKey.VerifierKey)
	c1, _, err1 := witness.Open(view.Cosigned, lv, view.Origin)
	c2, _, err2 := witness.Open(view.Seen, lv, view.Origin)
	if err1 != nil || err2 != nil || c1.Root == c2.Root || (mode == store.SplitViewFork) != (c1.Size == c2.Size) {
		t.Fatalf("evidence notes: %+v %v / %+v %v", c1, err1, c2, err2)
	}
	// The forged checkpoint was not cosigned.
	if ws, err := b.st.WitnessState(ctx, pid, onB); err != nil || ws.Size != 4 || !bytes.Equal(ws.Checkpoint, cosigned.Checkpoint) {
		t.Fatalf("witness state after the split view = %+v, %v; want the one at 4", ws, err)
	}
	if s := peerStatus(t, b, onB); s.Running || !s.SplitView {
		t.Fatalf("B's link status %+v, want stopped with a split view", s)
	}

	// Visible: the peer route, the metric, /readyz.
	status, body := b.do("GET", "/v1/admin/projects/"+pid+"/peers/"+onB, operatorToken, nil)
	var peer struct {
		SplitView *struct {
			Kind     string `json:"kind"`
			Origin   string `json:"origin"`
			Cosigned string `json:"cosigned_checkpoint"`
			Seen     string `json:"seen_checkpoint"`
		} `json:"split_view"`
	}
	if err := json.Unmarshal(body, &peer); status != http.StatusOK || err != nil || peer.SplitView == nil || peer.SplitView.Kind != mode ||
		peer.SplitView.Seen != string(forged) || peer.SplitView.Cosigned != string(cosigned.Checkpoint) {
		t.Fatalf("peer route: %d %s", status, body)
	}
	if m := scrape(t, b); !strings.Contains(m, `acrelay_federation_split_views{link="stopped"} 1`+"\n") ||
		!strings.Contains(m, `acrelay_federation_split_views{link="removed"} 0`+"\n") {
		t.Fatalf("metrics lack the split view:\n%s", m)
	}
	status, body = b.do("GET", "/readyz", "", nil)
	var ready struct {
		Ready      bool     `json:"ready"`
		Degraded   []string `json:"degraded"`
		SplitViews int      `json:"split_views"`
	}
	if err := json.Unmarshal(body, &ready); status != http.StatusOK || err != nil || !ready.Ready || len(ready.Degraded) != 1 ||
		ready.Degraded[0] != "federation_split_view" || ready.SplitViews != 1 {
		t.Fatalf("readyz: %d %s", status, body)
	}

	// Stopped: A's later records reach B neither pushed nor polled.
	before := len(b.eventIDs(pid))
	post(3)
	time.Sleep(1500 * time.Millisecond) // ten poll intervals of B's link
	if got := len(b.eventIDs(pid)); got != before {
		t.Fatalf("B holds %d records after the split view, %d before: the link still mirrors", got, before)
	}
	if got := len(a.eventIDs(pid)); got != before+3 {
		t.Fatalf("A holds %d records, want %d", got, before+3)
	}
	errors := 0
	for _, l := range logs.lines() {
		if strings.Contains(l, `"level":"ERROR"`) {
			errors++
			if !strings.Contains(l, "split view") || !strings.Contains(l, `"kind":"`+mode+`"`) {
				t.Errorf("ERROR line %s", l)
			}
		}
	}
	if errors != 1 {
		t.Fatalf("%d ERROR lines on B, want 1", errors)
	}
}
