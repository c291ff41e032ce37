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
	// Rounds repeats every run, interleaved (courier, bound, per mode).
	Rounds int
	// ProfileDir, when set, receives CPU profiles of the relay and of
	// Dendrite (PPROFLISTEN) during each throughput phase.
	ProfileDir     string
	ProfileSeconds int

	// Encrypted compares, in bot mode, a room the relay creates
	// end-to-end encrypted with an unencrypted one, the reader decrypting
	// (issue 31); needs a goolm build.
	Encrypted bool

	dendritePprof string // set by runMatrixBench
	dendritePid   int
	round         int
	encryptRoom   bool       // this run's room is created encrypted
	dec           *decryptor // the reader's encryption (with Encrypted)
}

type matrixResult struct {
	Label         string  `json:"label"`
	Records       int     `json:"records"`
	RecordsPerSec float64 `json:"records_per_second,omitempty"`
	VisibleP50    float64 `json:"visible_p50_ms,omitempty"`
	VisibleP99    float64 `json:"visible_p99_ms,omitempty"`
	PostP50       float64 `json:"post_p50_ms,omitempty"`
	PostP99       float64 `json:"post_p99_ms,omitempty"`
	// RelayCPU and DendriteCPU are each process's CPU time over the
	// throughput phase's wall time (1 = one core busy).
	RelayCPU float64 `json:"relay_cpu,omitempty"`
	// Failed counts the courier's failed deliveries in the phase (each
	// backs off and makes the next delivery reconcile).
	Failed      int     `json:"failed_deliveries,omitempty"`
	DendriteCPU float64 `json:"dendrite_cpu,omitempty"`
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
	f.IntVar(&c.Rounds, "rounds", 1, "repeat every run this many times, interleaved (per mode: courier, bound)")
	f.StringVar(&c.ProfileDir, "profile-dir", "", "save CPU profiles of the relay (--pprof-addr) and of Dendrite (PPROFLISTEN) from each throughput phase's start: relay-<mode>-r<round>.prof, dendrite-<mode>[-bound]-r<round>.prof")
	f.IntVar(&c.ProfileSeconds, "profile-seconds", 10, "length of each CPU profile (keep it under the throughput phase)")
	f.BoolVar(&c.Encrypted, "encrypted", false, "bot mode: an end-to-end encrypted room against an unencrypted one in the same run, the reader decrypting (records/s, POST→decrypted-at-member latency; needs -tags goolm)")
	return cmd
}

func init() { rootCmd.AddCommand(newMatrixBenchCmd()) }

func runMatrixBench(ctx context.Context, c matrixBenchConfig, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if c.Events < 1 || c.Clients < 1 || c.LatencyEvents < 1 || c.Rate <= 0 || c.Rounds < 1 {
		return fmt.Errorf("--events, --clients, --latency-events, --rate and --rounds must be positive")
	}
	if c.ProfileDir != "" {
		if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
			return err
		}
		// Dendrite serves net/http/pprof when PPROFLISTEN is set; it
		// inherits this process's environment.
		addr, err := freeLoopback()
		if err != nil {
			return err
		}
		os.Setenv("PPROFLISTEN", addr)
		c.dendritePprof = "http://" + addr
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
	c.dendritePid = findPid(filepath.Join(hsDir, "dendrite.yaml"))
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

	if c.Encrypted {
		return runEncryptedBench(ctx, c, bin, hs, reader, dir, out)
	}
	show := func(r matrixResult) {
		if c.JSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(out, string(b))
			return
		}
		fmt.Fprintf(out, "%-34s %5d records  %7.1f records/s  visible p50 %6.1f ms p99 %6.1f ms  POST p50 %5.2f ms p99 %5.2f ms  cpu relay %.2f dendrite %.2f  failed %d\n",
			r.Label, r.Records, r.RecordsPerSec, r.VisibleP50, r.VisibleP99, r.PostP50, r.PostP99, r.RelayCPU, r.DendriteCPU, r.Failed)
	}
	type modeRun struct {
		name string
		args []string
		env  []string
		cli  *mautrix.Client
		sink string // appservice mode: Dendrite pushes the room's events to the relay; the bound's listener takes them
	}
	modes := []modeRun{
		{"appservice", []string{"--matrix-homeserver", hs.URL, "--matrix-registration", regPath}, nil, asCli, asAddr},
		{"bot", []string{"--matrix-homeserver", hs.URL, "--matrix-user-id", bot.UserID.String()}, []string{"ACRELAY_MATRIX_ACCESS_TOKEN=" + bot.AccessToken}, botCli, ""},
	}
	ratios := map[string][]float64{}
	onP99 := map[string][]float64{}
	var offPost []time.Duration
	onPost := map[string][]time.Duration{}
	for round := 1; round <= c.Rounds; round++ {
		c.round = round
		// The courier off: the paced load's POST latency alone.
		off, err := matrixRelayRun(ctx, c, bin, nil, nil, nil, reader, "courier off")
		if err != nil {
			return err
		}
		show(off.lat)
		offPost = append(offPost, off.post...)
		for _, m := range modes {
			// Odd rounds run the courier first, even rounds the bound, so
			// a drift of the machine or of Dendrite favours neither.
			var res, bound matrixPair
			for i := range 2 {
				var p matrixPair
				var err error
				if (i == 0) == (round%2 == 1) {
					p, err = matrixRelayRun(ctx, c, bin, m.args, m.env, m.cli, reader, m.name)
					res = p
				} else {
					p, err = matrixBound(ctx, c, m.cli, reader, m.name, m.sink)
					bound = p
				}
				if err != nil {
					return err
				}
				for _, r := range p.split() {
					show(r)
				}
			}
			ratio := res.tput.RecordsPerSec / bound.tput.RecordsPerSec
			ratios[m.name] = append(ratios[m.name], ratio)
			onP99[m.name] = append(onP99[m.name], res.lat.PostP99)
			onPost[m.name] = append(onPost[m.name], res.post...)
			if c.JSON {
				b, _ := json.Marshal(map[string]any{"round": round, "comparison": m.name + " courier / bare mautrix loop", "ratio": float64(int(ratio*1000)) / 1000,
					"post_p99_on_over_off": float64(int(res.lat.PostP99/off.lat.PostP99*1000)) / 1000})
				fmt.Fprintln(out, string(b))
			} else {
				fmt.Fprintf(out, "round %d %s: courier / bare loop = %.2f; POST p99 on / off = %.2f\n", round, m.name, ratio, res.lat.PostP99/off.lat.PostP99)
			}
		}
	}
	// Over every round: the ratios' median, and POST p50/p99 of all paced
	// samples pooled.
	for _, m := range modes {
		r := slices.Clone(ratios[m.name])
		slices.Sort(r)
		line := map[string]any{"summary": m.name, "rounds": c.Rounds, "ratio_median": float64(int(r[len(r)/2]*1000)) / 1000,
			"ratio_min": float64(int(r[0]*1000)) / 1000, "ratio_max": float64(int(r[len(r)-1]*1000)) / 1000,
			"post_samples": len(onPost[m.name]), "post_p50_on_ms": pct(onPost[m.name], 50), "post_p99_on_ms": pct(onPost[m.name], 99),
			"post_p50_off_ms": pct(offPost, 50), "post_p99_off_ms": pct(offPost, 99)}
		if c.JSON {
			b, _ := json.Marshal(line)
			fmt.Fprintln(out, string(b))
			continue
		}
		fmt.Fprintf(out, "%s over %d rounds: courier / bare loop median %.2f (min %.2f, max %.2f); pooled POST (%d samples) p50 %.2f / %.2f ms, p99 %.2f / %.2f ms (on / off) = %.2f\n",
			m.name, c.Rounds, r[len(r)/2], r[0], r[len(r)-1], len(onPost[m.name]), pct(onPost[m.name], 50), pct(offPost, 50),
			pct(onPost[m.name], 99), pct(offPost, 99), pct(onPost[m.name], 99)/pct(offPost, 99))
	}
	return nil
}

// courierFailures is the relay's count of failed Matrix deliveries
// (acrelay_courier_deliveries_total), -1 when unknown.
func courierFailures(client *http.Client, url, opToken string) int {
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	res, err := client.Do(req)
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, `acrelay_courier_deliveries_total{courier="matrix",outcome="failed"} `); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// findPid is the pid of the process whose command line holds arg (0 when
// none): Dendrite's, found by its config path.
func findPid(arg string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(arg)) {
			return pid
		}
	}
	return 0
}

// phaseCPU measures the CPU share of the relay (pid, 0 for none) and
// Dendrite over a phase, and profiles both when asked: start it at the
// phase's start, call the returned func at its end.
func phaseCPU(c matrixBenchConfig, relayPid int, relayPprof, label string) func(r *matrixResult) {
	var profs []chan error
	if c.ProfileDir != "" {
		prof := func(url, name string) {
			ch := make(chan error, 1)
			profs = append(profs, ch)
			go func() {
				ch <- saveProfile(url, c.ProfileSeconds, filepath.Join(c.ProfileDir, fmt.Sprintf("%s-%s-r%d.prof", name, label, c.round)))
			}()
		}
		if relayPprof != "" {
			prof(relayPprof, "relay")
			// An execution trace too: where the courier's wall time goes
			// (go tool trace -pprof=net|syscall|sync).
			ch := make(chan error, 1)
			profs = append(profs, ch)
			go func() {
				ch <- saveURL(relayPprof+"/debug/pprof/trace?seconds="+strconv.Itoa(min(c.ProfileSeconds, 5)),
					filepath.Join(c.ProfileDir, fmt.Sprintf("trace-%s-r%d.out", label, c.round)))
			}()
		}
		if c.dendritePprof != "" {
			prof(c.dendritePprof, "dendrite")
		}
	}
	r0, _ := cpuTime(relayPid)
	d0, _ := cpuTime(c.dendritePid)
	t0 := time.Now()
	return func(r *matrixResult) {
		wall := time.Since(t0).Seconds()
		if relayPid != 0 {
			r1, _ := cpuTime(relayPid)
			r.RelayCPU = (r1 - r0).Seconds() / wall
		}
		if c.dendritePid != 0 {
			d1, _ := cpuTime(c.dendritePid)
			r.DendriteCPU = (d1 - d0).Seconds() / wall
		}
		for _, ch := range profs {
			if err := <-ch; err != nil {
				fmt.Fprintln(os.Stderr, "cpu profile:", err)
			}
		}
	}
}

// matrixPair is a throughput and a latency result of one configuration.
type matrixPair struct {
	tput, lat matrixResult
	post      []time.Duration // the paced POST latencies
}

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

func watch(ctx context.Context, cli *mautrix.Client, room id.RoomID, dec *decryptor) (*watcher, error) {
	w := &watcher{seen: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	// Start from now: an initial sync gives the position.
	resp, err := cli.SyncRequest(ctx, 0, "", "", false, event.PresenceOffline)
	if err != nil {
		return nil, err
	}
	if dec != nil {
		dec.process(ctx, resp, "")
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
			if dec != nil {
				dec.process(ctx, resp, since) // the room keys first
			}
			since = resp.NextBatch
			jr := resp.Rooms.Join[room]
			if jr == nil {
				continue
			}
			w.mu.Lock()
			for _, ev := range jr.Timeline.Events {
				if ev.Type == event.EventEncrypted && dec != nil {
					ev.RoomID = room
					d, err := dec.decrypt(ctx, ev)
					if err != nil {
						continue // a key that did not come: the record is never seen, and wait says so
					}
					ev = d
				}
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
	var pprofURL string
	if c.ProfileDir != "" && args != nil {
		addr, err := freeLoopback()
		if err != nil {
			return matrixPair{}, err
		}
		args, pprofURL = append(slices.Clone(args), "--pprof-addr", addr), "http://"+addr
	}
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
		m, err = benchAdmin(client, r.url, token, "/v1/admin/projects/"+s.project+"/matrix/bindings", map[string]any{"create": true, "encrypted": c.encryptRoom, "invite": []string{reader.UserID.String()}})
		if err != nil {
			return matrixPair{}, err
		}
		room := id.RoomID(m["room_id"].(string))
		if _, err := reader.JoinRoomByID(ctx, room); err != nil {
			return matrixPair{}, err
		}
		wctx, stop := context.WithCancel(ctx) // the watcher ends with the run
		defer stop()
		if w, err = watch(wctx, reader, room, c.dec); err != nil {
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
		cpu := phaseCPU(c, r.cmd.Process.Pid, pprofURL, name)
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
		cpu(&p.tput)
		p.tput.Failed = courierFailures(client, r.url, r.opToken)
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
	p.post = postLat
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
		return matrixPair{lat: p.lat, post: p.post}, nil
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
	if sink == "" {
		// Bot mode: the courier's process long-polls /sync as the bot for
		// submissions, so the homeserver answers a sync per send; the bound
		// does the same, with the courier's filter.
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		resp, err := cli.SyncRequest(sctx, 0, "", matrix.SyncFilter(cli.UserID), false, event.PresenceOffline)
		if err != nil {
			return matrixPair{}, err
		}
		go func(since string) {
			for sctx.Err() == nil {
				resp, err := cli.SyncRequest(sctx, 30000, since, matrix.SyncFilter(cli.UserID), false, event.PresenceOffline)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				since = resp.NextBatch
			}
		}(resp.NextBatch)
	}
	room, err := matrix.CreateRoom(ctx, cli, "bench bound", []id.UserID{reader.UserID})
	if err != nil {
		return matrixPair{}, err
	}
	if _, err := reader.JoinRoomByID(ctx, room); err != nil {
		return matrixPair{}, err
	}
	wctx, stop := context.WithCancel(ctx) // the watcher ends with the run
	defer stop()
	w, err := watch(wctx, reader, room, nil)
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
	cpu := phaseCPU(c, 0, "", name+"-bound")
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
	cpu(&p.tput)
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
	cmd.Env = append(append(append(os.Environ(), "ACRELAY_OPERATOR_TOKEN="+op), benchNoLimits...), env...)
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

// runEncryptedBench (--encrypted) compares, in bot mode, an end-to-end
// encrypted room with an unencrypted one: per round one relay run of
// each, in alternating order, each with a fresh login of the bot (each
// run's relay has a new database, so its Matrix device is new too), the
// reader decrypting what it reads. Records/s from the first POST to the
// last record the reader has decrypted (or read), and POST→read latency
// of the paced phase; then the ratios encrypted / unencrypted.
func runEncryptedBench(ctx context.Context, c matrixBenchConfig, bin string, hs *dendritetest.Server, reader *mautrix.Client, dir string, out io.Writer) error {
	dec, err := newDecryptor(ctx, reader, dir)
	if err != nil {
		return err
	}
	defer dec.close()
	c.dec = dec
	tput, vis := map[bool][]float64{}, map[bool][]float64{}
	for round := 1; round <= c.Rounds; round++ {
		c.round = round
		for i := range 2 {
			enc := (i == 0) == (round%2 == 0) // odd rounds: unencrypted first
			bot, err := hs.NewUser(ctx, "bot")
			if err != nil {
				return err
			}
			cli, err := matrix.NewClient(hs.URL, bot.UserID, bot.AccessToken)
			if err != nil {
				return err
			}
			c.encryptRoom = enc
			label := "bot, unencrypted room"
			if enc {
				label = "bot, encrypted room"
			}
			p, err := matrixRelayRun(ctx, c, bin, []string{"--matrix-homeserver", hs.URL, "--matrix-user-id", bot.UserID.String()},
				[]string{"ACRELAY_MATRIX_ACCESS_TOKEN=" + bot.AccessToken}, cli, reader, label)
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			for _, r := range p.split() {
				if c.JSON {
					b, _ := json.Marshal(r)
					fmt.Fprintln(out, string(b))
					continue
				}
				fmt.Fprintf(out, "%-44s %5d records  %7.1f records/s  read p50 %6.1f ms p99 %6.1f ms  POST p50 %5.2f ms p99 %5.2f ms  failed %d\n",
					r.Label, r.Records, r.RecordsPerSec, r.VisibleP50, r.VisibleP99, r.PostP50, r.PostP99, r.Failed)
			}
			tput[enc] = append(tput[enc], p.tput.RecordsPerSec)
			vis[enc] = append(vis[enc], p.lat.VisibleP50)
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	line := map[string]any{"summary": "encrypted / unencrypted room (bot mode)", "rounds": c.Rounds,
		"records_per_second_unencrypted": median(tput[false]), "records_per_second_encrypted": median(tput[true]),
		"throughput_ratio":        float64(int(median(tput[true])/median(tput[false])*1000)) / 1000,
		"read_p50_ms_unencrypted": median(vis[false]), "read_p50_ms_encrypted": median(vis[true])}
	if c.JSON {
		b, _ := json.Marshal(line)
		fmt.Fprintln(out, string(b))
		return nil
	}
	fmt.Fprintf(out, "encrypted / unencrypted room over %d rounds (medians): %.1f / %.1f records/s = %.2f; POST→read p50 %.1f / %.1f ms (paced %g/s)\n",
		c.Rounds, median(tput[true]), median(tput[false]), median(tput[true])/median(tput[false]), median(vis[true]), median(vis[false]), c.Rate)
	return nil
}
