package websub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store"
)

// npmSubscriber runs testdata/pubsubhubbub_subscriber.js (the published
// npm package pubsubhubbub 1.0.2, provisioned by scripts/test.sh into
// ACRELAY_NPM_MODULES) and reads its JSON lines.
type npmSubscriber struct {
	lines chan map[string]string
	// seen keeps lines read while waiting for another event: the hub's
	// verification may reach the subscriber (its "subscribe" line) before
	// the 202 answering its request does ("requested").
	seen []map[string]string
}

func startNPMSubscriber(t *testing.T, hubURL, topic, token, secret string) *npmSubscriber {
	t.Helper()
	modules := os.Getenv("ACRELAY_NPM_MODULES")
	if modules == "" {
		t.Skip("ACRELAY_NPM_MODULES not set: scripts/test.sh installs the npm package pubsubhubbub@1.0.2 for this interop test")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH: the WebSub interop test needs Node.js")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	script, _ := filepath.Abs("testdata/pubsubhubbub_subscriber.js")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "HUB="+hubURL, "TOPIC="+topic, "TOKEN="+token,
		"SECRET="+secret, "PORT="+strconv.Itoa(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	s := &npmSubscriber{lines: make(chan map[string]string, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			line := map[string]string{}
			for k, v := range m {
				if str, ok := v.(string); ok {
					line[k] = str
				}
			}
			s.lines <- line
		}
		close(s.lines)
	}()
	return s
}

// next waits for the next line of the given event, failing on error or
// denied lines.
func (s *npmSubscriber) next(t *testing.T, event string) map[string]string {
	t.Helper()
	for i, l := range s.seen {
		if l["event"] == event {
			s.seen = append(s.seen[:i], s.seen[i+1:]...)
			return l
		}
	}
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("the npm subscriber exited before %q", event)
			}
			if l["event"] == "error" || l["event"] == "denied" {
				t.Fatalf("npm subscriber: %v", l)
			}
			if l["event"] == event {
				return l
			}
			s.seen = append(s.seen, l)
		case <-timeout:
			t.Fatalf("no %q from the npm subscriber in 60s", event)
		}
	}
}

// TestInteropNPMPubSubHubbub: the published npm WebSub subscriber
// pubsubhubbub 1.0.2 subscribes to the hub, answers its verification of
// intent, and receives and accepts (its own HMAC check passes) a signed
// delivery, on a private topic (with the project's read token) and on a
// public one (no token).
func TestInteropNPMPubSubHubbub(t *testing.T) {
	for _, tc := range []struct {
		name   string
		public bool
	}{{"private", false}, {"public", true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, teststore.SQLite)
			token := w.token
			if tc.public {
				if err := w.st.SetProjectVisibility(context.Background(), w.pid, store.VisibilityPublic); err != nil {
					t.Fatal(err)
				}
				token = ""
			}
			topic := w.topic("repo-a", hub.FormatAtom)
			s := startNPMSubscriber(t, w.public+hub.HubPath, topic, token, "npm-secret")
			s.next(t, "listen")
			s.next(t, "requested") // the hub answered 202
			if got := s.next(t, "subscribe"); got["topic"] != topic {
				t.Fatalf("verified topic %q, want %q", got["topic"], topic)
			}
			waitFor(t, "the subscription", func() bool {
				subs, _ := w.st.Subscriptions(context.Background(), w.pid)
				return len(subs) == 1
			})
			id := w.post("repo-a")
			feed := s.next(t, "feed") // emitted only when its HMAC check passed
			if !strings.Contains(feed["body"], "<id>"+id+"</id>") {
				t.Fatalf("delivery lacks the entry %s:\n%s", id, feed["body"])
			}
			if !strings.HasPrefix(feed["signature"], "sha256=") || feed["contentType"] != "application/atom+xml; charset=utf-8" {
				t.Fatalf("signature %q, content type %q", feed["signature"], feed["contentType"])
			}
		})
	}
}
