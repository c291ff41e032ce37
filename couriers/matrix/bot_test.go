package matrix_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// startBot starts the courier, the inbox and the /sync long-poll as a
// relay in bot mode would: a plain user's access token, no application
// service.
func (e *env) startBot(cli *mautrix.Client) {
	e.t.Helper()
	c := &matrix.Courier{Store: e.st, Client: cli, PublicURL: "http://relay.test", Host: "hs"}
	r := couriers.NewRunner(e.st, c, couriers.Options{Holder: "bot-" + token()[:6], LeaseTTL: 3 * time.Second,
		Backoff: couriers.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}, DeliveryTimeout: 5 * time.Second, Batch: 5, Refresh: time.Second})
	in := &matrix.Inbox{Store: e.st, Ingest: ingest.New(e.st, ingest.Options{}), Client: cli}
	e.runner = r
	rctx, cancel := context.WithCancel(ctx)
	e.runStop, e.runDone = cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	wg.Go(func() { _ = in.Run(rctx) })
	wg.Go(func() { _ = in.Sync(rctx) })
	go func() { wg.Wait(); close(e.runDone) }()
}

// botClient makes a plain user and returns the courier's client for it
// (the default 90 s timeout: /sync long-polls for 30 s).
func (e *env) botClient(hsURL string) *mautrix.Client {
	e.t.Helper()
	bot := e.hs.CreateUser("bot")
	cli, err := matrix.NewClient(hsURL, bot.UserID, bot.AccessToken)
	if err != nil {
		e.t.Fatal(err)
	}
	e.botID = bot.UserID
	return cli
}

// inviteBot: alice creates a room and invites the bot; the bot's /sync
// must join it.
func (e *env) inviteBot(cli *mautrix.Client) {
	e.t.Helper()
	room, err := matrix.CreateRoom(ctx, e.alice, "bot room", []id.UserID{e.botID})
	if err != nil {
		e.t.Fatal(err)
	}
	e.room = room
	waitFor(e.t, 20*time.Second, "the bot joined the room it was invited to", func() bool {
		jr, err := cli.JoinedRooms(ctx)
		return err == nil && slices.Contains(jr.JoinedRooms, room)
	})
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// submit sends a submission as alice and returns its Matrix event id.
func (e *env) submit(raw []byte) id.EventID {
	e.t.Helper()
	resp, err := e.alice.SendMessageEvent(ctx, e.room, submitType, json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.EventID
}

// answered waits until the inbox stored each of mids as answered
// (final, replied): its reply is in the room then, and no other can
// follow (a final submission is never answered again).
func (e *env) answered(within time.Duration, mids ...id.EventID) {
	e.t.Helper()
	waitFor(e.t, within, "the submissions answered", func() bool {
		for _, mid := range mids {
			if q, err := e.st.MatrixSubmission(ctx, mid.String()); err != nil || q.Final != store.MatrixSubmissionReplied {
				return false
			}
		}
		return true
	})
}

// oneReply waits for exactly one reply to mid and returns it.
func (e *env) oneReply(mid id.EventID) matrix.Outcome {
	e.t.Helper()
	var got []matrix.Outcome
	e.answered(20*time.Second, mid)
	if got = e.replies()[mid]; len(got) != 1 {
		e.t.Fatalf("%d replies to %s, want 1", len(got), mid)
	}
	return got[0]
}

// TestMatrixBotDendrite: bot mode against a real Dendrite: the bot's
// /sync joins the room it is invited to; records reach the room exactly
// once; a submission is answered once; across a restart (with a
// submission and records arriving while the relay is down) the stored
// since token neither loses a submission nor answers one again.
func TestMatrixBotDendrite(t *testing.T) {
	e := newEnv(t)
	cli := e.botClient(e.hs.URL)
	e.startBot(cli)
	e.inviteBot(cli)
	b := &matrix.Binder{Store: e.st, Refresh: e.runner.Refresh}
	if _, err := b.Bind(ctx, e.signer.ProjectID, matrix.BindRequest{RoomID: e.room.String()}); err != nil {
		t.Fatal(err)
	}
	ids := e.appendN(5)
	e.verifyRoom(ids, 20*time.Second)

	_, raw1 := e.signer.Event(t, storetest.Spec{Summary: "submitted in bot mode"})
	sub1 := e.submit(raw1)
	o1 := e.oneReply(sub1)
	if !o1.OK {
		t.Fatalf("submission refused: %+v", o1)
	}
	ids = append(ids, o1.EventID)
	e.caughtUp()

	e.stopRelay()
	since, err := e.st.MatrixSyncToken(ctx, "sync:"+e.botID.String())
	if err != nil || since == "" {
		t.Fatalf("no stored since token after the sync: %q %v", since, err)
	}
	_, raw2 := e.signer.Event(t, storetest.Spec{Summary: "submitted while the relay is down"})
	sub2 := e.submit(raw2)
	ids = append(ids, e.appendN(3)...)

	e.startBot(cli)
	o2 := e.oneReply(sub2)
	if !o2.OK {
		t.Fatalf("submission made while down refused: %+v", o2)
	}
	ids = append(ids, o2.EventID)
	e.verifyRoom(ids, 20*time.Second)
	e.caughtUp()
	if n := len(e.replies()[sub1]); n != 1 {
		t.Errorf("the first submission has %d replies after the restart, want 1", n)
	}
	if head, _, _ := e.st.Head(ctx, e.signer.ProjectID); head != int64(len(ids)) {
		t.Errorf("head %d, want %d", head, len(ids))
	}
}

// syncFaults fails the first /sync requests before Dendrite: 502, 502,
// then a connection cut mid-response, recording when each came.
type syncFaults struct {
	target *url.URL
	mu     sync.Mutex
	at     []time.Time
}

func (p *syncFaults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/sync") {
		p.mu.Lock()
		p.at = append(p.at, time.Now())
		n := len(p.at)
		p.mu.Unlock()
		switch n {
		case 1, 2:
			w.WriteHeader(http.StatusBadGateway)
			return
		case 3:
			// A connection cut mid-response: a network error that the
			// transport does not retry by itself.
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"))
				c.Close()
			}
			return
		}
	}
	httputil.NewSingleHostReverseProxy(p.target).ServeHTTP(w, r)
}

// TestMatrixBotSyncBackoff: /sync failing with 502 and a network error is
// retried with growing, jittered waits (never an instant retry), and the
// bot then joins and answers as usual.
func TestMatrixBotSyncBackoff(t *testing.T) {
	e := newEnv(t)
	u, _ := url.Parse(e.hs.URL)
	p := &syncFaults{target: u}
	px := httptest.NewServer(p)
	t.Cleanup(func() { e.stopRelay(); px.Close() }) // the long-poll ends first
	cli := e.botClient(px.URL)
	e.startBot(cli)
	e.inviteBot(cli)
	p.mu.Lock()
	at := slices.Clone(p.at)
	p.mu.Unlock()
	if len(at) < 4 {
		t.Fatalf("%d /sync attempts, want at least 4", len(at))
	}
	// backoff(n) draws from [d/2, d] with d = 1 s, 2 s, 4 s.
	for i, least := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		if gap := at[i+1].Sub(at[i]); gap < least-50*time.Millisecond {
			t.Errorf("retry %d after %v, want at least %v", i+1, gap, least)
		} else {
			t.Logf("retry %d after %v", i+1, gap.Round(time.Millisecond))
		}
	}
	b := &matrix.Binder{Store: e.st, Refresh: e.runner.Refresh}
	if _, err := b.Bind(ctx, e.signer.ProjectID, matrix.BindRequest{RoomID: e.room.String()}); err != nil {
		t.Fatal(err)
	}
	_, raw := e.signer.Event(t, storetest.Spec{Summary: "after the faults"})
	if o := e.oneReply(e.submit(raw)); !o.OK {
		t.Fatalf("refused: %+v", o)
	}
}
