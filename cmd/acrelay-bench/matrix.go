package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/internal/dendritetest"
)

// acrelay-bench matrix: the Matrix courier's figures (spec/matrix.md,
// STYLE.md §10) against a real Dendrite on loopback, each beside its bound
// measured in the same run: a bare mautrix loop sending the same two
// events per record (record event, notice) to one room, one after the
// other as the courier does, and nothing else. Per mode (application
// service, bot):
//
//   - throughput: --events records posted at once (--clients), records/s
//     from the first POST to the last record a syncing client sees;
//   - latency: --latency-events records posted one at a time at --rate,
//     from each POST's 201 to the record visible to the syncing client;
//   - POST latency of that paced load, beside the same load against a
//     relay with the courier off.

type matrixBenchConfig struct {
	Events, Clients int
	LatencyEvents   int
	Rate            float64
	RelayBin        string
	DendriteBin     string
	JSON            bool
}

type matrixResult struct {
	Label         string  `json:"label"`
	Records       int     `json:"records"`
	RecordsPerSec float64 `json:"records_per_second,omitempty"`
	VisibleP50    float64 `json:"visible_p50_ms,omitempty"`
	VisibleP99    float64 `json:"visible_p99_ms,omitempty"`
	PostP50       float64 `json:"post_p50_ms,omitempty"`
	PostP99       float64 `json:"post_p99_ms,omitempty"`
}

func newMatrixBenchCmd() *cobra.Command {
	var c matrixBenchConfig
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Matrix courier figures against a real Dendrite: records/s and POST→visible latency, appservice and bot mode, beside a bare mautrix send loop",
		Args:  cobra.NoArgs, SilenceUsage: true,
		Example: "  ACRELAY_DENDRITE_BIN=~/.cache/acrelay/dendrite-v0.13.8 acrelay-bench matrix --events 500 --latency-events 100 --rate 20",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMatrixBench(cmd.Context(), c, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Events, "events", 500, "records of the throughput phase, posted at once")
	f.IntVar(&c.Clients, "clients", 4, "concurrent POST clients of the throughput phase")
	f.IntVar(&c.LatencyEvents, "latency-events", 100, "records of the latency phase, posted one at a time")
	f.Float64Var(&c.Rate, "rate", 20, "records per second of the latency phase")
	f.StringVar(&c.RelayBin, "relay-bin", "", "acrelay binary (default: beside this binary, else go build ./cmd/acrelay)")
	f.StringVar(&c.DendriteBin, "dendrite-bin", dendritetest.BinDir(), "directory of the Dendrite v0.13.8 binaries (scripts/provision_dendrite.sh; ACRELAY_DENDRITE_BIN)")
	f.BoolVar(&c.JSON, "json", false, "print results as JSON lines")
	return cmd
}

func init() { rootCmd.AddCommand(newMatrixBenchCmd()) }

func runMatrixBench(ctx context.Context, c matrixBenchConfig, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if c.Events < 1 || c.Clients < 1 || c.LatencyEvents < 1 || c.Rate <= 0 {
		return fmt.Errorf("--events, --clients, --latency-events and --rate must be positive")
	}
	if err := dendritetest.Available(c.DendriteBin); err != nil {
		return fmt.Errorf("%w: run scripts/provision_dendrite.sh or pass --dendrite-bin", err)
	}
	bin, cleanup, err := resolveRelayBin(ctx, c.RelayBin)
	if err != nil {
		return err
	}
	defer cleanup()
	dir, err := os.MkdirTemp("", "acrelay-bench-matrix-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	asAddr, err := freeLoopback()
	if err != nil {
		return err
	}
	reg := appservice.CreateRegistration()
	reg.ID, reg.SenderLocalpart, reg.URL = "acrelay", "acrelay", "http://"+asAddr
	reg.AppToken, reg.ServerToken = randomHex(32), randomHex(32)
	reg.Namespaces.UserIDs.Register(regexp.MustCompile(`@acrelay:acrelay\.test`), true)
	y, err := reg.YAML()
	if err != nil {
		return err
	}
	regPath := filepath.Join(dir, "registration.yaml")
	if err := os.WriteFile(regPath, []byte(y), 0o600); err != nil {
		return err
	}
	hsDir := filepath.Join(dir, "dendrite")
	if err := os.Mkdir(hsDir, 0o700); err != nil {
		return err
	}
	hs, err := dendritetest.Launch(c.DendriteBin, hsDir, dendritetest.Options{AppserviceYAML: y})
	if err != nil {
		return err
	}
	defer hs.Stop()
	reader, err := hs.NewUser(ctx, "reader")
	if err != nil {
		return err
	}
	bot, err := hs.NewUser(ctx, "bot")
	if err != nil {
		return err
	}
	asCli, err := matrix.NewClient(hs.URL, hs.UserID("acrelay"), reg.AppToken)
	if err != nil {
		return err
	}
	botCli, err := matrix.NewClient(hs.URL, bot.UserID, bot.AccessToken)
	if err != nil {
		return err
	}

	show := func(r matrixResult) {
		if c.JSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(out, string(b))
			return
		}
		fmt.Fprintf(out, "%-34s %5d records  %7.1f records/s  visible p50 %6.1f ms p99 %6.1f ms  POST p50 %5.2f ms p99 %5.2f ms\n",
			r.Label, r.Records, r.RecordsPerSec, r.VisibleP50, r.VisibleP99, r.PostP50, r.PostP99)
	}
	// The courier off: the paced load's POST latency alone.
	off, err := matrixRelayRun(ctx, c, bin, nil, nil, nil, reader, "courier off")
	if err != nil {
		return err
	}
	show(off.lat)
	modes := []struct {
		name string
		args []string
		env  []string
		cli  *mautrix.Client
	}{
		{"appservice", []string{"--matrix-homeserver", hs.URL, "--matrix-registration", regPath}, nil, asCli},
		{"bot", []string{"--matrix-homeserver", hs.URL, "--matrix-user-id", bot.UserID.String()}, []string{"ACRELAY_MATRIX_ACCESS_TOKEN=" + bot.AccessToken}, botCli},
	}
	for _, m := range modes {
		res, err := matrixRelayRun(ctx, c, bin, m.args, m.env, m.cli, reader, m.name)
		if err != nil {
			return err
		}
		for _, r := range res.split() {
			show(r)
		}
		var sink string // appservice mode: Dendrite pushes the room's events to the relay; the bound's listener takes them
		if m.name == "appservice" {
			sink = asAddr
		}
		bound, err := matrixBound(ctx, c, m.cli, reader, m.name, sink)
		if err != nil {
			return err
		}
		for _, r := range bound.split() {
			show(r)
		}
		ratio := res.tput.RecordsPerSec / bound.tput.RecordsPerSec
		if c.JSON {
			b, _ := json.Marshal(map[string]any{"comparison": m.name + " courier / bare mautrix loop", "ratio": float64(int(ratio*1000)) / 1000,
				"post_p99_on_over_off": float64(int(res.lat.PostP99/off.lat.PostP99*1000)) / 1000})
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintf(out, "%s: courier / bare loop = %.2f; POST p99 on / off = %.2f\n", m.name, ratio, res.lat.PostP99/off.lat.PostP99)
		}
	}
	return nil
}

// matrixPair is a throughput and a latency result of one configuration.
type matrixPair struct{ tput, lat matrixResult }

func (p matrixPair) split() []matrixResult { return []matrixResult{p.tput, p.lat} }

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// watcher is a syncing client: it records when each record event (by
// correspondence event_id) first shows up in room.
type watcher struct {
	mu   sync.Mutex
	seen map[string]time.Time
	wake chan struct{}
}

func watch(ctx context.Context, cli *mautrix.Client, room id.RoomID) (*watcher, error) {
	w := &watcher{seen: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	// Start from now: an initial sync gives the position.
	resp, err := cli.SyncRequest(ctx, 0, "", "", false, event.PresenceOffline)
	if err != nil {
		return nil, err
	}
	since := resp.NextBatch
	go func() {
		for ctx.Err() == nil {
			// A timeline limit above any burst: a "limited" sync would
			// skip events.
			resp, err := cli.SyncRequest(ctx, 30000, since, `{"room":{"timeline":{"limit":1000}}}`, false, event.PresenceOffline)
			now := time.Now()
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			since = resp.NextBatch
			jr := resp.Rooms.Join[room]
			if jr == nil {
				continue
			}
			w.mu.Lock()
			for _, ev := range jr.Timeline.Events {
				if ev.Type.Type != matrix.EventTypeRecord {
					continue
				}
				var c struct {
					Event struct {
						EventID string `json:"event_id"`
					} `json:"event"`
				}
				if json.Unmarshal(ev.Content.VeryRaw, &c) == nil && c.Event.EventID != "" {
					if _, ok := w.seen[c.Event.EventID]; !ok {
						w.seen[c.Event.EventID] = now
					}
				}
			}
			w.mu.Unlock()
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}()
	return w, nil
}

// wait returns when every id in ids was seen (or after timeout).
func (w *watcher) wait(ctx context.Context, ids []string, timeout time.Duration) (map[string]time.Time, error) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		n := 0
		for _, id := range ids {
			if _, ok := w.seen[id]; ok {
				n++
			}
		}
		seen := make(map[string]time.Time, len(w.seen))
		for k, v := range w.seen {
			seen[k] = v
		}
		w.mu.Unlock()
		if n == len(ids) {
			return seen, nil
		}
		select {
		case <-w.wake:
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			return nil, fmt.Errorf("the syncing client saw %d of %d records in %s", n, len(ids), timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// benchSigner signs distinct events for one project of a relay.
type benchSigner struct {
	project, identity, key, session, device string
	priv                                    ed25519.PrivateKey
	seq                                     int64
}

func (s *benchSigner) event(i int) (string, []byte, error) {
	s.seq++
	ev := &correspondence.Event{ProjectID: s.project, RepositoryID: "repo:bench", ThreadID: "matrix-bench",
		Sender: correspondence.Sender{IdentityID: s.identity, SigningKeyID: s.key, DeviceID: s.device, SessionID: s.session},
		Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: s.seq, IssuedAt: correspondence.FormatTimestamp(time.Now()),
		Scope: correspondence.Scope{Paths: []string{"packages/sdk", "docs"}},
		Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary",
			Value: canonicaljson.StringValue("matrix bench event " + strconv.Itoa(i) + ": " + strings.Repeat("progress report text ", 40))})}
	if err := ev.Sign(s.priv); err != nil {
		return "", nil, err
	}
	b, err := ev.CanonicalJSON()
	return ev.ID, b, err
}

// matrixRelayRun starts a relay (the courier on with args and env, off
// when args is nil), binds a new room inviting reader, and measures the
// throughput and the paced latency phases.
func matrixRelayRun(ctx context.Context, c matrixBenchConfig, bin string, args, env []string, courier, reader *mautrix.Client, name string) (matrixPair, error) {
	r, err := startMatrixRelay(ctx, bin, args, env)
	if err != nil {
		return matrixPair{}, err
	}
	defer r.stop()
	client := &http.Client{Timeout: 30 * time.Second}
	m, err := benchAdmin(client, r.url, r.opToken, "/v1/admin/projects", map[string]any{})
	if err != nil {
		return matrixPair{}, err
	}
	s := &benchSigner{project: m["project_id"].(string), session: newBenchUUID(), device: newBenchUUID()}
	m, err = benchAdmin(client, r.url, r.opToken, "/v1/admin/projects/"+s.project+"/tokens", map[string]any{"scopes": []string{"read", "append", "admin"}})
	if err != nil {
		return matrixPair{}, err
	}
	token := m["token"].(string)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s.priv = priv
	if m, err = benchAdmin(client, r.url, token, "/v1/admin/projects/"+s.project+"/identities", map[string]any{}); err != nil {
		return matrixPair{}, err
	}
	s.identity = m["identity_id"].(string)
	if m, err = benchAdmin(client, r.url, token, "/v1/admin/identities/"+s.identity+"/keys", map[string]any{"public_key_b64url": correspondence.EncodePublicKey(pub)}); err != nil {
		return matrixPair{}, err
	}
	s.key = m["signing_key_id"].(string)
	var w *watcher
	if args != nil {
		m, err = benchAdmin(client, r.url, token, "/v1/admin/projects/"+s.project+"/matrix/bindings", map[string]any{"create": true, "invite": []string{reader.UserID.String()}})
		if err != nil {
			return matrixPair{}, err
		}
		room := id.RoomID(m["room_id"].(string))
		if _, err := reader.JoinRoomByID(ctx, room); err != nil {
			return matrixPair{}, err
		}
		if w, err = watch(ctx, reader, room); err != nil {
			return matrixPair{}, err
		}
	}
	post := func(b []byte) (time.Duration, error) {
		req, _ := http.NewRequest("POST", r.url+"/v1/correspondence/events", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 201 {
			return 0, fmt.Errorf("POST: %d", res.StatusCode)
		}
		return time.Since(t0), nil
	}
	var p matrixPair
	label := name
	if args != nil {
		label += " courier"
		// Throughput: everything at once.
		ids, bodies := make([]string, c.Events), make([][]byte, c.Events)
		for i := range ids {
			if ids[i], bodies[i], err = s.event(i); err != nil {
				return matrixPair{}, err
			}
		}
		start := time.Now()
		var next, errs int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range c.Clients {
			wg.Go(func() {
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= len(bodies) {
						return
					}
					if _, err := post(bodies[i]); err != nil {
						mu.Lock()
						errs++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if errs > 0 {
			return matrixPair{}, fmt.Errorf("%d POSTs failed", errs)
		}
		seen, err := w.wait(ctx, ids, 5*time.Minute)
		if err != nil {
			return matrixPair{}, err
		}
		var last time.Time
		for _, id := range ids {
			last = maxTime(last, seen[id])
		}
		p.tput = matrixResult{Label: label + " (throughput)", Records: len(ids), RecordsPerSec: float64(len(ids)) / last.Sub(start).Seconds()}
	}
	// Latency: paced, one at a time.
	var postLat, visLat []time.Duration
	var ids []string
	done := map[string]time.Time{}
	tick := time.NewTicker(time.Duration(float64(time.Second) / c.Rate))
	defer tick.Stop()
	for i := range c.LatencyEvents {
		<-tick.C
		id, b, err := s.event(c.Events + i)
		if err != nil {
			return matrixPair{}, err
		}
		d, err := post(b)
		if err != nil {
			return matrixPair{}, err
		}
		done[id] = time.Now()
		ids = append(ids, id)
		postLat = append(postLat, d)
	}
	p.lat = matrixResult{Label: label + " (paced " + strconv.FormatFloat(c.Rate, 'f', -1, 64) + "/s)", Records: len(ids),
		PostP50: pct(postLat, 50), PostP99: pct(postLat, 99)}
	if w != nil {
		seen, err := w.wait(ctx, ids, 2*time.Minute)
		if err != nil {
			return matrixPair{}, err
		}
		for _, id := range ids {
			visLat = append(visLat, seen[id].Sub(done[id]))
		}
		p.lat.VisibleP50, p.lat.VisibleP99 = pct(visLat, 50), pct(visLat, 99)
	}
	if args == nil {
		return matrixPair{lat: p.lat}, nil
	}
	return p, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pct is the p-th percentile of d, in milliseconds.
func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*p/100)]) / 1e6
}

// matrixBound is the bare bound of a mode: cli sends the same two events
// per record (record event, notice carrying the record) to a new room,
// one after the other, with explicit transaction ids, and nothing else:
// the throughput phase back to back, the latency phase paced.
//
// With sink (the registration's listener address), a listener there
// answers the homeserver's transactions 200 and discards them, so
// Dendrite does the same application-service work as for the courier.
func matrixBound(ctx context.Context, c matrixBenchConfig, cli, reader *mautrix.Client, name, sink string) (matrixPair, error) {
	if sink != "" {
		ln, err := net.Listen("tcp", sink)
		if err != nil {
			return matrixPair{}, err
		}
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{}")
		})}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	room, err := matrix.CreateRoom(ctx, cli, "bench bound", []id.UserID{reader.UserID})
	if err != nil {
		return matrixPair{}, err
	}
	if _, err := reader.JoinRoomByID(ctx, room); err != nil {
		return matrixPair{}, err
	}
	w, err := watch(ctx, reader, room)
	if err != nil {
		return matrixPair{}, err
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s := &benchSigner{project: newBenchUUID(), identity: newBenchUUID(), key: newBenchUUID(), session: newBenchUUID(), device: newBenchUUID(), priv: priv}
	var seq int64
	send := func(i int) (string, error) {
		eid, raw, err := s.event(i)
		if err != nil {
			return "", err
		}
		seq++
		content := json.RawMessage(`{"event":` + string(raw) + `,"receipt":{"received_at":"` + correspondence.FormatTimestamp(time.Now()) +
			`","received_seq":"` + strconv.FormatInt(seq, 10) + `"},"relay":"http://127.0.0.1"}`)
		if _, err := cli.SendMessageEvent(ctx, room, event.Type{Type: matrix.EventTypeRecord, Class: event.MessageEventType}, content,
			mautrix.ReqSendEvent{TransactionID: matrix.TxnID(room.String(), eid, "record")}); err != nil {
			return "", err
		}
		notice := map[string]any{"msgtype": "m.notice", "body": "[progress] bench " + eid, matrix.KeyRecord: content}
		if _, err := cli.SendMessageEvent(ctx, room, event.EventMessage, notice,
			mautrix.ReqSendEvent{TransactionID: matrix.TxnID(room.String(), eid, "notice")}); err != nil {
			return "", err
		}
		return eid, nil
	}
	label := name + " bare mautrix loop"
	var p matrixPair
	ids := make([]string, c.Events)
	start := time.Now()
	for i := range ids {
		if ids[i], err = send(i); err != nil {
			return matrixPair{}, err
		}
	}
	seen, err := w.wait(ctx, ids, 5*time.Minute)
	if err != nil {
		return matrixPair{}, err
	}
	var last time.Time
	for _, id := range ids {
		last = maxTime(last, seen[id])
	}
	p.tput = matrixResult{Label: label + " (throughput)", Records: len(ids), RecordsPerSec: float64(len(ids)) / last.Sub(start).Seconds()}
	tick := time.NewTicker(time.Duration(float64(time.Second) / c.Rate))
	defer tick.Stop()
	var lat []time.Duration
	ids = ids[:0]
	began := map[string]time.Time{}
	for i := range c.LatencyEvents {
		<-tick.C
		t0 := time.Now()
		eid, err := send(c.Events + i)
		if err != nil {
			return matrixPair{}, err
		}
		began[eid] = t0
		ids = append(ids, eid)
	}
	if seen, err = w.wait(ctx, ids, 2*time.Minute); err != nil {
		return matrixPair{}, err
	}
	for _, id := range ids {
		lat = append(lat, seen[id].Sub(began[id]))
	}
	p.lat = matrixResult{Label: label + " (paced " + strconv.FormatFloat(c.Rate, 'f', -1, 64) + "/s)", Records: len(ids),
		VisibleP50: pct(lat, 50), VisibleP99: pct(lat, 99)}
	return p, nil
}

// startMatrixRelay starts an acrelay relay on a temporary SQLite store
// with extra serve arguments and environment.
func startMatrixRelay(ctx context.Context, bin string, args, env []string) (*benchRelay, error) {
	dir, err := os.MkdirTemp("", "acrelay-bench-")
	if err != nil {
		return nil, err
	}
	addr, err := freeLoopback()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	op := randomHex(24)
	cmd := exec.Command(bin, append(benchServerArgs(0, addr, dir, ""), args...)...)
	cmd.Env = append(append(os.Environ(), "ACRELAY_OPERATOR_TOKEN="+op), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	stopWithParent(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &benchRelay{cmd: cmd, url: "http://" + addr, opToken: op, dir: dir, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := http.Get(r.url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return r, nil
			}
		}
		select {
		case <-r.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("relay exited before it became healthy (its error is above)")
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("relay did not become healthy in 30s")
		}
	}
}
