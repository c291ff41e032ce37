package relay_test

// The load figures (claims read latency, wake latency, the memory of idle
// wake streams), measured by an opt-in load program written as tests
// (they take a minute and open 10,000 connections):
//
//	ACRELAY_FIGURES=1 go test -run '^TestFigures' -v -timeout 20m ./relay
//
// The relay under load runs in a child process (this test binary re-run
// with ACRELAY_FIGURES_CHILD=1), so that its memory is measured apart from
// the clients' and each side stays within its own descriptor limit.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

func figuresEnabled(t *testing.T) {
	t.Helper()
	if os.Getenv("ACRELAY_FIGURES") == "" {
		t.Skip("set ACRELAY_FIGURES=1 to measure the load figures: claims latency, wake latency and idle-stream memory (about a minute, 10,000 connections)")
	}
}

func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	slices.Sort(d)
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(d), at(0.50), at(0.90), at(0.99), d[len(d)-1])
}

// TestFiguresClaimsLatency: GET /claims over 10,000 claim events with 500
// live tips (500 claims, each an open and 19 renewals).
func TestFiguresClaimsLatency(t *testing.T) {
	figuresEnabled(t)
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	exp := time.Now().Add(2 * time.Hour)
	type lineage struct {
		id   string
		last *correspondence.Event
	}
	lines := make([]lineage, 500)
	var gen []*correspondence.Event
	for i := range lines {
		lines[i].id = newUUID()
		lines[i].last = a.claim("repo", fmt.Sprint("thread-", i%10), lines[i].id, 1, "", exp, fmt.Sprintf("area/%d", i))
		gen = append(gen, lines[i].last)
	}
	start := time.Now()
	e.postAll(a, gen)
	for g := 2; g <= 20; g++ {
		gen = gen[:0]
		for i := range lines {
			lines[i].last = a.claim("repo", fmt.Sprint("thread-", i%10), lines[i].id, int64(g), lines[i].last.ID, exp, fmt.Sprintf("area/%d", i))
			gen = append(gen, lines[i].last)
		}
		e.postAll(a, gen)
	}
	t.Logf("posted 10,000 claim events in %v", time.Since(start))
	tips, err := e.st.ClaimTips(context.Background(), pid, "repo")
	if err != nil || len(tips) != 500 {
		t.Fatalf("%d tips, %v", len(tips), err)
	}
	client := &http.Client{}
	for _, q := range []string{"repository_id=repo", "repository_id=repo&thread_id=thread-3", "repository_id=repo&path=area/42"} {
		var lat []time.Duration
		var rows int
		var status string
		for range 300 {
			req, _ := http.NewRequest("GET", e.url+"/v1/correspondence/claims?"+q, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			t0 := time.Now()
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			lat = append(lat, time.Since(t0))
			var b claimsBody
			_ = json.Unmarshal(body, &b)
			rows, status = len(b.Claims), b.ProjectionStatus
		}
		t.Logf("GET /claims?%s → %d rows (%s): %s", q, rows, status, percentiles(lat))
	}
}

// figuresChild is what the child process prints on its first stdout line.
type figuresChild struct {
	URL, Token, ProjectID, IdentityID string
}

// TestFiguresChild is the relay under load; it only runs in the child.
func TestFiguresChild(t *testing.T) {
	if os.Getenv("ACRELAY_FIGURES_CHILD") == "" {
		t.Skip("runs only as the child process of the figures tests")
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test", WakeMaxStreamsPerToken: -1})
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mux.HandleFunc("/debug/memstats", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		_ = json.NewEncoder(w).Encode(map[string]uint64{
			"heap_inuse": m.HeapInuse, "stack_inuse": m.StackInuse, "sys": m.Sys,
			"goroutines": uint64(runtime.NumGoroutine()), "subscribers": uint64(s.WakeSubscribers()),
			"rss": rss(),
		})
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config = relay.HTTPServer("", mux)
	srv.Start()
	defer srv.Close()
	e := &env{t: t, st: st, srv: srv, url: srv.URL}
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	b, _ := json.Marshal(figuresChild{URL: srv.URL, Token: tok, ProjectID: pid, IdentityID: a.IdentityID})
	fmt.Printf("FIGURES %s\n", b)
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin when done
}

// rss reads this process's resident set size in bytes.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}

type childProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	info figuresChild
}

func startChild(t *testing.T) *childProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFiguresChild$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), "ACRELAY_FIGURES_CHILD=1")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childProc{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		if j, ok := strings.CutPrefix(line, "FIGURES "); ok {
			if err := json.Unmarshal([]byte(j), &c.info); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

func (c *childProc) memstats(t *testing.T) map[string]uint64 {
	t.Helper()
	res, err := http.Get(c.info.URL + "/debug/memstats")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]uint64
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// dialWake opens a raw wake stream and reads its response head.
func dialWake(addr, tok, identityID string) (net.Conn, *bufio.Reader, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(conn, "GET /v1/wake/voice?identity_id=%s&keys=correspondence HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer %s\r\n\r\n", identityID, tok)
	br := bufio.NewReaderSize(conn, 512)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
		if strings.HasPrefix(line, "HTTP/1.1 ") && !strings.HasPrefix(line, "HTTP/1.1 200") {
			conn.Close()
			return nil, nil, fmt.Errorf("status %s", strings.TrimSpace(line))
		}
		if line == "\r\n" {
			_ = conn.SetReadDeadline(time.Time{})
			return conn, br, nil
		}
	}
}

// TestFiguresIdleSubscriberMemory: 10,000 idle wake streams; the relay
// process's heap+stack and RSS growth per stream.
func TestFiguresIdleSubscriberMemory(t *testing.T) {
	figuresEnabled(t)
	c := startChild(t)
	addr := strings.TrimPrefix(c.info.URL, "http://")
	before := c.memstats(t)
	const n = 10000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for len(conns) < n {
		conn, _, err := dialWake(addr, c.info.Token, c.info.IdentityID)
		if err != nil {
			t.Fatalf("stream %d: %v", len(conns), err)
		}
		conns = append(conns, conn)
	}
	after := c.memstats(t)
	if after["subscribers"] != n {
		t.Fatalf("%d subscribers", after["subscribers"])
	}
	per := func(k string) float64 { return float64(after[k]-before[k]) / n }
	t.Logf("10,000 idle wake streams: heap+stack %.0f B/stream (heap %.0f, stack %.0f), RSS %.0f B/stream; goroutines %d → %d",
		per("heap_inuse")+per("stack_inuse"), per("heap_inuse"), per("stack_inuse"), per("rss"), before["goroutines"], after["goroutines"])
}

// TestFiguresWakeLatency: 1,000 streams of 1,000 identities; the time
// from the POST's 201 to each stream's change frame.
func TestFiguresWakeLatency(t *testing.T) {
	figuresEnabled(t)
	c := startChild(t)
	addr := strings.TrimPrefix(c.info.URL, "http://")
	const n = 1000
	type arrival struct {
		seq string
		at  time.Time
	}
	arrivals := make(chan arrival, n*4)
	e := &env{t: t, url: c.info.URL}
	var wg sync.WaitGroup
	var conns []net.Conn
	for range n {
		// Each stream is its own identity: ten pages of recipients.
		r := e.do("POST", "/v1/admin/projects/"+c.info.ProjectID+"/identities", c.info.Token, []byte(`{"display_name":"listener"}`))
		mustStatus(t, r, 201)
		conn, br, err := dialWake(addr, c.info.Token, r.json(t)["identity_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		wg.Go(func() {
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
					arrivals <- arrival{id, time.Now()}
				}
			}
		})
	}
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
		wg.Wait()
	}()
	a := e.newAgent(c.info.ProjectID, c.info.Token)
	var fromPost, fromCreated []time.Duration
	for i := range 20 {
		ev := a.intent("repo", fmt.Sprint("wake ", i))
		body := eventJSON(t, ev)
		t0 := time.Now()
		r := e.do("POST", "/v1/correspondence/events", a.Token, body)
		t201 := time.Now()
		mustStatus(t, r, 201)
		seq, _ := receiptOf(t, r)
		got := 0
		timeout := time.After(30 * time.Second)
		for got < n {
			select {
			case a := <-arrivals:
				if a.seq != seq {
					continue
				}
				got++
				fromPost = append(fromPost, a.at.Sub(t0))
				fromCreated = append(fromCreated, max(0, a.at.Sub(t201)))
			case <-timeout:
				t.Fatalf("seq %s: %d of %d frames", seq, got, n)
			}
		}
	}
	t.Logf("1,000 identities' streams, 20 POSTs: POST sent → frame %s", percentiles(fromPost))
	t.Logf("1,000 identities' streams, 20 POSTs: 201 read → frame (0 when the frame came first) %s", percentiles(fromCreated))
}
