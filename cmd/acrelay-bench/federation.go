package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// acrelay-bench federation (issue item 7): two relays A and B on SQLite
// share a project. N records are posted to A from C clients (A's local
// ingest rate), then B adds a peer link to A and backfills them (the
// backfill rate, records/s until B holds all N: both rates are bound by
// verification, so the goal is backfill ≥ 0.5 × local ingest). Then, with
// B subscribed to A's hub, events are posted to A one at a time and the
// time until B has stored each is measured (goal: p50 < 100 ms on
// loopback).

type federationConfig struct {
	RelayBin string
	Events   int
	Clients  int
	Probes   int
	JSON     bool
	// ProfileB, when set, is where B's CPU profile of the first
	// ProfileSeconds of the backfill is written.
	ProfileB       string
	ProfileSeconds int
}

type federationResult struct {
	Label             string  `json:"label"`
	Events            int     `json:"events"`
	Clients           int     `json:"clients"`
	LocalPerSecond    float64 `json:"local_ingest_per_second"`
	BackfillPerSecond float64 `json:"backfill_per_second"`
	Ratio             float64 `json:"backfill_to_local"`
	// BackfillCPUMicros is B's CPU per backfilled record; LocalCPUMicros
	// A's per posted record.
	BackfillCPUMicros float64 `json:"backfill_cpu_us_per_record"`
	LocalCPUMicros    float64 `json:"local_cpu_us_per_record"`
	Probes            int     `json:"probes"`
	P50Millis         float64 `json:"live_p50_ms"`
	P99Millis         float64 `json:"live_p99_ms"`
	MaxMillis         float64 `json:"live_max_ms"`
	Errors            int64   `json:"errors"`
	MachineBusy       float64 `json:"machine_busy_backfill"`
}

func init() { rootCmd.AddCommand(newFederationCmd()) }

func newFederationCmd() *cobra.Command {
	var c federationConfig
	cmd := &cobra.Command{
		Use:          "federation",
		Short:        "Measure a peer link: backfill rate against local ingest, and A→B latency of live events",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		Example: `  acrelay-bench federation
  acrelay-bench federation --events 20000 --probes 200 --profile-b /tmp/b.pprof`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runFederation(ctx, c, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.RelayBin, "relay-bin", "", "acrelay binary both relays run (default: acrelay next to this binary, else built from ./cmd/acrelay)")
	f.IntVar(&c.Events, "events", 100000, "records posted to A before B backfills them")
	f.IntVar(&c.Clients, "clients", 16, "concurrent clients posting to A")
	f.IntVar(&c.Probes, "probes", 200, "events posted to A one at a time while the link is live, for the A→B latency")
	f.BoolVar(&c.JSON, "json", false, "print the result as a JSON line")
	f.StringVar(&c.ProfileB, "profile-b", "", "write B's CPU profile of the backfill to this file")
	f.IntVar(&c.ProfileSeconds, "profile-seconds", 10, "length of B's CPU profile (with --profile-b)")
	return cmd
}

func runFederation(ctx context.Context, c federationConfig, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if c.Events < 1 || c.Clients < 1 || c.Probes < 1 {
		return fmt.Errorf("--events, --clients and --probes must be positive")
	}
	bin, cleanup, err := resolveRelayBin(ctx, c.RelayBin)
	if err != nil {
		return err
	}
	defer cleanup()
	c.RelayBin = bin
	res, err := federationOnce(ctx, c)
	if err != nil {
		return err
	}
	printFederation(out, c.JSON, res)
	return nil
}

func printFederation(out io.Writer, asJSON bool, r federationResult) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(out, string(b))
		return
	}
	fmt.Fprintf(out, "%s: %d records from %d clients: local ingest on A %.0f records/s (%.0f µs CPU/record); "+
		"backfill on B %.0f records/s (%.0f µs CPU/record), ratio %.2f (machine %.0f%% busy); "+
		"live A→B over %d events: p50 %.1f ms, p99 %.1f ms, max %.1f ms; errors %d\n",
		r.Label, r.Events, r.Clients, r.LocalPerSecond, r.LocalCPUMicros, r.BackfillPerSecond, r.BackfillCPUMicros,
		r.Ratio, 100*r.MachineBusy, r.Probes, r.P50Millis, r.P99Millis, r.MaxMillis, r.Errors)
}

// fedLink is B's view of its one peer link, from the admin listing.
type fedLink struct {
	Stored       int64  `json:"stored"`
	Refused      int64  `json:"refused"`
	Subscription string `json:"subscription"`
	LastError    string `json:"last_error"`
}

// linkStatus reads the status of B's first peer link of projectID.
func linkStatus(client *http.Client, url, token, projectID string) (fedLink, error) {
	req, _ := http.NewRequest("GET", url+"/v1/admin/projects/"+projectID+"/peers", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return fedLink{}, err
	}
	defer res.Body.Close()
	var body struct {
		Peers []struct {
			Status *fedLink `json:"status"`
		} `json:"peers"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK {
		return fedLink{}, fmt.Errorf("peer list: status %d %v", res.StatusCode, err)
	}
	if len(body.Peers) == 0 || body.Peers[0].Status == nil {
		return fedLink{}, nil // not running yet
	}
	return *body.Peers[0].Status, nil
}

// fedEvents signs n+probes events of one key: n spread over one session
// per client (as the append load does), then probes in one more session.
func fedEvents(ctx context.Context, client *http.Client, url, token, projectID string, n, clients, probes int) ([][]byte, error) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	m, err := benchAdmin(client, url, token, "/v1/admin/projects/"+projectID+"/identities", map[string]any{"display_name": "bench"})
	if err != nil {
		return nil, err
	}
	identity := m["identity_id"].(string)
	m, err = benchAdmin(client, url, token, "/v1/admin/identities/"+identity+"/keys", map[string]any{"public_key_b64url": correspondence.EncodePublicKey(pub)})
	if err != nil {
		return nil, err
	}
	keyID := m["signing_key_id"].(string)
	device := newBenchUUID()
	sessions := make([]string, clients+1)
	for i := range sessions {
		sessions[i] = newBenchUUID()
	}
	now := correspondence.FormatTimestamp(time.Now())
	bodies := make([][]byte, n+probes)
	for i := range bodies {
		session, seq := sessions[i%clients], int64(i/clients+1)
		if i >= n {
			session, seq = sessions[clients], int64(i-n+1)
		}
		ev := &correspondence.Event{
			ProjectID: projectID, RepositoryID: "repo:bench", ThreadID: "bench-" + strconv.Itoa(i%clients),
			Sender: correspondence.Sender{IdentityID: identity, SigningKeyID: keyID, DeviceID: device, SessionID: session},
			Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: seq, IssuedAt: now,
			Scope: correspondence.Scope{Paths: []string{"packages/sdk", "docs"}},
			Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary",
				Value: canonicaljson.StringValue("bench event " + strconv.Itoa(i) + ": " + strings.Repeat("progress report text ", 40))}),
		}
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := ev.Sign(priv); err != nil {
			return nil, err
		}
		if bodies[i], err = ev.CanonicalJSON(); err != nil {
			return nil, err
		}
	}
	return bodies, nil
}

func federationOnce(ctx context.Context, c federationConfig) (federationResult, error) {
	res := federationResult{Label: "federation (sqlite, loopback)", Events: c.Events, Clients: c.Clients, Probes: c.Probes}
	pprofB, err := freeAddr()
	if err != nil {
		return res, err
	}
	allow := []string{"--websub-allow-hosts", "127.0.0.1"}
	a, err := startBenchRelay(ctx, benchRun{bin: c.RelayBin, extra: allow}, "")
	if err != nil {
		return res, err
	}
	defer a.stop()
	b, err := startBenchRelay(ctx, benchRun{bin: c.RelayBin, extra: append(allow, "--pprof-addr", pprofB)}, "")
	if err != nil {
		return res, err
	}
	defer b.stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	// The shared project: created on A, then on B with the same id.
	m, err := benchAdmin(client, a.url, a.opToken, "/v1/admin/projects", map[string]any{})
	if err != nil {
		return res, err
	}
	projectID := m["project_id"].(string)
	if _, err := benchAdmin(client, b.url, b.opToken, "/v1/admin/projects", map[string]any{"project_id": projectID}); err != nil {
		return res, err
	}
	m, err = benchAdmin(client, a.url, a.opToken, "/v1/admin/projects/"+projectID+"/tokens", map[string]any{"scopes": []string{"read", "append", "admin"}})
	if err != nil {
		return res, err
	}
	token := m["token"].(string)
	m, err = benchAdmin(client, a.url, a.opToken, "/v1/admin/projects/"+projectID+"/tokens", map[string]any{"scopes": []string{"read"}})
	if err != nil {
		return res, err
	}
	readA := m["token"].(string)
	bodies, err := fedEvents(ctx, client, a.url, token, projectID, c.Events, c.Clients, c.Probes)
	if err != nil {
		return res, err
	}
	target, err := neturl.Parse(a.url)
	if err != nil {
		return res, err
	}
	head := "POST /v1/correspondence/events HTTP/1.1\r\nHost: " + target.Host +
		"\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\nContent-Length: "
	requests := make([][]byte, len(bodies))
	for i, body := range bodies {
		requests[i] = append([]byte(head+strconv.Itoa(len(body))+"\r\n\r\n"), body...)
	}

	// A's local ingest: the append load's clients (keep-alive connections
	// writing prepared requests).
	var next atomic.Int64
	var errs atomic.Int64
	cpuA0, _ := cpuTime(a.cmd.Process.Pid)
	start := time.Now()
	var wg sync.WaitGroup
	for range c.Clients {
		wg.Go(func() {
			bc := &benchConn{}
			defer bc.close()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= c.Events {
					return
				}
				status, err := bc.post(target.Host, requests[i], nil)
				if err != nil {
					bc.close()
				}
				if err != nil || status != http.StatusCreated {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.LocalPerSecond = float64(c.Events) / time.Since(start).Seconds()
	cpuA1, _ := cpuTime(a.cmd.Process.Pid)
	res.LocalCPUMicros = float64(cpuA1-cpuA0) / float64(time.Microsecond) / float64(c.Events)
	if n := errs.Load(); n > 0 {
		return res, fmt.Errorf("local ingest: %d posts failed", n)
	}

	// B's backfill: from adding the link until B has stored all N.
	var profErr chan error
	cpuB0, _ := cpuTime(b.cmd.Process.Pid)
	busy0, total0, haveStat := machineTicks()
	start = time.Now()
	if _, err := benchAdmin(client, b.url, b.opToken, "/v1/admin/projects/"+projectID+"/peers",
		map[string]any{"remote_url": a.url, "token": readA}); err != nil {
		return res, err
	}
	if c.ProfileB != "" {
		profErr = make(chan error, 1)
		go func() { profErr <- saveProfile("http://"+pprofB, c.ProfileSeconds, c.ProfileB) }()
	}
	var st fedLink
	ok := waitFor(ctx, 30*time.Minute, func() bool {
		st, err = linkStatus(client, b.url, b.opToken, projectID)
		return err == nil && st.Stored+st.Refused >= int64(c.Events)
	})
	if !ok {
		return res, fmt.Errorf("backfill: B stored %d of %d (%v %s)", st.Stored, c.Events, err, st.LastError)
	}
	elapsed := time.Since(start)
	res.BackfillPerSecond = float64(c.Events) / elapsed.Seconds()
	res.Ratio = res.BackfillPerSecond / res.LocalPerSecond
	cpuB1, _ := cpuTime(b.cmd.Process.Pid)
	res.BackfillCPUMicros = float64(cpuB1-cpuB0) / float64(time.Microsecond) / float64(c.Events)
	if busy1, total1, _ := machineTicks(); haveStat && total1 > total0 {
		res.MachineBusy = float64(busy1-busy0) / float64(total1-total0)
	}
	res.Errors = st.Refused
	if profErr != nil {
		if err := <-profErr; err != nil {
			return res, fmt.Errorf("profile B: %w", err)
		}
	}

	// Live: B subscribed to A's hub; one event at a time, from the start
	// of its POST on A until B's link has stored it (polled every
	// millisecond, so the figure includes up to 1 ms of polling).
	if !waitFor(ctx, time.Minute, func() bool {
		st, err = linkStatus(client, b.url, b.opToken, projectID)
		return err == nil && st.Subscription == "active"
	}) {
		return res, fmt.Errorf("the subscription of B to A is not active after a minute (%q %s)", st.Subscription, st.LastError)
	}
	bc := &benchConn{}
	defer bc.close()
	lat := make([]time.Duration, 0, c.Probes)
	want := st.Stored
	for i := range c.Probes {
		t0 := time.Now()
		status, err := bc.post(target.Host, requests[c.Events+i], nil)
		if err != nil || status != http.StatusCreated {
			return res, fmt.Errorf("live post: %d %v", status, err)
		}
		want++
		for {
			st, err = linkStatus(client, b.url, b.opToken, projectID)
			if err == nil && st.Stored >= want {
				break
			}
			if time.Since(t0) > 30*time.Second || ctx.Err() != nil {
				return res, fmt.Errorf("live event %d not on B within 30 s (%v)", i, err)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	res.P50Millis = float64(percentile(lat, 0.5)) / 1e6
	res.P99Millis = float64(percentile(lat, 0.99)) / 1e6
	res.MaxMillis = float64(lat[len(lat)-1]) / 1e6
	return res, nil
}
