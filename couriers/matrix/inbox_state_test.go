package matrix_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// runInbox runs in (Run, and Sync when withSync is set) until the test ends,
// receiving the application service's pushes.
func (e *env) runInbox(in *matrix.Inbox, withSync bool) (stop func()) {
	e.t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	e.inbox.mu.Lock()
	e.inbox.in = in
	e.inbox.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { _ = in.Run(rctx) })
	if withSync {
		wg.Go(func() { _ = in.Sync(rctx) })
	}
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		e.inbox.mu.Lock()
		e.inbox.in = nil
		e.inbox.mu.Unlock()
		cancel()
		wg.Wait()
	}
	e.t.Cleanup(stop)
	return stop
}

// TestMatrixInboxRoomRefusingRepliesStallsNoOther: 100 submissions from a
// room the relay cannot post to (it is not in it) come first; a
// submission in the project's room behind them is still answered at
// once, and the 100 are given up after MaxAttempts with their attempts,
// last error and final outcome in the store. (On a relay that kept the
// retry state in memory and read the 100 oldest pending submissions, the
// 100 held back every room for good.)
func TestMatrixInboxRoomRefusingRepliesStallsNoOther(t *testing.T) {
	e := newEnv(t)
	e.bind()
	var stuck []store.MatrixSubmission
	for i := range 100 {
		stuck = append(stuck, store.MatrixSubmission{MatrixEventID: fmt.Sprintf("$stuck-%03d:acrelay.test", i),
			RoomID: "!gone:acrelay.test", Sender: "@mallory:acrelay.test", Event: []byte(`{}`)})
	}
	if err := e.st.EnqueueMatrixSubmissions(ctx, stuck, "", ""); err != nil {
		t.Fatal(err)
	}
	in := &matrix.Inbox{Store: e.st, Ingest: ingest.New(e.st, ingest.Options{}), Client: e.client(), MaxAttempts: 2}
	e.runInbox(in, false)

	_, raw := e.signer.Event(t, storetest.Spec{Summary: "behind a stuck room"})
	o := e.oneReply(e.submit(raw))
	if !o.OK || o.ReceivedSeq != "1" {
		t.Fatalf("outcome %+v, want accepted at received_seq 1", o)
	}
	waitFor(t, 30*time.Second, "the 100 stuck submissions given up", func() bool {
		for _, s := range stuck {
			got, err := e.st.MatrixSubmission(ctx, s.MatrixEventID)
			if err != nil || got.Final != store.MatrixSubmissionGaveUp {
				return false
			}
		}
		return true
	})
	got, err := e.st.MatrixSubmission(ctx, stuck[0].MatrixEventID)
	if err != nil {
		t.Fatal(err)
	}
	var out matrix.Outcome
	if err := json.Unmarshal(got.Outcome, &out); err != nil || out.OK || out.Status != 404 || out.Error != "matrix_room_not_bound" {
		t.Errorf("stored outcome %s, want the 404 matrix_room_not_bound refusal", got.Outcome)
	}
	if got.Attempts != 2 || got.LastError != "M_FORBIDDEN" || got.ReplyEventID != "" {
		t.Errorf("given up after %d attempts, last error %q, reply %q; want 2, M_FORBIDDEN, none", got.Attempts, got.LastError, got.ReplyEventID)
	}
}

// TestMatrixBotLimitedTimeline: 150 submissions arrive while the bot's
// /sync is stopped; the next sync's timeline is limited to the filter's
// 100, and the bot reads the other 50 back with /messages from prev_batch,
// so every one is queued.
func TestMatrixBotLimitedTimeline(t *testing.T) {
	e := newEnv(t)
	cli := e.botClient(e.hs.URL)
	in := &matrix.Inbox{Store: e.st, Ingest: ingest.New(e.st, ingest.Options{}), Client: cli}
	syncCtx, stopSync := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = in.Sync(syncCtx) }()
	e.inviteBot(cli)
	key := "sync:" + e.botID.String()
	// A stored since token (the next sync is not a first sync, which
	// would start at the present).
	waitFor(t, 20*time.Second, "a stored since token", func() bool {
		tok, err := e.st.MatrixSyncToken(ctx, key)
		return err == nil && tok != ""
	})
	stopSync()
	<-done

	sent := make([]id.EventID, 150)
	for i := range sent {
		resp, err := e.alice.SendMessageEvent(ctx, e.room, submitType, json.RawMessage(fmt.Sprintf(`{"event":{"n":%d}}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		sent[i] = resp.EventID
	}
	// A plain message after them: the filter leaves it out.
	if _, err := e.alice.SendText(ctx, e.room, "chatter"); err != nil {
		t.Fatal(err)
	}
	syncCtx, stopSync = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { defer close(done); _ = in.Sync(syncCtx) }()
	defer func() { stopSync(); <-done }()
	missing := func() []id.EventID {
		var out []id.EventID
		for _, mid := range sent {
			if _, err := e.st.MatrixSubmission(ctx, mid.String()); err != nil {
				out = append(out, mid)
			}
		}
		return out
	}
	waitFor(t, 30*time.Second, "every submission queued", func() bool { return len(missing()) == 0 })
	for i, mid := range []id.EventID{sent[0], sent[149]} {
		got, err := e.st.MatrixSubmission(ctx, mid.String())
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"n":%d}`, []int{0, 149}[i])
		if string(got.Event) != want || got.RoomID != e.room.String() || got.Sender != e.alice.UserID.String() {
			t.Errorf("queued %s = event %s room %s sender %s, want %s from alice in the room", mid, got.Event, got.RoomID, got.Sender, want)
		}
	}
}

// countingStore counts the courier's binding reads on a real store.
type countingStore struct {
	*sqlite.DB
	mu    sync.Mutex
	reads int
}

func (c *countingStore) MatrixBinding(ctx context.Context, projectID, id string) (store.MatrixBinding, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.DB.MatrixBinding(ctx, projectID, id)
}

// TestMatrixCourierOneBindingReadPerBatch: 20 records in batches of 5
// reach the room with one binding read per delivery (4), not one per
// record (20): whether the binding still exists comes back with each
// part's write.
func TestMatrixCourierOneBindingReadPerBatch(t *testing.T) {
	e := newEnv(t)
	e.bind()
	ids := e.appendN(20)
	cs := &countingStore{DB: e.st}
	e.startRelay(cs)
	e.verifyRoom(ids, 30*time.Second)
	e.caughtUp()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	// One read per delivery: 4 when no batch is retried; a loaded machine
	// may cut a send at the test's short lease's safe time and retry the
	// batch (one more read each). One read per record would be 20 or more.
	if cs.reads < 4 || cs.reads >= 20 {
		t.Errorf("%d binding reads for 20 records in batches of 5, want one per delivery (4, or a few more after retries), not one per record", cs.reads)
	}
}
