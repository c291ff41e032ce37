package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/dendritetest"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/relay"
)

// killLease is the cluster's --courier-lease in TestKillLeaseHolderUnderLoad:
// short, so that a takeover after a kill is quick, and long enough for a
// Dendrite send on a loaded machine (a delivery gets 5/12 to 3/4 of it,
// 2.5 to 4.5 s; with 3 s, sends cut at 1.25 to 2.25 s failed again and
// again on a machine at load 7, and the room's stored backoff grew past
// 30 s).
const killLease = 6 * time.Second

// clusterProc is one `acrelay serve` process of the cluster: a fixed
// address and data directory (its lease holder identity), restarted on
// both after each kill.
type clusterProc struct {
	name, addr, data string
	asAddr           string // its application-service listener (Matrix)
	holder           string // the lease holder id in data/lease-holder
	mu               sync.Mutex
	proc             *relayProc // nil while down
}

func (c *clusterProc) live() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc != nil
}

// sinkLog is what one receiver got: the deliveries of each record (by
// event_id), the bytes of the first, and when each delivery (a WebSub
// request, a Matrix event) arrived.
type sinkLog struct {
	mu     sync.Mutex
	count  map[string]int
	first  map[string][]byte
	at     []time.Time
	differ []string // event ids delivered again with other bytes
}

func newSinkLog() *sinkLog {
	return &sinkLog{count: map[string]int{}, first: map[string][]byte{}}
}

// add logs one delivery of the records ids (raws their bytes; nil when
// the receiver does not see them).
func (s *sinkLog) add(ids []string, raws [][]byte, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, id := range ids {
		var raw []byte
		if raws != nil {
			raw = raws[i]
		}
		s.count[id]++
		if b, ok := s.first[id]; !ok {
			s.first[id] = bytes.Clone(raw)
		} else if raw != nil && !bytes.Equal(b, raw) {
			s.differ = append(s.differ, id)
		}
	}
	s.at = append(s.at, at)
}

// missing returns the ids of want this sink never got.
func (s *sinkLog) missing(want []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range want {
		if s.count[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// duplicates is the number of deliveries beyond the first of each record.
func (s *sinkLog) duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.count {
		n += c - 1
	}
	return n
}

// resumedAfter is when the second delivery after t arrived, and whether
// one did. A killed process sends one request at a time to a receiver,
// and that one may still arrive after its death (a homeserver finishing
// a send it had begun); the second can only be its successor's.
func (s *sinkLog) resumedAfter(t time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.at {
		if at.After(t) {
			if n++; n == 2 {
				return at, true
			}
		}
	}
	return time.Time{}, false
}

// recordIDs parses a JSON topic delivery ({"events":[record…]}) into its
// records' event ids and raw record bytes.
func recordIDs(body []byte) ([]string, [][]byte, error) {
	var d struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, nil, err
	}
	var ids []string
	var raws [][]byte
	for _, r := range d.Events {
		var rec struct {
			Event struct {
				EventID string `json:"event_id"`
			} `json:"event"`
		}
		if err := json.Unmarshal(r, &rec); err != nil || rec.Event.EventID == "" {
			return nil, nil, fmt.Errorf("record without event_id: %.200s", r)
		}
		ids = append(ids, rec.Event.EventID)
		raws = append(raws, r)
	}
	return ids, raws, nil
}

// TestKillLeaseHolderUnderLoad (issue 26, "What it must show"): three
// `acrelay serve` processes on one PostgreSQL database (--courier-lease
// 6s) behind a load balancer the test runs (their --public-url), with three
// WebSub subscriptions (HMAC-checked callback servers), a Matrix room bound
// (Dendrite), and a fourth relay Q that mirrors the project through a
// federation link to the cluster while the cluster links to Q. A poster
// appends continuously through a process that is not about to be killed
// (and every 10th record through Q). The process holding the project's
// courier leases (read from courier_leases) is SIGKILLed 20 times (5 with
// -short): after even kills it is restarted at once (it reclaims its
// leases), after odd ones only once another process has taken over.
// Each time every receiver gets a record posted after the kill within
// lease + 2 s. At the end every acknowledged record reached every
// subscription, the room and Q, exactly: duplicates only with the same
// event_id and bytes, counted per receiver and logged. Q's hub's
// verifications and pushes to the cluster are routed to a process that
// holds no lease and are answered there.
func TestKillLeaseHolderUnderLoad(t *testing.T) {
	args := postgresArgsShort(t)
	if err := dendritetest.Available(dendritetest.BinDir()); err != nil {
		t.Skipf("%v (run scripts/provision_dendrite.sh or set ACRELAY_DENDRITE_BIN)", err)
	}
	kills := 20
	if testing.Short() {
		kills = 5
	}
	bin := acrelayBinary(t)
	dbURL := args[1]
	const op = "kill-holder-operator-token"
	env := "ACRELAY_OPERATOR_TOKEN=" + op
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The load balancer in front of the cluster; its URL is the cluster's
	// public URL (topics, callbacks, the application service URL).
	procs := make([]*clusterProc, 3)
	for i := range procs {
		procs[i] = &clusterProc{name: "P" + strconv.Itoa(i), addr: freeAddr(t), asAddr: freeAddr(t), data: t.TempDir()}
	}
	var holdersMu sync.Mutex
	holders := map[string]string{} // courier → holder id, of the project's live leases
	holderOf := func(courier string) string {
		holdersMu.Lock()
		defer holdersMu.Unlock()
		return holders[courier]
	}
	// holdsAny: the process holding id holds one of the project's leases.
	holdsAny := func(id string) bool {
		holdersMu.Lock()
		defer holdersMu.Unlock()
		for _, h := range holders {
			if h == id {
				return true
			}
		}
		return false
	}
	type answer struct {
		proc         string
		holdsLease   bool
		method       string
		status       int
		verification bool
	}
	var callbacksMu sync.Mutex
	var callbacks []answer
	rr := 0
	var rrMu sync.Mutex
	// pick chooses a live process, round robin; for a federation
	// callback one that holds none of the project's leases, else one
	// that does not hold its federation lease.
	pick := func(callback bool) *clusterProc {
		rrMu.Lock()
		defer rrMu.Unlock()
		fed := holderOf("federation")
		var fallback *clusterProc
		for range len(procs) {
			rr = (rr + 1) % len(procs)
			c := procs[rr]
			switch {
			case !c.live():
			case !callback || !holdsAny(c.holder):
				return c
			case c.holder != fed && fallback == nil:
				fallback = c
			}
		}
		return fallback
	}
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		callback := strings.HasPrefix(r.URL.Path, relay.CallbackPath)
		c := pick(callback)
		if c == nil {
			http.Error(w, "no process", http.StatusBadGateway)
			return
		}
		u, _ := url.Parse("http://" + c.addr)
		rec := &lbRecorder{ResponseWriter: w}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
		rp.ServeHTTP(rec, r)
		if callback {
			callbacksMu.Lock()
			callbacks = append(callbacks, answer{c.name, holdsAny(c.holder), r.Method, rec.status, r.URL.Query().Get("hub.challenge") != ""})
			callbacksMu.Unlock()
		}
	}))
	t.Cleanup(lb.Close)
	// Dendrite's pushes to the application service go to any live
	// process's application-service listener.
	asLB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := pick(false)
		if c == nil {
			http.Error(w, "no process", http.StatusBadGateway)
			return
		}
		rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: c.asAddr})
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(asLB.Close)

	// Dendrite, with the cluster as its application service (through the
	// load balancer).
	dir := t.TempDir()
	reg, err := exec.Command(bin, "matrix", "registration", "--url", asLB.URL, "--homeserver-name", "acrelay.test").Output()
	if err != nil {
		t.Fatalf("matrix registration: %v", err)
	}
	regPath := filepath.Join(dir, "acrelay-registration.yaml")
	if err := os.WriteFile(regPath, reg, 0o600); err != nil {
		t.Fatal(err)
	}
	hs := dendritetest.Start(t, dendritetest.Options{AppserviceYAML: string(reg)})
	alice := hs.CreateUser("alice")
	courierUser := hs.UserID("acrelay")

	common := []string{"--websub-allow-hosts", "127.0.0.1", "--federation-poll", "200ms", "--federation-idle-poll", "2s",
		"--federation-keys-interval", "300ms", "--websub-retry-initial", "100ms", "--websub-retry-max", "500ms"}
	clusterArgs := func(c *clusterProc) []string {
		return append([]string{"--database-url", dbURL, "--data-dir", c.data, "--public-url", lb.URL,
			"--courier-lease", killLease.String(), "--matrix-homeserver", hs.URL, "--matrix-registration", regPath,
			"--matrix-appservice-addr", c.asAddr}, common...)
	}
	logDir := t.TempDir()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, c := range procs {
			b, _ := os.ReadFile(filepath.Join(logDir, c.name+".log"))
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s's log, last lines:\n%s", c.name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	start := func(c *clusterProc) {
		p := startClusterProc(t, bin, c.addr, clusterArgs(c), filepath.Join(logDir, c.name+".log"), env)
		if c.holder == "" {
			b, err := os.ReadFile(filepath.Join(c.data, lease.IdentityFile))
			if err != nil || len(b) == 0 {
				t.Fatalf("%s: no holder identity: %v", c.name, err)
			}
			c.holder = strings.TrimSpace(string(b))
		}
		c.mu.Lock()
		c.proc = p
		c.mu.Unlock()
	}
	kill := func(c *clusterProc) {
		c.mu.Lock()
		p := c.proc
		c.proc = nil
		c.mu.Unlock()
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
	// P0 first: it takes every lease of the project; the others join.
	start(procs[0])
	proj := registerProject(t, lb.URL, op)

	// The lease rows, read every 100 ms.
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	go func() {
		for ctx.Err() == nil {
			rows, err := pool.Query(ctx, `SELECT courier, holder FROM courier_leases WHERE project_id = $1 AND expires_at > now()`, proj.id)
			if err == nil {
				m := map[string]string{}
				for rows.Next() {
					var c, h string
					if rows.Scan(&c, &h) == nil {
						m[c] = h
					}
				}
				rows.Close()
				holdersMu.Lock()
				holders = m
				holdersMu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// The poster's bookkeeping: the records acknowledged (201).
	var postMu sync.Mutex
	var ackedIDs []string

	// Three WebSub subscriptions on two callback servers, each with its
	// own secret; every delivery's signature is checked.
	topic := hub.Topic{ProjectID: proj.id, Format: hub.FormatJSON}.URL(lb.URL)
	// Every receiver's log exists before any server runs (the map is
	// only read from then on).
	sinks := map[string]*sinkLog{}
	for _, name := range []string{"sub1", "sub2", "sub3", "matrix", "peer"} {
		sinks[name] = newSinkLog()
	}
	var badMu sync.Mutex
	var bad []string
	secrets := map[string]string{"sub1": "secret-one-" + newTestUUID(), "sub2": "secret-two-" + newTestUUID(), "sub3": "secret-three-" + newTestUUID()}
	callbackServer := func() *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name := strings.TrimPrefix(r.URL.Path, "/")
			secret, ok := secrets[name]
			if !ok {
				http.NotFound(w, r)
				return
			}
			if r.Method == http.MethodGet {
				_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
				return
			}
			body, _ := io.ReadAll(r.Body)
			m := hmac.New(sha256.New, []byte(secret))
			m.Write(body)
			if r.Header.Get("X-Hub-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) {
				badMu.Lock()
				bad = append(bad, name+": bad signature")
				badMu.Unlock()
				w.WriteHeader(http.StatusNoContent) // acknowledged and dropped, as WebSub asks
				return
			}
			ids, raws, err := recordIDs(body)
			if err != nil {
				badMu.Lock()
				bad = append(bad, name+": "+err.Error())
				badMu.Unlock()
			}
			sinks[name].add(ids, raws, time.Now())
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(s.Close)
		return s
	}
	cb1, cb2 := callbackServer(), callbackServer()
	for name, base := range map[string]string{"sub1": cb1.URL, "sub2": cb1.URL, "sub3": cb2.URL} {
		form := url.Values{"hub.mode": {"subscribe"}, "hub.callback": {base + "/" + name}, "hub.topic": {topic},
			"hub.secret": {secrets[name]}, "hub.lease_seconds": {"3600"}}
		req, _ := http.NewRequest("POST", lb.URL+"/websub/hub", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+proj.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("subscribe %s: %d %s", name, res.StatusCode, b)
		}
	}

	// The Matrix room, and alice's /sync recording when each record
	// arrives.
	status, m := httpJSON(t, "POST", lb.URL+"/v1/admin/projects/"+proj.id+"/matrix/bindings", proj.token,
		map[string]any{"create": true, "invite": []string{alice.UserID.String()}})
	if status != 201 {
		t.Fatalf("POST bindings: %d %v", status, m)
	}
	room := id.RoomID(m["room_id"].(string))
	if _, err := alice.JoinRoomByID(ctx, room); err != nil {
		t.Fatal(err)
	}
	go func() {
		since := ""
		filter := `{"room":{"rooms":["` + string(room) + `"],"timeline":{"limit":1000}},"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]}}`
		for ctx.Err() == nil {
			resp, err := alice.FullSyncRequest(ctx, mautrix.ReqSync{Timeout: 5000, Since: since, FilterID: filter})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			now := time.Now()
			since = resp.NextBatch
			if jr, ok := resp.Rooms.Join[room]; ok {
				for _, ev := range jr.Timeline.Events {
					if ev.Sender != courierUser {
						continue
					}
					if ev.Type.Type == "m.room.message" {
						// A record's notice: a delivery too, for the
						// resume time (a killed process has one send in
						// flight, the notice or the record).
						sinks["matrix"].add(nil, nil, now)
						continue
					}
					if ev.Type.Type != matrix.EventTypeRecord {
						continue
					}
					var c struct {
						Event struct {
							EventID string `json:"event_id"`
						} `json:"event"`
					}
					if json.Unmarshal(ev.Content.VeryRaw, &c) == nil {
						sinks["matrix"].add([]string{c.Event.EventID}, nil, now) // counted again from /messages at the end
					}
				}
			}
		}
	}()

	// Q, the fourth relay, behind a proxy that records what the cluster's
	// hub pushes to it.
	qAddr := freeAddr(t)
	qProxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, relay.CallbackPath) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := &lbRecorder{ResponseWriter: w}
			httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: qAddr}).ServeHTTP(rec, r)
			if rec.status/100 == 2 {
				if ids, raws, err := recordIDs(body); err == nil {
					sinks["peer"].add(ids, raws, time.Now())
				}
			}
			return
		}
		httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: qAddr}).ServeHTTP(w, r)
	}))
	t.Cleanup(qProxy.Close)
	q := startRelayAt(t, bin, qAddr, append([]string{"--data-dir", t.TempDir(), "--public-url", qProxy.URL,
		"--courier-lease", "2s"}, common...), env)
	if st, m := httpJSON(t, "POST", q.url+"/v1/admin/projects", op, map[string]any{"project_id": proj.id}); st != 201 {
		t.Fatalf("create the project on Q: %d %v", st, m)
	}
	_, m = httpJSON(t, "POST", q.url+"/v1/admin/projects/"+proj.id+"/tokens", op, map[string]any{"scopes": []string{"read", "append"}})
	tokenQ := m["token"].(string)
	_, m = httpJSON(t, "POST", lb.URL+"/v1/admin/projects/"+proj.id+"/tokens", op, map[string]any{"scopes": []string{"read"}})
	readCluster := m["token"].(string)
	if st, m := httpJSON(t, "POST", q.url+"/v1/admin/projects/"+proj.id+"/peers", op, map[string]any{"remote_url": lb.URL, "token": readCluster}); st != 201 {
		t.Fatalf("peer add on Q: %d %v", st, m)
	}
	if st, m := httpJSON(t, "POST", lb.URL+"/v1/admin/projects/"+proj.id+"/peers", op, map[string]any{"remote_url": qProxy.URL, "token": tokenQ}); st != 201 {
		t.Fatalf("peer add on the cluster: %d %v", st, m)
	}

	// The other two processes, once P0 holds everything.
	eventuallyT(t, 20*time.Second, "P0 holds the project's websub, matrix and federation leases", func() bool {
		return holderOf("websub") == procs[0].holder && holderOf("matrix") == procs[0].holder && holderOf("federation") == procs[0].holder
	})
	start(procs[1])
	start(procs[2])

	// Warm up: a record reaches every receiver before the first kill.
	warm := proj.post(t, lb.URL, "warm-up")
	postMu.Lock()
	ackedIDs = append(ackedIDs, warm)
	postMu.Unlock()
	eventuallyT(t, 60*time.Second, "the warm-up record at every receiver", func() bool {
		for _, s := range sinks {
			if len(s.missing([]string{warm})) > 0 {
				return false
			}
		}
		return true
	})

	// The poster: every 500 ms a record through its target (a live
	// process that is not about to be killed), every 10th through Q.
	var target struct {
		sync.Mutex
		url string
	}
	setTarget := func(c *clusterProc) {
		target.Lock()
		target.url = "http://" + c.addr
		target.Unlock()
	}
	setTarget(procs[1])
	stop := make(chan struct{})
	posterDone := make(chan struct{})
	var postErrs int
	go func() {
		defer close(posterDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			target.Lock()
			u := target.url
			target.Unlock()
			tok := proj.token
			if i%10 == 9 {
				u, proj.token = q.url, tokenQ
			}
			eid, st, err := proj.trySend(u, "load "+strconv.Itoa(i))
			proj.token = tok
			postMu.Lock()
			if err == nil && st == 201 {
				ackedIDs = append(ackedIDs, eid)
			} else {
				postErrs++
			}
			postMu.Unlock()
		}
	}()

	// The kills.
	byHolder := func(h string) *clusterProc {
		for _, c := range procs {
			if c.holder == h {
				return c
			}
		}
		return nil
	}
	budget := killLease + 2*time.Second
	var resumes []time.Duration
	for k := range kills {
		// The victim: the process holding most of the project's courier
		// leases.
		var victim *clusterProc
		eventuallyT(t, 20*time.Second, "a live process holding the project's courier leases", func() bool {
			n := map[*clusterProc]int{}
			for _, courier := range []string{"websub", "matrix", "federation"} {
				if c := byHolder(holderOf(courier)); c != nil && c.live() {
					n[c]++
				}
			}
			victim = nil
			for c, v := range n {
				if victim == nil || v > n[victim] {
					victim = c
				}
			}
			return victim != nil
		})
		for _, c := range procs {
			if c != victim && c.live() {
				setTarget(c)
				break
			}
		}
		time.Sleep(300 * time.Millisecond) // under load through the new target
		killed := time.Now()
		kill(victim)
		if k%2 == 0 {
			start(victim)
		}
		// Resumed: each receiver got a delivery from a successor.
		var worst time.Duration
		worstSink := ""
		deadline := killed.Add(budget + 20*time.Second)
		for name, s := range sinks {
			for {
				at, ok := s.resumedAfter(killed)
				if ok {
					if d := at.Sub(killed); d > worst {
						worst, worstSink = d, name
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("kill %d of %s: %s got no delivery from a successor within %v", k, victim.name, name, budget+20*time.Second)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		resumes = append(resumes, worst)
		how := "restarted at once"
		if k%2 == 1 {
			how = "taken over"
			if c := byHolder(holderOf("websub")); c != nil {
				how += " by " + c.name
			}
			start(victim)
		}
		t.Logf("kill %2d: %s (%s); every receiver resumed within %v (last: %s)", k, victim.name, how, worst.Round(time.Millisecond), worstSink)
		if worst > budget {
			t.Errorf("kill %d: %s resumed %v after the kill, want ≤ lease + 2 s = %v", k, worstSink, worst.Round(time.Millisecond), budget)
		}
	}
	close(stop)
	<-posterDone

	// Every acknowledged record at every receiver, and on Q.
	postMu.Lock()
	acked := slices.Clone(ackedIDs)
	errs := postErrs
	postMu.Unlock()
	eventuallyT(t, 60*time.Second, "every acknowledged record stored on the cluster", func() bool {
		have := map[string]bool{}
		for _, id := range eventIDs(t, lb.URL, readCluster, proj.id) {
			have[id] = true
		}
		for _, id := range acked {
			if !have[id] {
				return false
			}
		}
		return true
	})
	for name, s := range sinks {
		if name == "matrix" {
			continue
		}
		eventuallyT(t, 60*time.Second, name+" got every acknowledged record", func() bool { return len(s.missing(acked)) == 0 })
	}
	var roomIDs []string
	eventuallyT(t, 90*time.Second, "the room holds every acknowledged record", func() bool {
		got, err := readRoomRecords(alice, room, courierUser)
		if err != nil {
			return false
		}
		roomIDs = got
		have := map[string]bool{}
		for _, id := range got {
			have[id] = true
		}
		for _, id := range acked {
			if !have[id] {
				return false
			}
		}
		return true
	})
	qIDs := eventIDs(t, q.url, tokenQ, proj.id)
	for _, id := range acked {
		if !slices.Contains(qIDs, id) {
			t.Fatalf("acknowledged record %s not on Q", id)
		}
	}
	roomCount := map[string]int{}
	roomDups := 0
	for _, id := range roomIDs {
		if roomCount[id]++; roomCount[id] > 1 {
			roomDups++
		}
	}
	badMu.Lock()
	if len(bad) > 0 {
		t.Fatalf("callback servers: %v", bad)
	}
	badMu.Unlock()
	var report []string
	for _, name := range []string{"sub1", "sub2", "sub3", "peer"} {
		s := sinks[name]
		if len(s.differ) > 0 {
			t.Fatalf("%s: records delivered again with other bytes: %v", name, s.differ)
		}
		report = append(report, fmt.Sprintf("%s %d", name, s.duplicates()))
	}
	report = append(report, fmt.Sprintf("matrix room %d", roomDups))
	sort.Slice(resumes, func(i, j int) bool { return resumes[i] < resumes[j] })
	t.Logf("%d records acknowledged (%d posts refused or cut), 0 undelivered to 3 subscriptions, the room and Q; duplicates (same event_id and bytes): %s",
		len(acked), errs, strings.Join(report, ", "))
	t.Logf("resume after each of %d kills (lease %v): min %v, median %v, max %v", kills, killLease,
		resumes[0].Round(time.Millisecond), resumes[len(resumes)/2].Round(time.Millisecond), resumes[len(resumes)-1].Round(time.Millisecond))

	// Q's hub verified and pushed through processes that held no lease.
	callbacksMu.Lock()
	defer callbacksMu.Unlock()
	var verified, pushed int
	for _, a := range callbacks {
		if a.holdsLease {
			continue
		}
		switch {
		case a.method == http.MethodGet && a.verification && a.status == http.StatusOK:
			verified++
		case a.method == http.MethodPost && a.status == http.StatusNoContent:
			pushed++
		}
	}
	t.Logf("Q's hub: %d verifications answered 200 and %d pushes answered 204 by processes holding none of the project's leases (%d callbacks in all)", verified, pushed, len(callbacks))
	if verified < 1 || pushed < 1 {
		t.Fatalf("verifications answered by a non-holder: %d, pushes: %d; want ≥ 1 each", verified, pushed)
	}
}

// postgresArgsShort is postgresArgs that also runs under -short.
func postgresArgsShort(t *testing.T) []string {
	t.Helper()
	url := os.Getenv("ACRELAY_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("ACRELAY_TEST_DATABASE_URL not set; scripts/test.sh provisions a throwaway PostgreSQL")
	}
	if postgresOpener == nil {
		t.Skip("PostgreSQL store not built in")
	}
	return []string{"--database-url", freshDatabase(t, url)}
}

// eventuallyT polls cond every 50 ms until it holds or within passes.
func eventuallyT(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventIDs reads the event ids of project pid's records at the relay at
// url through the project-wide replay.
func eventIDs(t *testing.T, url, token, pid string) []string {
	t.Helper()
	var out []string
	after := ""
	for {
		q := "/v1/correspondence/events?project_id=" + pid + "&limit=200"
		if after != "" {
			q += "&after=" + after
		}
		st, page := httpJSON(t, "GET", url+q, token, nil)
		if st != 200 {
			t.Fatalf("replay: %d %v", st, page)
		}
		for _, r := range page["events"].([]any) {
			out = append(out, r.(map[string]any)["event"].(map[string]any)["event_id"].(string))
		}
		pg := page["page"].(map[string]any)
		if !pg["has_more"].(bool) {
			return out
		}
		after = pg["next_after"].(string)
	}
}

// lbRecorder keeps the status a proxied answer had (200 when the handler
// wrote no header).
type lbRecorder struct {
	http.ResponseWriter
	status int
}

func (w *lbRecorder) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *lbRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// startClusterProc is startRelayAt with the process's log (level info)
// appended to logFile, kept for a failing test's report.
func startClusterProc(t *testing.T, bin, addr string, args []string, logFile string, env ...string) *relayProc {
	t.Helper()
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "--- start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--log-level", "info"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProc{cmd: cmd, url: "http://" + addr}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get(p.url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(logFile)
	t.Fatalf("relay did not start: %s", b)
	return nil
}
