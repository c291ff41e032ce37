package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/atom"
	websubcourier "github.com/acrelay/acrelay/couriers/websub"
)

// TestAtomEntryIDs: the scan finds every entry's id, in order, in a feed
// the relay's own renderer wrote, and not the feed's id nor an "<id>"
// inside an entry's content.
func TestAtomEntryIDs(t *testing.T) {
	ids := []string{"sha256:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("b", 64), "sha256:" + strings.Repeat("c", 64)}
	f := atom.Feed{ID: "http://relay.test/v1/correspondence/events.atom?project_id=p&repository_id=r", Title: "t", Updated: time.Unix(0, 0).UTC()}
	for i, id := range ids {
		f.Entries = append(f.Entries, atom.Entry{EventID: id, Kind: "progress", RepositoryID: "r", ThreadID: "x",
			ReceivedAt: time.Unix(int64(i), 0).UTC(), Record: []byte(`{"summary":"<id>sha256:dead</id> <entry>"}`)})
	}
	body := atom.Render(f)
	var got []string
	n := atomEntryIDs(body, func(id []byte) { got = append(got, string(id)) })
	if n != len(ids) || !slices.Equal(got, ids) {
		t.Errorf("atomEntryIDs = %d %q, want %q\n%s", n, got, ids, body)
	}
	if n := atomEntryIDs([]byte(`<feed><id>x</id></feed>`), func([]byte) { t.Error("an id outside entries") }); n != 0 {
		t.Errorf("a feed without entries: %d ids", n)
	}
	if n := atomEntryIDs([]byte(`<feed><entry><id>truncated`), func([]byte) {}); n != 0 {
		t.Errorf("a truncated entry: %d ids", n)
	}
}

func TestPercentile(t *testing.T) {
	var v []time.Duration
	for i := 1; i <= 100; i++ {
		v = append(v, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := percentile(v, c.p); got != c.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("no samples: %v", got)
	}
	if got := medianOf([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("medianOf = %v", got)
	}
}

// TestSignatureOK: the check accepts what the courier signs, and nothing
// else.
func TestSignatureOK(t *testing.T) {
	secret, body := []byte("s3cret"), []byte("<feed>…</feed>")
	sig := websubcourier.Signature(secret, body)
	if sig != websubSignature(secret, body) {
		t.Fatalf("the bound signs %q, the courier %q", websubSignature(secret, body), sig)
	}
	if !signatureOK(secret, body, sig) {
		t.Errorf("the courier's signature %q refused", sig)
	}
	hexSum := strings.TrimPrefix(sig, "sha256=")
	for name, h := range map[string]string{
		"other body":   websubcourier.Signature(secret, []byte("<feed/>")),
		"other secret": websubcourier.Signature([]byte("other"), body),
		"upper case":   "sha256=" + strings.ToUpper(hexSum),
		"sha1":         "sha1=" + hexSum[:40],
		"no algorithm": hexSum,
		"empty":        "",
		"short":        sig[:len(sig)-2],
	} {
		if signatureOK(secret, body, h) {
			t.Errorf("%s: %q accepted", name, h)
		}
	}
}

// TestRunBound: the bare loop delivers every body of every job, signed
// so the sink accepts it, one at a time per subscription, within the
// per-host and global limits.
func TestRunBound(t *testing.T) {
	const subs, hosts, perSub = 24, 3, 5
	secrets := make([][]byte, subs)
	for i := range secrets {
		secrets[i] = []byte("secret-" + strconv.Itoa(i))
	}
	bodies := [][]byte{[]byte("<feed><entry><id>a</id></entry></feed>"), []byte("<feed><entry><id>b</id></entry><entry><id>c</id></entry></feed>")}
	sink := newWSSink(subs, secrets, []string{"a", "b", "c"}, nil)
	sink.phase.Store(phaseBound)
	var mu sync.Mutex
	perHost, perSubInFlight := map[string]int{}, map[string]int{}
	var global, maxGlobal, maxHost, maxSub atomic.Int64
	order := map[string][]int{}
	var jobs []boundJob
	for h := range hosts {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g := global.Add(1)
			mu.Lock()
			maxGlobal.Store(max(maxGlobal.Load(), g))
			perHost[r.Host]++
			perSubInFlight[r.URL.Path]++
			maxHost.Store(max(maxHost.Load(), int64(perHost[r.Host])))
			maxSub.Store(max(maxSub.Load(), int64(perSubInFlight[r.URL.Path])))
			mu.Unlock()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(r.Body)
			k := slices.IndexFunc(bodies, func(b []byte) bool { return bytes.Equal(b, buf.Bytes()) })
			time.Sleep(time.Millisecond)
			mu.Lock()
			order[r.URL.Path] = append(order[r.URL.Path], k)
			perHost[r.Host]--
			perSubInFlight[r.URL.Path]--
			mu.Unlock()
			global.Add(-1)
			r.Body = httpBody(buf.Bytes())
			sink.ServeHTTP(w, r)
		}))
		defer srv.Close()
		for i := h; i < subs; i += hosts {
			want := []int{0, 1, 1, 0, 1}[:perSub]
			jobs = append(jobs, boundJob{callback: srv.URL + "/cb/" + strconv.Itoa(i), host: strings.TrimPrefix(srv.URL, "http://"), secret: secrets[i], bodies: want})
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	delivered, failed := runBound(context.Background(), client, bodies, jobs, 6, 2)
	if delivered != subs*perSub || failed != 0 {
		t.Errorf("delivered %d, failed %d; want %d, 0", delivered, failed, subs*perSub)
	}
	if sink.bound.Load() != subs*perSub || sink.badSig.Load() != 0 {
		t.Errorf("the sink counted %d POSTs, %d bad signatures", sink.bound.Load(), sink.badSig.Load())
	}
	if maxGlobal.Load() > 6 || maxHost.Load() > 2 || maxSub.Load() > 1 {
		t.Errorf("in flight at most %d (limit 6), per host %d (limit 2), per subscription %d (limit 1)", maxGlobal.Load(), maxHost.Load(), maxSub.Load())
	}
	for _, j := range jobs {
		path := j.callback[strings.Index(j.callback, "/cb/"):]
		if !slices.Equal(order[path], j.bodies) {
			t.Errorf("%s got bodies %v, want %v in order", path, order[path], j.bodies)
		}
	}
}

type byteBody struct{ *bytes.Reader }

func (byteBody) Close() error { return nil }

func httpBody(b []byte) byteBody { return byteBody{bytes.NewReader(b)} }

// TestWSSink: a callback echoes the challenge of a verification, records
// each entry's first arrival, counts repeats and bad signatures, and
// marks probes.
func TestWSSink(t *testing.T) {
	secrets := [][]byte{[]byte("s0"), []byte("s1")}
	sink := newWSSink(2, secrets, []string{"e0", "e1"}, []string{"p0"})
	srv := httptest.NewServer(sink)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/cb/1?hub.mode=subscribe&hub.topic=x&hub.challenge=abc123&hub.lease_seconds=60")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	_, _ = got.ReadFrom(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || got.String() != "abc123" || sink.nVerified.Load() != 1 {
		t.Errorf("verification: %d %q, verified %d", res.StatusCode, got.String(), sink.nVerified.Load())
	}
	post := func(i int, body string, secret []byte) {
		req, _ := http.NewRequest("POST", srv.URL+"/cb/"+strconv.Itoa(i), strings.NewReader(body))
		req.Header.Set("X-Hub-Signature", websubcourier.Signature(secret, []byte(body)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			t.Errorf("delivery: status %d", res.StatusCode)
		}
	}
	post(0, "<feed><entry><id>p0</id></entry><entry><id>e1</id></entry></feed>", secrets[0])
	post(0, "<feed><entry><id>e1</id></entry></feed>", secrets[1]) // signed with the other's secret
	post(1, "<feed><entry><id>e0</id></entry></feed>", secrets[1])
	if sink.nProbed.Load() != 1 || sink.arrived[1].Load() != 1 || sink.arrived[0].Load() != 1 || sink.repeats.Load() != 1 ||
		sink.badSig.Load() != 1 || sink.deliveries.Load() != 3 || sink.entries.Load() != 4 {
		t.Errorf("probed %d, arrived %d %d, repeats %d, bad signatures %d, deliveries %d, entries %d",
			sink.nProbed.Load(), sink.arrived[0].Load(), sink.arrived[1].Load(), sink.repeats.Load(), sink.badSig.Load(), sink.deliveries.Load(), sink.entries.Load())
	}
	if sink.arrivals[0*2+1].Load() == 0 || sink.arrivals[1*2+0].Load() == 0 || sink.arrivals[0*2+0].Load() != 0 {
		t.Errorf("arrivals %v %v %v", sink.arrivals[1].Load(), sink.arrivals[2].Load(), sink.arrivals[0].Load())
	}
}

// TestWebSubBench runs `acrelay-bench websub` end to end, small: two
// subscriptions, a few events. It checks what the tool reports, not how
// fast this machine is.
func TestWebSubBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a relay process and waits for its WebSub deliveries")
	}
	bin := benchBinary(t)
	cmd := exec.Command(bin, "websub", "--subscriptions", "2", "--callback-servers", "2", "--events", "3", "--burst", "5", "--json", "--wait", "60s",
		"--concurrency", "8", "--host-limit", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acrelay-bench websub: %v\n%s", err, stderr.String())
	}
	var r websubResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Subscriptions != 2 || r.CallbackServers != 2 || r.Concurrency != 8 || r.HostLimit != 2 || r.Missing != 0 || r.BadSignatures != 0 || r.Errors != 0 {
		t.Errorf("result %+v", r)
	}
	if r.P99Millis < r.P50Millis || r.MaxMillis < r.P99Millis || r.DeliveriesPerSecond <= 0 || r.EntriesPerSecond < r.DeliveriesPerSecond ||
		r.BoundDeliveriesPerSecond <= 0 || r.RatioToBound <= 0 || r.ServerCPUMicros < 0 { // CPU is counted in 10 ms ticks: a run this small may read 0
		t.Errorf("figures %+v", r)
	}
}
