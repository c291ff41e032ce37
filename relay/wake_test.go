package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
)

// sseFrame is one dispatched SSE event, or a comment line.
type sseFrame struct {
	id, event, data, comment string
}

// sseStream reads frames of one wake stream on its own goroutine.
type sseStream struct {
	res    *http.Response
	frames chan sseFrame
	cancel context.CancelFunc
}

func (e *env) openWake(tok, identityID string, hdr ...string) (*sseStream, resp) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/wake/voice?identity_id="+identityID+"&keys=correspondence", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if res.StatusCode != 200 {
		defer cancel()
		defer res.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		return nil, resp{Status: res.StatusCode, Header: res.Header, Body: []byte(b.String())}
	}
	s := &sseStream{res: res, frames: make(chan sseFrame, 1024), cancel: cancel}
	go s.read()
	e.t.Cleanup(s.close)
	return s, resp{Status: 200, Header: res.Header}
}

func (s *sseStream) close() { s.cancel(); s.res.Body.Close() }

func (s *sseStream) read() {
	defer close(s.frames)
	br := bufio.NewReader(s.res.Body)
	var f sseFrame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if f != (sseFrame{}) {
				s.frames <- f
			}
			f = sseFrame{}
		case strings.HasPrefix(line, ":"):
			f.comment = line
		default:
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				f.id = v
			case "event":
				f.event = v
			case "data":
				f.data = v
			}
		}
	}
}

// next waits (bounded) for the next frame that is not a heartbeat.
func (s *sseStream) next(t *testing.T) sseFrame {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f.comment != "" && f.event == "" {
				continue
			}
			return f
		case <-timeout:
			t.Fatal("no frame within 10s")
		}
	}
}

// quiet reports whether no change frame arrives within d.
func (s *sseStream) quiet(d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case f, ok := <-s.frames:
			if ok && f.event == "" {
				continue
			}
			return false
		case <-timeout:
			return true
		}
	}
}

// endsWithoutFrame reports whether the stream closes within d with no
// change frame before it.
func (s *sseStream) endsWithoutFrame(d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return true
			}
			if f.event == "" {
				continue
			}
			return false
		case <-timeout:
			return false
		}
	}
}

type wakeData struct {
	Format      string `json:"_format"`
	Key         string `json:"key"`
	Kind        string `json:"kind"`
	IdentityID  string `json:"identity_id"`
	OccurredAt  string `json:"occurred_at"`
	WakeVersion int64  `json:"wake_version"`
}

// checkFrame asserts the exact frame of spec §9 for identityID and seq,
// whose newest record is ev, and returns its wake_version. A nil ev is a
// seq the store holds no record for (Advance fed directly): the context is
// then received_seq alone.
func checkFrame(t *testing.T, f sseFrame, identityID, seq string, ev *correspondence.Event) int64 {
	t.Helper()
	var d wakeData
	if err := json.Unmarshal([]byte(f.data), &d); err != nil {
		t.Fatalf("data %q: %v", f.data, err)
	}
	if _, code := correspondence.ParseTimestamp(d.OccurredAt); code != "" || d.WakeVersion <= 0 {
		t.Fatalf("occurred_at %q wake_version %d", d.OccurredAt, d.WakeVersion)
	}
	ctx := `{"received_seq":"` + seq + `"}`
	if ev != nil {
		ctx = `{"received_seq":"` + seq + `","event_id":"` + ev.ID + `","repository_id":"` + ev.RepositoryID +
			`","thread_id":"` + ev.ThreadID + `","kind":"` + string(ev.Kind) + `"}`
	}
	want := `{"_format":"wake_event/v1","key":"correspondence","kind":"updated","identity_id":"` + identityID +
		`","occurred_at":"` + d.OccurredAt + `","wake_version":` + strconv.FormatInt(d.WakeVersion, 10) +
		`,"context":` + ctx + `}`
	if f.id != seq || f.event != "change" || f.data != want {
		t.Fatalf("frame id %q event %q data\n%s\nwant\n%s", f.id, f.event, f.data, want)
	}
	return d.WakeVersion
}

func TestWakeRefusals(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	gone := e.newAgent(pid, tok)
	mustStatus(t, e.do("POST", "/v1/admin/identities/"+gone.IdentityID+"/deactivate", tok, nil), 200)
	opid, otok := e.newProject("")
	stranger := e.newAgent(opid, otok)
	appendOnly := e.newToken(pid, "append")

	unknown := e.do("GET", "/v1/wake/voice?identity_id="+newUUID()+"&keys=correspondence", tok, nil)
	foreign := e.do("GET", "/v1/wake/voice?identity_id="+stranger.IdentityID+"&keys=correspondence", tok, nil)
	if unknown.Status != 404 || foreign.Status != 404 || string(unknown.Body) != string(foreign.Body) || unknown.code(t) != "identity_not_found" {
		t.Fatalf("another project's identity must look unknown: %d %s / %d %s", unknown.Status, unknown.Body, foreign.Status, foreign.Body)
	}
	for _, tc := range []refusal{
		{"no token", "?identity_id=" + a.IdentityID + "&keys=correspondence", "", nil, 401, "unauthorized"},
		{"operator token", "?identity_id=" + a.IdentityID + "&keys=correspondence", operatorToken, nil, 403, "project_token_required"},
		{"no read scope", "?identity_id=" + a.IdentityID + "&keys=correspondence", appendOnly, nil, 403, "scope_insufficient"},
		{"no identity", "?keys=correspondence", tok, nil, 400, "identity_id_required"},
		{"bad identity", "?identity_id=nope&keys=correspondence", tok, nil, 400, "identity_id_invalid"},
		{"no keys", "?identity_id=" + a.IdentityID, tok, nil, 400, "keys_invalid"},
		{"other keys", "?identity_id=" + a.IdentityID + "&keys=other", tok, nil, 400, "keys_invalid"},
		{"unknown parameter", "?identity_id=" + a.IdentityID + "&keys=correspondence&x=1", tok, nil, 400, "query_invalid"},
		{"inactive identity", "?identity_id=" + gone.IdentityID + "&keys=correspondence", tok, nil, 403, "identity_not_active"},
		{"foreign identity", "?identity_id=" + stranger.IdentityID + "&keys=correspondence", tok, nil, 404, "identity_not_found"},
		{"json only", "?identity_id=" + a.IdentityID + "&keys=correspondence", tok, []string{"Accept", "application/json"}, 406, "representation_not_acceptable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", "/v1/wake/voice"+tc.query, tc.tok, nil, tc.hdr...)
			mustStatus(t, r, tc.status)
			if got := r.code(t); got != tc.code {
				t.Errorf("error %q, want %q", got, tc.code)
			}
		})
	}
}

func TestWakeFrames(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	b := e.newAgent(pid, tok)
	opid, otok := e.newProject("")
	stranger := e.newAgent(opid, otok)

	sa, r := e.openWake(tok, a.IdentityID)
	if r.Header.Get("Content-Type") != "text/event-stream" || r.Header.Get("Cache-Control") != "private, no-cache" {
		t.Fatalf("headers %v", r.Header)
	}
	sb, _ := e.openWake(tok, b.IdentityID)
	so, _ := e.openWake(otok, stranger.IdentityID)

	ev := a.intent("repo", "one")
	mustStatus(t, e.post(a, ev), 201)
	va := checkFrame(t, sa.next(t), a.IdentityID, "1", ev) // the sender's own stream too
	vb := checkFrame(t, sb.next(t), b.IdentityID, "1", ev)

	// An exact retry (200) commits nothing new: no frame. The next append's
	// frame is the next one each stream sees, with a higher wake_version.
	mustStatus(t, e.post(a, ev), 200)
	two := b.event("repo-2", "thread-2", correspondence.KindProgress, obj("summary", "two"), nil)
	mustStatus(t, e.post(b, two), 201)
	if v := checkFrame(t, sa.next(t), a.IdentityID, "2", two); v <= va {
		t.Errorf("wake_version %d after %d", v, va)
	}
	if v := checkFrame(t, sb.next(t), b.IdentityID, "2", two); v <= vb {
		t.Errorf("wake_version %d after %d", v, vb)
	}
	// Nothing of this project reached the other project's stream.
	if !so.quiet(200 * time.Millisecond) {
		t.Fatal("another project's stream saw a frame")
	}
	elsewhere := stranger.intent("repo", "elsewhere")
	mustStatus(t, e.post(stranger, elsewhere), 201)
	checkFrame(t, so.next(t), stranger.IdentityID, "1", elsewhere)

	// A deactivated identity is no longer a recipient: its stream ends
	// without another change frame.
	mustStatus(t, e.do("POST", "/v1/admin/identities/"+b.IdentityID+"/deactivate", tok, nil), 200)
	three := a.intent("repo", "three")
	mustStatus(t, e.post(a, three), 201)
	checkFrame(t, sa.next(t), a.IdentityID, "3", three)
	if !sb.endsWithoutFrame(2 * time.Second) {
		t.Error("a deactivated identity still receives frames")
	}
}

func TestWakeHeartbeat(t *testing.T) {
	e, _, _ := newEnvWith(t, relay.Config{WakeHeartbeat: 30 * time.Millisecond})
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	s, _ := e.openWake(tok, a.IdentityID)
	select {
	case f := <-s.frames:
		if f.comment != ": heartbeat" || f.event != "" || f.data != "" {
			t.Fatalf("first frame %+v, want the heartbeat comment", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat")
	}
}

func TestWakeLastEventID(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	var last *correspondence.Event
	for i := range 3 {
		last = a.event("repo-"+fmt.Sprint(i), "thread-"+fmt.Sprint(i), correspondence.KindIntent, obj("summary", fmt.Sprint(i)), nil)
		mustStatus(t, e.post(a, last), 201)
	}
	behind, _ := e.openWake(tok, a.IdentityID, "Last-Event-ID", "1")
	checkFrame(t, behind.next(t), a.IdentityID, "3", last) // the head's record, not the one after Last-Event-ID

	current, _ := e.openWake(tok, a.IdentityID, "Last-Event-ID", "3")
	garbled, _ := e.openWake(tok, a.IdentityID, "Last-Event-ID", "03")
	four := a.intent("repo", "four")
	mustStatus(t, e.post(a, four), 201)
	checkFrame(t, current.next(t), a.IdentityID, "4", four) // nothing before it
	checkFrame(t, garbled.next(t), a.IdentityID, "4", four)
	checkFrame(t, behind.next(t), a.IdentityID, "4", four)
}

// TestWakeFanOutPages: 150 identities (two pages of recipients) each with
// a stream all receive one append's frame.
func TestWakeFanOutPages(t *testing.T) {
	e, _, _ := newEnvWith(t, relay.Config{WakeMaxStreamsPerToken: -1}) // 150 streams on one token
	pid, tok := e.newProject("")
	var streams []*sseStream
	var ids []string
	for range 150 {
		r := e.do("POST", "/v1/admin/projects/"+pid+"/identities", tok, []byte(`{"display_name":"listener"}`))
		mustStatus(t, r, 201)
		id := r.json(t)["identity_id"].(string)
		s, _ := e.openWake(tok, id)
		streams, ids = append(streams, s), append(ids, id)
	}
	a := e.newAgent(pid, tok)
	ev := a.intent("repo", "to everyone")
	mustStatus(t, e.post(a, ev), 201)
	for i, s := range streams {
		checkFrame(t, s.next(t), ids[i], "1", ev)
	}
}

// TestWakeConnectCyclesLeaveNoTrace: 1,000 connect/disconnect cycles leave
// goroutines, heap and the subscriber table at their baseline.
func TestWakeConnectCyclesLeaveNoTrace(t *testing.T) {
	e, srv, _ := newEnvWith(t, relay.Config{})
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cycle := func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/wake/voice?identity_id="+a.IdentityID+"&keys=correspondence", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		cancel()
		res.Body.Close()
	}
	settle := func(cond func() bool) bool {
		for range 200 {
			if cond() {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	for range 20 { // warm pools and lazily started goroutines
		cycle()
	}
	settle(func() bool { return srv.WakeSubscribers() == 0 })
	time.Sleep(100 * time.Millisecond)
	baseG, baseHeap := runtime.NumGoroutine(), heap()
	for i := range 1000 {
		cycle()
		if i%100 == 0 {
			// A frame now and then exercises publishing to departing streams.
			srv.Advance(pid, int64(i+1))
		}
	}
	if !settle(func() bool { return srv.WakeSubscribers() == 0 && runtime.NumGoroutine() <= baseG }) {
		t.Fatalf("after 1000 cycles: %d subscribers, %d goroutines (baseline %d)", srv.WakeSubscribers(), runtime.NumGoroutine(), baseG)
	}
	if h := heap(); h > baseHeap+2<<20 {
		t.Errorf("heap in use %d bytes after the cycles, baseline %d", h, baseHeap)
	}
	t.Logf("goroutines %d (baseline %d), heap in use %d (baseline %d)", runtime.NumGoroutine(), baseG, heap(), baseHeap)
}

// TestWakeStalledSubscriberDropped: a subscriber that stops reading is
// dropped (its blocked write times out and the relay closes the
// connection) while another keeps receiving every frame in order.
func TestWakeStalledSubscriberDropped(t *testing.T) {
	var mu sync.Mutex
	closed := map[string]bool{}
	closedConn := func(addr string) bool { mu.Lock(); defer mu.Unlock(); return closed[addr] }
	e, srv, _ := newEnvWith(t, relay.Config{WakeWriteTimeout: 200 * time.Millisecond}, func(hs *http.Server) {
		hs.ConnState = func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				mu.Lock()
				closed[c.RemoteAddr().String()] = true
				mu.Unlock()
			}
		}
	})
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	good, _ := e.openWake(tok, a.IdentityID)

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/wake/voice?identity_id=%s&keys=correspondence HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer %s\r\n\r\n", a.IdentityID, tok)
	for srv.WakeSubscribers() != 2 {
		time.Sleep(10 * time.Millisecond)
	}
	seq := int64(0)
	for srv.WakeSubscribers() == 2 {
		seq++
		if seq > 200000 {
			t.Fatal("the stalled subscriber was never dropped")
		}
		srv.Advance(pid, seq)
		checkFrame(t, good.next(t), a.IdentityID, strconv.FormatInt(seq, 10), nil)
	}
	// The good stream goes on.
	for range 10 {
		seq++
		srv.Advance(pid, seq)
		checkFrame(t, good.next(t), a.IdentityID, strconv.FormatInt(seq, 10), nil)
	}
	// The dropped stream's handler gave up on its blocked write and the
	// relay closed that connection.
	deadline := time.Now().Add(10 * time.Second)
	for !closedConn(conn.LocalAddr().String()) {
		if time.Now().After(deadline) {
			t.Fatal("the relay did not close the stalled connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("stalled subscriber dropped after %d frames", seq-10)
}

// TestWakeStreamEndsOnRevocation: revoking the stream's token or
// deactivating its identity ends an open stream at once in this process.
func TestWakeStreamEndsOnRevocation(t *testing.T) {
	for _, how := range []string{"token", "identity"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			pid, tok := e.newProject("")
			a := e.newAgent(pid, tok)
			reader := e.newToken(pid, "read")
			req, _ := http.NewRequest("GET", e.url+"/v1/wake/voice?identity_id="+a.IdentityID+"&keys=correspondence", nil)
			req.Header.Set("Authorization", "Bearer "+reader)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("wake: %d", res.StatusCode)
			}
			ended := make(chan error, 1)
			go func() { _, err := io.Copy(io.Discard, res.Body); ended <- err }()
			switch how {
			case "token":
				id := e.do("GET", "/v1/whoami", reader, nil).json(t)["token_id"].(string)
				mustStatus(t, e.do("DELETE", "/v1/admin/tokens/"+id, tok, nil), 204)
			case "identity":
				mustStatus(t, e.do("POST", "/v1/admin/identities/"+a.IdentityID+"/deactivate", tok, nil), 200)
			}
			select {
			case <-ended:
			case <-time.After(5 * time.Second):
				t.Fatal("the stream stayed open after revocation")
			}
		})
	}
}

// TestWakeStreamsPerTokenCapped: one token cannot hold unbounded streams.
func TestWakeStreamsPerTokenCapped(t *testing.T) {
	e, _, _ := newEnvWith(t, relay.Config{WakeMaxStreamsPerToken: 2})
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	s1, _ := e.openWake(tok, a.IdentityID)
	s2, _ := e.openWake(tok, a.IdentityID)
	_ = s1
	r := e.do("GET", "/v1/wake/voice?identity_id="+a.IdentityID+"&keys=correspondence", tok, nil)
	mustStatus(t, r, 429)
	if r.code(t) != "too_many_streams" {
		t.Fatalf("code %s", r.code(t))
	}
	// Another token of the project has its own allowance.
	other := e.newToken(pid, "read")
	s3, _ := e.openWake(other, a.IdentityID)
	_ = s3
	_ = s2
}
