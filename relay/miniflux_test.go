package relay_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/internal/pgtest"
)

// miniflux is a running Miniflux (ACRELAY_MINIFLUX_BIN, built by
// scripts/provision_miniflux.sh) on its own database of the test
// PostgreSQL, listening on loopback, with its admin's API credentials.
type miniflux struct {
	url, user, pass string
}

const minifluxEnv = "ACRELAY_MINIFLUX_BIN"

func startMiniflux(t *testing.T) *miniflux {
	t.Helper()
	bin := os.Getenv(minifluxEnv)
	if bin == "" {
		t.Skip(minifluxEnv + " not set: Miniflux v2.3.5 is not built (scripts/test.sh provisions it with scripts/provision_miniflux.sh)")
	}
	dbURL := pgtest.FreshDatabase(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	m := &miniflux{url: "http://" + addr, user: "admin", pass: "miniflux-test-password"}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL, "RUN_MIGRATIONS=1", "CREATE_ADMIN=1",
		"ADMIN_USERNAME="+m.user, "ADMIN_PASSWORD="+m.pass,
		"LISTEN_ADDR="+addr, "BASE_URL="+m.url,
		"FETCHER_ALLOW_PRIVATE_NETWORKS=1", // the relay listens on loopback
		"POLLING_FREQUENCY=1440",           // the test refreshes through the API
		"LOG_LEVEL=info")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start Miniflux: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("Miniflux log:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		r, err := http.Get(m.url + "/healthcheck")
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode == 200 && strings.TrimSpace(string(b)) == "OK" {
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("Miniflux exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Miniflux not healthy after 60 s:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return m
}

// api calls Miniflux's REST API as its admin; out (non-nil) receives the
// JSON answer.
func (m *miniflux) api(t *testing.T, method, path string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, m.url+path, body)
	req.SetBasicAuth(m.user, m.pass)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("Miniflux %s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("Miniflux %s %s: %v %s", method, path, err, b)
		}
	}
}

type minifluxEntry struct {
	Hash    string `json:"hash"`
	Title   string `json:"title"`
	URL     string `json:"url"`
	Author  string `json:"author"`
	Content string `json:"content"`
}

// TestMinifluxReadsFeeds (issue 32): Miniflux v2.3.5, a widely used feed
// reader that never follows RFC 5005 archives, subscribed to a feed
// capability URL (and to a public project's topic): 201 records,
// subscribe, 200 more, refresh → Miniflux holds every one of the newest
// 400 records exactly once (its entry hash is the SHA-256 of the Atom
// <id>, the event_id), each titled with the kind's label and the event's
// summary and authored by the sender's display name; the entry URLs are
// distinct, and each answers 200 text/html with no header, showing that
// record.
func TestMinifluxReadsFeeds(t *testing.T) {
	m := startMiniflux(t)
	e := capabilityEnv(t, io.Discard)
	var categories []struct {
		ID int64 `json:"id"`
	}
	m.api(t, "GET", "/v1/categories", nil, &categories)
	if len(categories) == 0 {
		t.Fatal("Miniflux has no category")
	}
	for _, visibility := range []string{"private", "public"} {
		t.Run(visibility, func(t *testing.T) {
			pid, tok := e.newProjectVisible(visibility)
			a := e.newAgentNamed(pid, tok, "Ada Lovelace ("+visibility+")")
			var ids []string
			post := func(n int) {
				for range n {
					i := len(ids)
					ev := a.intent("acrelay-demo", fmt.Sprintf("Step %d of the %s parser work", i, visibility))
					mustStatus(t, e.post(a, ev), 201)
					ids = append(ids, ev.ID)
				}
			}
			post(201)
			feedURL := e.url + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=acrelay-demo"
			if visibility == "private" {
				r := e.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"acrelay-demo"}`))
				mustStatus(t, r, 201)
				feedURL = r.json(t)["url"].(string)
			}
			var created struct {
				FeedID int64 `json:"feed_id"`
			}
			m.api(t, "POST", "/v1/feeds", map[string]any{"feed_url": feedURL, "category_id": categories[0].ID}, &created)
			post(200)
			m.api(t, "PUT", "/v1/feeds/"+strconv.FormatInt(created.FeedID, 10)+"/refresh", nil, nil)
			var got struct {
				Total   int             `json:"total"`
				Entries []minifluxEntry `json:"entries"`
			}
			m.api(t, "GET", "/v1/feeds/"+strconv.FormatInt(created.FeedID, 10)+"/entries?limit=1000&order=id&direction=asc", nil, &got)

			byHash := map[string]int{}
			for i, id := range ids {
				h := sha256.Sum256([]byte(id))
				byHash[hex.EncodeToString(h[:])] = i
			}
			held := map[int]int{}
			urls := map[string]bool{}
			titled, authored := 0, 0
			for _, en := range got.Entries {
				i, ok := byHash[en.Hash]
				if !ok {
					t.Fatalf("Miniflux holds an entry that is no record: %+v", en)
				}
				held[i]++
				summary := fmt.Sprintf("Step %d of the %s parser work", i, visibility)
				if en.Title == "Intent: "+summary {
					titled++
				}
				if en.Author == "Ada Lovelace ("+visibility+")" {
					authored++
				}
				if urls[en.URL] {
					t.Fatalf("two entries link %s", en.URL)
				}
				urls[en.URL] = true
				if !strings.Contains(en.Content, summary) {
					t.Errorf("entry %d content lacks its summary: %s", i, en.Content)
				}
			}
			for i := len(ids) - 400; i < len(ids); i++ {
				if held[i] != 1 {
					t.Fatalf("record %d of %d is held %d times, want once (%d entries in all)", i, len(ids), held[i], len(got.Entries))
				}
			}
			t.Logf("%s: Miniflux holds %d entries for %d records; %d titled with the summary, %d by the display name", visibility, len(got.Entries), len(ids), titled, authored)
			if n := len(got.Entries); titled*10 < n*9 || authored*10 < n*9 {
				t.Fatalf("%d of %d entries titled with the summary, %d by the display name; want at least 90%%", titled, n, authored)
			}
			// Every entry URL answers a page of its own record, with no header.
			for _, en := range got.Entries {
				i := byHash[en.Hash]
				r := bare(t, en.URL)
				if r.Status != 200 || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
					t.Fatalf("%s: %d %q", en.URL, r.Status, r.Header.Get("Content-Type"))
				}
				if !bytes.Contains(r.Body, []byte(fmt.Sprintf("Step %d of the %s parser work", i, visibility))) || !bytes.Contains(r.Body, []byte(ids[i])) {
					t.Fatalf("%s does not show record %d", en.URL, i)
				}
			}
		})
	}
}
