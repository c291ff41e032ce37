package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/backoff"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// keyCrypto stands for the relay device's olm machine (the real one is
// tested against Dendrite in package e2ee): it decrypts a megolm event
// only once its session's key has come (keys), and may let a key come
// while a decryption is under way (during).
type keyCrypto struct {
	mu       sync.Mutex
	keys     map[id.SessionID]bool
	plain    map[id.EventID]json.RawMessage // event id → the submission's content
	requests int
	during   func(session id.SessionID) // called when a decryption fails
}

func (k *keyCrypto) Encrypt(ctx context.Context, room id.RoomID, typ event.Type, content any) (*event.EncryptedEventContent, error) {
	return &event.EncryptedEventContent{Algorithm: id.AlgorithmMegolmV1, SessionID: "outbound", MegolmCiphertext: []byte("ciphertext")}, nil
}

func (k *keyCrypto) Decrypt(ctx context.Context, ev *event.Event) (*event.Event, error) {
	c := ev.Content.AsEncrypted()
	k.mu.Lock()
	ok, during := k.keys[c.SessionID], k.during
	plain := k.plain[ev.ID]
	k.mu.Unlock()
	if !ok {
		if during != nil {
			during(c.SessionID)
		}
		return nil, fmt.Errorf("%w: %s: no session with given ID found", ErrUndecryptable, ReasonNoSession)
	}
	return &event.Event{ID: ev.ID, RoomID: ev.RoomID, Sender: ev.Sender, Type: event.Type{Type: EventTypeSubmit, Class: event.MessageEventType},
		Content: event.Content{VeryRaw: plain}}, nil
}

func (k *keyCrypto) ProcessSync(context.Context, *mautrix.RespSync, string) {}
func (k *keyCrypto) HandleState(context.Context, *event.Event)              {}
func (k *keyCrypto) RequestKey(context.Context, *event.Event) {
	k.mu.Lock()
	k.requests++
	k.mu.Unlock()
}
func (k *keyCrypto) Status(context.Context) CryptoStatus { return CryptoStatus{Ready: true} }

// sent is one event the fake homeserver took: its transaction id and the
// (fake) time it came.
type sent struct {
	txn string
	at  time.Time
}

// TestKeyArrivalWakesRetry, on synctest's fake clock: a queued submission
// whose room key has not come is tried once (a key request, the notice
// that it could not be read) and then waits KeyRetry — 10 minutes here;
// when the key comes (KeyArrived) it is decrypted, appended and answered
// at that same instant, no tick of Run's and no fake time passing. A key
// that comes while an attempt is under way (after its decryption failed,
// before its retry was stored) wakes it as well.
func TestKeyArrivalWakesRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlite.OpenWith(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		p, err := st.CreateProject(ctx, storetest.NewUUID())
		if err != nil {
			t.Fatal(err)
		}
		signer := storetest.NewSigner(t, p.ID).Register(t, st)
		const room = "!room:hs.test"
		if _, err := st.CreateMatrixBinding(ctx, store.MatrixBinding{ID: storetest.NewUUID(), ProjectID: p.ID, RoomID: room}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var sends []sent
		hs := roundTrip(func(r *http.Request) (*http.Response, error) {
			switch {
			case strings.Contains(r.URL.Path, "/state/m.room.encryption"):
				return jsonAnswer(r, 200, `{"algorithm":"m.megolm.v1.aes-sha2"}`)
			case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/send/m.room.encrypted/"):
				mu.Lock()
				sends = append(sends, sent{txn: r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:], at: time.Now()})
				n := len(sends)
				mu.Unlock()
				return jsonAnswer(r, 200, fmt.Sprintf(`{"event_id":"$reply%d"}`, n))
			case strings.HasSuffix(r.URL.Path, "/messages"):
				return jsonAnswer(r, 200, `{"chunk":[],"start":"t0"}`)
			}
			return jsonAnswer(r, 404, `{"errcode":"M_UNRECOGNIZED","error":"not here"}`)
		})
		cli, err := NewClient("http://hs.test", "@relay:hs.test", "token")
		if err != nil {
			t.Fatal(err)
		}
		cli.Client.Transport = hs
		cr := &keyCrypto{keys: map[id.SessionID]bool{}, plain: map[id.EventID]json.RawMessage{}}
		in := &Inbox{Store: st, Ingest: ingest.New(st, ingest.Options{}), Client: cli, Crypto: cr,
			KeyRetry: backoff.Policy{Initial: 10 * time.Minute, Max: 10 * time.Minute}}
		queue := func(mid id.EventID, session id.SessionID, summary string) {
			t.Helper()
			_, raw := signer.Event(t, storetest.Spec{Summary: summary})
			cr.mu.Lock()
			cr.plain[mid] = json.RawMessage(`{"event":` + string(raw) + `}`)
			cr.mu.Unlock()
			ev, _ := json.Marshal(map[string]any{"type": "m.room.encrypted", "event_id": mid, "room_id": room, "sender": "@alice:hs.test",
				"origin_server_ts": 1, "content": map[string]any{"algorithm": "m.megolm.v1.aes-sha2", "sender_key": "alicecurve",
					"session_id": session, "ciphertext": "AwgAEiA", "device_id": "ALICE"}})
			if err := st.EnqueueMatrixSubmissions(ctx, []store.MatrixSubmission{{MatrixEventID: string(mid), RoomID: room, Sender: "@alice:hs.test",
				Event: encryptedSubmission(ev)}}, "", ""); err != nil {
				t.Fatal(err)
			}
			in.poke()
		}
		txns := func() []string {
			mu.Lock()
			defer mu.Unlock()
			var out []string
			for _, s := range sends {
				out = append(out, s.txn)
			}
			return out
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		in.init()
		go func() { defer close(done); _ = in.Run(rctx) }()
		defer func() { cancel(); <-done }()

		// The key has not come: one attempt, a key request, the notice.
		queue("$sub1", "S1", "waits for its key")
		synctest.Wait()
		q, err := st.MatrixSubmission(ctx, "$sub1")
		if err != nil || q.Final != "" || q.Attempts != 1 || !strings.HasPrefix(q.LastError, ReasonNoSession) {
			t.Fatalf("after the first attempt: %v, final %q, attempts %d, last_error %q; want pending after 1, no_session", err, q.Final, q.Attempts, q.LastError)
		}
		notice := TxnID(room, "$sub1", "undecryptable")
		if got := txns(); len(got) != 1 || got[0] != notice || cr.requests != 1 {
			t.Fatalf("sent %v with %d key requests; want the notice %s and 1 key request", got, cr.requests, notice)
		}

		// The key comes: answered at once, at the same fake instant.
		keyAt := time.Now()
		cr.mu.Lock()
		cr.keys["S1"] = true
		cr.mu.Unlock()
		in.KeyArrived(ctx, room, "S1")
		synctest.Wait()
		q, err = st.MatrixSubmission(ctx, "$sub1")
		if err != nil || q.Final != store.MatrixSubmissionReplied || q.Attempts != 2 {
			t.Fatalf("after the key came: %v, final %q, attempts %d; want replied at the second attempt", err, q.Final, q.Attempts)
		}
		mu.Lock()
		last := sends[len(sends)-1]
		mu.Unlock()
		if last.txn != TxnID(room, "$sub1", "reply") || !last.at.Equal(keyAt) {
			t.Fatalf("the reply %s went %v after the key came; want %s at once", last.txn, last.at.Sub(keyAt), TxnID(room, "$sub1", "reply"))
		}
		if head, _, _ := st.Head(ctx, p.ID); head != 1 {
			t.Fatalf("head %d, want 1", head)
		}

		// A key that comes while the attempt is under way.
		cr.mu.Lock()
		cr.during = func(session id.SessionID) {
			cr.mu.Lock()
			cr.keys[session] = true
			cr.mu.Unlock()
			in.KeyArrived(ctx, room, session)
		}
		cr.mu.Unlock()
		start := time.Now()
		queue("$sub2", "S2", "its key comes mid-attempt")
		synctest.Wait()
		q, err = st.MatrixSubmission(ctx, "$sub2")
		if err != nil || q.Final != store.MatrixSubmissionReplied || q.Attempts != 2 || !time.Now().Equal(start) {
			t.Fatalf("key during the attempt: %v, final %q, attempts %d, %v later; want replied at the second attempt, at once",
				err, q.Final, q.Attempts, time.Since(start))
		}
		if head, _, _ := st.Head(ctx, p.ID); head != 2 {
			t.Fatalf("head %d, want 2", head)
		}
	})
}

type roundTrip func(r *http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func jsonAnswer(r *http.Request, status int, body string) (*http.Response, error) {
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Request: r, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body))}, nil
}
