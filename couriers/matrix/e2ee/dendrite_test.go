//go:build goolm

package e2ee_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/couriers/matrix/e2ee"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/backoff"
	"github.com/acrelay/acrelay/internal/dendritetest"
	"github.com/acrelay/acrelay/internal/hstest"
	"github.com/acrelay/acrelay/internal/matrixtest"
	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

var ctx = context.Background()

// relayStore is what the relay side of these tests needs of a store.
type relayStore interface {
	store.Store
	store.MatrixCrypto
}

// relayEnv is one relay process in bot mode with encryption: courier
// runner, inbox, /sync, all on one crypto machine.
type relayEnv struct {
	t      *testing.T
	hs     hstest.Homeserver
	st     relayStore
	signer *storetest.Signer
	cli    *mautrix.Client
	cr     matrix.Crypto
	runner *couriers.Runner
	stop   context.CancelFunc
	done   chan struct{}
	undec  sync.Map // reason → count
	// password is the bot's password (cross-signing); printed counts the
	// recovery keys printed.
	password string
	printed  []string
	pmu      sync.Mutex
	refused  sync.Map // to-device reason → count
	// keyRetry is the inbox's fallback backoff for undecryptable
	// submissions (zero: the default).
	keyRetry backoff.Policy
}

func (r *relayEnv) start() {
	r.t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	in := &matrix.Inbox{Store: r.st, Ingest: ingest.New(r.st, ingest.Options{}), Client: r.cli, Logger: log, KeyRetry: r.keyRetry,
		OnUndecryptable: func(reason string) {
			v, _ := r.undec.LoadOrStore(reason, new(int))
			*(v.(*int))++
		}}
	cr, err := e2ee.Open(ctx, e2ee.Options{Client: r.cli, Store: r.st, Logger: log, Password: r.password, SessionReceived: in.KeyArrived,
		PrintRecoveryKey: func(rk string) { r.pmu.Lock(); r.printed = append(r.printed, rk); r.pmu.Unlock() },
		OnRefused: func(reason string, n int) {
			v, _ := r.refused.LoadOrStore(reason, new(atomic.Int64))
			v.(*atomic.Int64).Add(int64(n))
		}})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cr.(*e2ee.Machine).Err(ctx); err != nil {
		r.t.Fatal(err)
	}
	r.cr = cr
	c := &matrix.Courier{Store: r.st, Client: r.cli, PublicURL: "http://relay.test", Host: "hs", Crypto: cr, Logger: log}
	r.runner = couriers.NewRunner(r.st, c, couriers.Options{Holder: "relay-" + hex.EncodeToString([]byte(time.Now().String()))[:8], LeaseTTL: 15 * time.Second, // a send may take 3/4 of it: a loaded machine encrypts and sends slowly
		Backoff: couriers.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}, DeliveryTimeout: 20 * time.Second, Batch: 5, Refresh: time.Second})
	in.Crypto = cr
	rctx, cancel := context.WithCancel(ctx)
	r.stop, r.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.runner.Run(rctx) })
	wg.Go(func() { _ = in.Run(rctx) })
	wg.Go(func() { _ = in.Sync(rctx) })
	go func() { wg.Wait(); close(r.done) }()
}

func (r *relayEnv) halt() {
	if r.stop != nil {
		r.stop()
		<-r.done
		r.stop = nil
	}
}

func (r *relayEnv) appendN(n int, summary string) []string {
	r.t.Helper()
	in := ingest.New(r.st, ingest.Options{})
	var ids []string
	for i := range n {
		_, raw := r.signer.Event(r.t, storetest.Spec{Summary: fmt.Sprintf("%s %d", summary, i)})
		res, err := in.Append(ctx, r.signer.ProjectID, raw)
		if err != nil {
			r.t.Fatal(err)
		}
		ids = append(ids, res.Record.EventID)
	}
	return ids
}

// newRelay starts Dendrite, the relay's store (engine: "sqlite" or
// "postgres") and its bot user; the relay is not started.
func newRelay(t *testing.T, engine string) *relayEnv {
	t.Helper()
	return newRelayOn(t, startDendrite, engine)
}

// startDendrite is dendritetest.Start as an hstest.Start.
func startDendrite(t testing.TB, opt hstest.Options) hstest.Homeserver {
	return dendritetest.Start(t, opt)
}

// newRelayOn is newRelay on the homeserver start starts.
func newRelayOn(t *testing.T, start hstest.Start, engine string) *relayEnv {
	t.Helper()
	hs := start(t, hstest.Options{})
	var st relayStore
	switch engine {
	case "sqlite":
		db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		st = db
	case "postgres":
		url := pgtest.FreshDatabase(t)
		db, err := postgres.Open(ctx, url, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		st = db
	}
	r := &relayEnv{t: t, hs: hs, st: st}
	t.Cleanup(func() { r.halt(); st.Close() })
	p, err := st.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	r.signer = storetest.NewSigner(t, p.ID).Register(t, st)
	bot := hs.CreateUser("relaybot")
	if r.cli, err = matrix.NewClient(hs.HomeserverURL(), bot.UserID, bot.AccessToken); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEncryptedRoomBotDendriteSQLite: bot mode with the crypto store in
// the relay's SQLite database.
func TestEncryptedRoomBotDendriteSQLite(t *testing.T) {
	testEncryptedRoomBot(t, startDendrite, "sqlite")
}

// TestEncryptedRoomBotDendritePostgres: the same on PostgreSQL.
func TestEncryptedRoomBotDendritePostgres(t *testing.T) {
	testEncryptedRoomBot(t, startDendrite, "postgres")
}

// testEncryptedRoomBot: a member creates a private room the way Element
// does (m.room.encryption megolm in its initial state) and invites the
// relay's bot, whose /sync joins it; every record reaches the member as
// m.room.encrypted that decrypts to the record event and the notice, in
// receipt order, exactly once, and the relay sends no plaintext; an
// encrypted submission is appended and answered with exactly one
// encrypted reply naming its event id; after a restart (a new olm
// machine on the same store) records still arrive exactly once and
// decryptable. start starts the homeserver (Dendrite, Synapse).
func testEncryptedRoomBot(t *testing.T, start hstest.Start, engine string) {
	if testing.Short() {
		t.Skip("runs a homeserver; skipped with -short")
	}
	r := newRelayOn(t, start, engine)
	r.start()
	alice := matrixtest.NewMember(t, r.hs, "alice")
	resp, err := alice.Cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "encrypted project room",
		Invite:       []id.UserID{r.cli.UserID},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	room := resp.RoomID
	waitFor(t, 30*time.Second, "the relay's bot joined the room", func() bool {
		jr, err := r.cli.JoinedRooms(ctx)
		return err == nil && slices.Contains(jr.JoinedRooms, room)
	})
	b := &matrix.Binder{Store: r.st, Client: r.cli, Refresh: r.runner.Refresh, CanEncrypt: true}
	bd, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()})
	if err != nil {
		t.Fatal(err)
	}
	if !bd.Encrypted {
		t.Fatal("the binding does not say the room is encrypted")
	}
	// What `acrelay matrix doctor` says of it, with and without encryption.
	if f := matrix.CheckRoomEncryption(ctx, r.cli, room, true); f.Status != matrix.StatusOK || !strings.HasPrefix(f.Detail, "end-to-end encrypted: the relay encrypts") {
		t.Errorf("doctor, relay with encryption: %+v", f)
	}
	if f := matrix.CheckRoomEncryption(ctx, r.cli, room, false); f.Status != matrix.StatusFail {
		t.Errorf("doctor, relay without encryption: %+v, want fail", f)
	}
	if f := matrix.CheckDeviceKeys(ctx, r.cli); f.Status != matrix.StatusWarn || !strings.Contains(f.Detail, "not cross-signed") {
		t.Errorf("doctor, device keys: %+v, want published but not cross-signed", f)
	}
	// A relay that cannot encrypt refuses to bind it.
	nb := &matrix.Binder{Store: r.st, Client: r.cli}
	if _, err := nb.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); !errors.Is(err, matrix.ErrEncryptionUnavailable) {
		t.Errorf("binding without encryption: %v, want ErrEncryptionUnavailable", err)
	}
	ids := r.appendN(4, "encrypted")
	alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, ids)

	// An encrypted submission: alice's client encrypts it (its state
	// store knows the room is encrypted and the relay is joined).
	waitFor(t, 30*time.Second, "alice's client saw the relay join", func() bool {
		return alice.Cli.StateStore.IsInRoom(ctx, room, r.cli.UserID)
	})
	_, raw := r.signer.Event(t, storetest.Spec{Summary: "submitted encrypted"})
	sub, err := alice.Send(room, event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType},
		json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	var s matrixtest.Seen
	waitFor(t, 60*time.Second, "one encrypted reply to the submission", func() bool {
		s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
		return len(s.Replies[sub.EventID]) > 0
	})
	waitAnswered(t, r.st, sub.EventID)
	s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
	if got := s.Replies[sub.EventID]; len(got) != 1 || !got[0].OK || got[0].EventID == "" {
		t.Fatalf("replies to the submission: %+v, want exactly one accepting it", got)
	}
	ids = append(ids, s.Replies[sub.EventID][0].EventID)
	if head, _, _ := r.st.Head(ctx, r.signer.ProjectID); head != int64(len(ids)) {
		t.Fatalf("head %d, want %d", head, len(ids))
	}
	alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, ids) // the submission's record too, once

	// Restart: a new olm machine on the same store; records while down.
	r.halt()
	ids = append(ids, r.appendN(3, "while down")...)
	r.start()
	ids = append(ids, r.appendN(2, "after restart")...)
	s = alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, ids)
	if len(s.Replies[sub.EventID]) != 1 {
		t.Fatalf("%d replies to the submission after the restart, want 1", len(s.Replies[sub.EventID]))
	}
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAnswered waits until the inbox stored mid as answered (final,
// replied): its one reply is in the room, and no other can follow (a
// final submission is never answered again).
func waitAnswered(t *testing.T, st store.Matrix, mid id.EventID) {
	t.Helper()
	waitFor(t, 30*time.Second, "the submission stored as answered", func() bool {
		q, err := st.MatrixSubmission(ctx, mid.String())
		return err == nil && q.Final == store.MatrixSubmissionReplied
	})
}

// encryptedRoom: alice creates a room the way Element does and invites
// the relay's bot, which joins (with r's /sync, or by hand when r is not
// running); alice's client waits until it sees the bot joined.
func encryptedRoom(t *testing.T, r *relayEnv, alice *matrixtest.Member, joinByHand bool) id.RoomID {
	t.Helper()
	resp, err := alice.Cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "encrypted project room",
		Invite:       []id.UserID{r.cli.UserID},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	room := resp.RoomID
	if joinByHand {
		if _, err := r.cli.JoinRoomByID(ctx, room); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "alice's client saw the relay join", func() bool {
		return alice.Cli.StateStore.IsInRoom(ctx, room, r.cli.UserID)
	})
	return room
}

func (r *relayEnv) count(reason string) int {
	v, ok := r.undec.Load(reason)
	if !ok {
		return 0
	}
	return *(v.(*int))
}

// TestUndecryptableSubmissionDendrite: a submission encrypted before the
// relay's device existed (alice's client shared the room key with no
// device of the relay) is not lost: it is stored with its reason
// (no_session), counted, answered in the room with an encrypted notice
// saying it could not be read, and the relay asks for its key; once
// alice's client answers the key request, the key's arrival wakes its
// retry at once — the fallback timer is set to 10 minutes here, so only
// the wake-up can answer it within the test's minute — and it is
// decrypted, appended and answered exactly once.
func TestUndecryptableSubmissionDendrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Dendrite; skipped with -short")
	}
	r := newRelay(t, "sqlite")
	r.keyRetry = backoff.Policy{Initial: 10 * time.Minute, Max: 10 * time.Minute} // next attempt 5 to 10 min after a failure
	alice := matrixtest.NewMember(t, r.hs, "alice")
	room := encryptedRoom(t, r, alice, true)
	b := &matrix.Binder{Store: r.st, Client: r.cli, CanEncrypt: true}
	if _, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	// Alice's client holds the relay's key request until told to share
	// (as a user confirms a share), and answers it then; mautrix handles
	// each key request on a goroutine of its own.
	share := make(chan struct{})
	var shareOnce sync.Once
	release := func() { shareOnce.Do(func() { close(share) }) }
	t.Cleanup(release)
	mach := alice.Mach
	deflt := mach.AllowKeyShare
	mach.AllowKeyShare = func(ctx context.Context, d *id.Device, info event.RequestedKeyInfo) *crypto.KeyShareRejection {
		if d.UserID == r.cli.UserID {
			<-share
			return nil
		}
		return deflt(ctx, d, info)
	}
	_, raw := r.signer.Event(t, storetest.Spec{Summary: "encrypted before the relay had a device"})
	sub, err := alice.Send(room, event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType},
		json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	r.start()
	var s matrixtest.Seen
	waitFor(t, 60*time.Second, "the notice that the submission could not be read", func() bool {
		s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
		return s.UndecNote[sub.EventID] != ""
	})
	if got := s.UndecNote[sub.EventID]; got != matrix.ReasonNoSession {
		t.Fatalf("notice reason %q, want %q", got, matrix.ReasonNoSession)
	}
	if r.count(matrix.ReasonNoSession) == 0 {
		t.Fatal("the undecryptable submission was not counted")
	}
	var q store.MatrixSubmission
	waitFor(t, 10*time.Second, "the failed attempt stored with its retry", func() bool {
		q, err = r.st.MatrixSubmission(ctx, sub.EventID.String())
		return err == nil && strings.Contains(q.LastError, matrix.ReasonNoSession)
	})
	if q.Final != "" || q.Attempts != 1 || time.Until(q.NextAttemptAt) < 4*time.Minute {
		t.Fatalf("stored submission: final %q, attempts %d, next attempt in %v, last_error %q; want pending, 1 attempt, next in 5 to 10 min, reason %s",
			q.Final, q.Attempts, time.Until(q.NextAttemptAt).Round(time.Second), q.LastError, matrix.ReasonNoSession)
	}
	if head, _, _ := r.st.Head(ctx, r.signer.ProjectID); head != 0 {
		t.Fatalf("head %d before the key arrived", head)
	}

	shared := time.Now()
	release()
	waitFor(t, 60*time.Second, "the submission decrypted and answered", func() bool {
		s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
		return len(s.Replies[sub.EventID]) > 0
	})
	t.Logf("answered %v after alice shared the key (fallback timer: 5 to 10 min)", time.Since(shared).Round(100*time.Millisecond))
	waitAnswered(t, r.st, sub.EventID)
	s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
	if got := s.Replies[sub.EventID]; len(got) != 1 || !got[0].OK {
		t.Fatalf("replies %+v, want exactly one accepting it", got)
	}
	if s.Plaintext != 0 {
		t.Fatalf("%d plaintext events from the relay", s.Plaintext)
	}
	alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, []string{s.Replies[sub.EventID][0].EventID})
	if q, err = r.st.MatrixSubmission(ctx, sub.EventID.String()); err != nil || q.Attempts != 2 || q.Final != store.MatrixSubmissionReplied {
		t.Fatalf("stored submission: %v, attempts %d, final %q; want replied at the second attempt", err, q.Attempts, q.Final)
	}
}

// TestBadEncryptedInputDendrite: a malformed m.room.encrypted event and a
// replay of a megolm message index (the ciphertext of an accepted
// submission sent again as a new event) are each counted, logged and
// given up — never appended, never answered; the relay keeps working.
func TestBadEncryptedInputDendrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Dendrite; skipped with -short")
	}
	r := newRelay(t, "sqlite")
	r.start()
	alice := matrixtest.NewMember(t, r.hs, "alice")
	room := encryptedRoom(t, r, alice, false)
	b := &matrix.Binder{Store: r.st, Client: r.cli, CanEncrypt: true}
	if _, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	_, raw := r.signer.Event(t, storetest.Spec{Summary: "the genuine one"})
	content := json.RawMessage(`{"event":` + string(raw) + `}`)
	submit := event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType}
	enc, err := alice.Encrypt(room, submit, content)
	if err != nil {
		t.Fatal(err)
	}
	genuine, err := alice.Cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	var s matrixtest.Seen
	waitFor(t, 60*time.Second, "the genuine submission answered", func() bool {
		s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
		return len(s.Replies[genuine.EventID]) > 0
	})
	// The same ciphertext (session, message index) as a new event.
	replay, err := alice.Cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	malformed, err := alice.Cli.SendMessageEvent(ctx, room, event.EventEncrypted, json.RawMessage(
		`{"algorithm":"m.megolm.v1.aes-sha2","ciphertext":"!!not base64!!","session_id":"`+string(enc.SessionID)+`","sender_key":"x","device_id":"y"}`),
		mautrix.ReqSendEvent{DontEncrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ev     id.EventID
		reason string
	}{{replay.EventID, matrix.ReasonReplay}, {malformed.EventID, matrix.ReasonMalformed}} {
		waitFor(t, 60*time.Second, "the "+c.reason+" event given up", func() bool {
			q, err := r.st.MatrixSubmission(ctx, c.ev.String())
			return err == nil && q.Final == store.MatrixSubmissionGaveUp
		})
		q, _ := r.st.MatrixSubmission(ctx, c.ev.String())
		if !strings.Contains(q.LastError, c.reason) {
			t.Errorf("%s: stored last_error %q, want the reason %s", c.reason, q.LastError, c.reason)
		}
		if r.count(c.reason) == 0 {
			t.Errorf("%s: not counted", c.reason)
		}
	}
	s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
	if len(s.Replies[replay.EventID]) != 0 || len(s.Replies[malformed.EventID]) != 0 || len(s.Replies[genuine.EventID]) != 1 {
		t.Fatalf("replies: genuine %d, replay %d, malformed %d; want 1, 0, 0", len(s.Replies[genuine.EventID]), len(s.Replies[replay.EventID]), len(s.Replies[malformed.EventID]))
	}
	if head, _, _ := r.st.Head(ctx, r.signer.ProjectID); head != 1 {
		t.Fatalf("head %d, want 1 (only the genuine submission)", head)
	}
	// Still working: a record reaches alice.
	ids := []string{s.Replies[genuine.EventID][0].EventID}
	ids = append(ids, r.appendN(1, "after the bad input")...)
	alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, ids)
}

// TestEncryptedSizeLimitDendrite measures on Dendrite the largest
// plaintext content (bytes of JSON) whose megolm m.room.encrypted event
// the homeserver accepts, and checks that MaxEncryptedContentBytes leaves
// room under it for the notice (the record plus its one-line summary, at
// most noticeOverhead bytes more). Larger records go as references
// (TestMatrixReferenceDendrite's path, with this bound).
func TestEncryptedSizeLimitDendrite(t *testing.T) { testEncryptedSizeLimit(t, startDendrite) }

// testEncryptedSizeLimit is TestEncryptedSizeLimit… on the homeserver
// start starts (Dendrite, Synapse).
func testEncryptedSizeLimit(t *testing.T, start hstest.Start) {
	if testing.Short() {
		t.Skip("runs a homeserver; skipped with -short")
	}
	r := newRelayOn(t, start, "sqlite")
	r.start()
	alice := matrixtest.NewMember(t, r.hs, "alice")
	room := encryptedRoom(t, r, alice, false)
	// A type as long as the record type, which the member's reader ignores.
	typ := event.Type{Type: "io.github.acrelay.correspondence.probe0", Class: event.MessageEventType}
	fits := func(n int) bool {
		// {"x":"aaa…"} of exactly n bytes
		content := json.RawMessage(`{"x":"` + strings.Repeat("a", n-8) + `"}`)
		enc, err := r.cr.Encrypt(ctx, room, typ, content)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
		if err == nil {
			return true
		}
		var he mautrix.HTTPError
		if errors.As(err, &he) && he.Response != nil && he.Response.StatusCode == 413 {
			return false
		}
		t.Fatalf("send of %d bytes: %v", n, err)
		return false
	}
	lo, hi := 30000, 65536 // lo fits, hi does not
	if !fits(lo) || fits(hi) {
		t.Fatalf("the bounds of the search are wrong")
	}
	for hi-lo > 16 {
		mid := (lo + hi) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	const noticeOverhead = 800 // the notice's msgtype, body (≤ ~500 bytes) and key around the record
	t.Logf("%s takes megolm events of up to %d bytes of plaintext content (refuses %d); MaxEncryptedContentBytes %d + notice %d",
		r.hs.Name(), lo, hi, matrix.MaxEncryptedContentBytes, noticeOverhead)
	if matrix.MaxEncryptedContentBytes+noticeOverhead > lo {
		t.Fatalf("MaxEncryptedContentBytes %d leaves no room for the notice under %d", matrix.MaxEncryptedContentBytes, lo)
	}

	// Through the courier: a record of about 45 KB (whole in an
	// unencrypted room) goes as a reference here, between whole records.
	b := &matrix.Binder{Store: r.st, Client: r.cli, Refresh: r.runner.Refresh, CanEncrypt: true}
	if _, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	ids := r.appendN(1, "small")
	var paths []string
	for i := range 48 {
		paths = append(paths, fmt.Sprintf("p%02d/%s", i, strings.Repeat("𝔸", 230)))
	}
	_, raw := r.signer.Event(t, storetest.Spec{Paths: paths})
	if len(raw) <= matrix.MaxEncryptedContentBytes || len(raw) >= matrix.MaxContentBytes-2000 {
		t.Fatalf("event of %d bytes does not test the encrypted bound", len(raw))
	}
	res, err := ingest.New(r.st, ingest.Options{}).Append(ctx, r.signer.ProjectID, raw)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, res.Record.EventID)
	ids = append(ids, r.appendN(1, "small again")...)
	s := alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, ids)
	if len(s.References) != 1 || s.References[0] != res.Record.EventID {
		t.Fatalf("references %v, want exactly the large record %s", s.References, res.Record.EventID)
	}
}

// TestCrossSignedDeviceDendrite: given the bot's password, the relay
// cross-signs its device in the background (self_sign): the recovery key
// is stored and printed once; a restart finds the device signed and
// prints nothing; a member whose client shares room keys only with
// cross-signed devices (Element's "exclude unverified devices", MSC4153)
// still reads the records and gets its submission answered.
func TestCrossSignedDeviceDendrite(t *testing.T) { testCrossSignedDevice(t, startDendrite) }

// testCrossSignedDevice is TestCrossSignedDevice… on the homeserver
// start starts (Dendrite, Synapse).
func testCrossSignedDevice(t *testing.T, start hstest.Start) {
	if testing.Short() {
		t.Skip("runs a homeserver; skipped with -short")
	}
	r := newRelayOn(t, start, "sqlite")
	r.password = r.hs.Password("relaybot")
	r.start()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if !r.cr.(*e2ee.Machine).CrossSigned(wctx) {
		t.Fatal("the device was not cross-signed")
	}
	if f := matrix.CheckDeviceKeys(ctx, r.cli); f.Status != matrix.StatusOK {
		t.Fatalf("doctor: %+v, want ok (published and cross-signed)", f)
	}
	rk, err := r.st.MatrixCryptoSecret(ctx, store.MatrixRecoveryKey, func() (string, error) { return "", errors.New("none stored") })
	if err != nil || len(r.printed) != 1 || r.printed[0] != rk || rk == "" {
		t.Fatalf("recovery key stored %q (%v), printed %d times", rk, err, len(r.printed))
	}
	r.halt()
	r.start()
	if !r.cr.(*e2ee.Machine).CrossSigned(wctx) || len(r.printed) != 1 {
		t.Fatalf("after a restart: cross-signed %v, printed %d times (want true, 1)", r.cr.(*e2ee.Machine).CrossSigned(wctx), len(r.printed))
	}

	alice := matrixtest.NewMember(t, r.hs, "alice")
	alice.Mach.SendKeysMinTrust = id.TrustStateCrossSignedTOFU
	alice.Mach.ShareKeysMinTrust = id.TrustStateCrossSignedTOFU
	room := encryptedRoom(t, r, alice, false)
	b := &matrix.Binder{Store: r.st, Client: r.cli, Refresh: r.runner.Refresh, CanEncrypt: true}
	if _, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	ids := r.appendN(2, "to a strict member")
	alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, ids)
	_, raw := r.signer.Event(t, storetest.Spec{Summary: "from a strict member"})
	sub, err := alice.Send(room, event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType}, json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	var s matrixtest.Seen
	waitFor(t, 60*time.Second, "the strict member's submission answered", func() bool {
		s = alice.Read(t, room, r.cli.UserID, r.signer.Pub)
		return len(s.Replies[sub.EventID]) > 0
	})
	if got := s.Replies[sub.EventID]; len(got) != 1 || !got[0].OK {
		t.Fatalf("replies %+v", got)
	}
}

// TestToDeviceBadInputDendrite: an olm message meant for another device
// (no ciphertext for the relay's identity key), a malformed encrypted
// to-device event, and a flood of to-device events from one sender reach
// the relay's device: each kind is refused before the olm machine, logged
// and counted; the relay keeps working (a record still reaches the member
// decryptable).
func TestToDeviceBadInputDendrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Dendrite; skipped with -short")
	}
	r := newRelay(t, "sqlite")
	r.start()
	alice := matrixtest.NewMember(t, r.hs, "alice")
	room := encryptedRoom(t, r, alice, false)
	to := func(content string) *mautrix.ReqSendToDevice {
		return &mautrix.ReqSendToDevice{Messages: map[id.UserID]map[id.DeviceID]*event.Content{
			r.cli.UserID: {r.cli.DeviceID: {VeryRaw: json.RawMessage(content)}}}}
	}
	// Olm for another device: the ciphertext map names a key not the relay's.
	if _, err := alice.Cli.SendToDevice(ctx, event.ToDeviceEncrypted, to(`{"algorithm":"m.olm.v1.curve25519-aes-sha2","sender_key":"`+
		alice.Mach.OwnIdentity().IdentityKey.String()+`","ciphertext":{"c2VtZW9uZWVsc2Vzb21lb25lZWxzZXNvbWVvbmVlbHM":{"type":0,"body":"AwoA"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Cli.SendToDevice(ctx, event.ToDeviceEncrypted, to(`{"algorithm":"m.megolm.v1.aes-sha2","ciphertext":"x"}`)); err != nil {
		t.Fatal(err)
	}
	for i := range e2ee.MaxToDevicePerSender + 50 {
		_, err := alice.Cli.SendToDevice(ctx, event.Type{Type: "io.github.acrelay.test.flood", Class: event.ToDeviceEventType},
			&mautrix.ReqSendToDevice{Messages: map[id.UserID]map[id.DeviceID]*event.Content{r.cli.UserID: {r.cli.DeviceID: {VeryRaw: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	count := func(reason string) int64 {
		v, ok := r.refused.Load(reason)
		if !ok {
			return 0
		}
		return v.(*atomic.Int64).Load()
	}
	waitFor(t, 60*time.Second, "each kind of bad to-device input counted", func() bool {
		return count(e2ee.ReasonOlmNotForDevice) >= 1 && count(e2ee.ReasonToDeviceMalformed) >= 1 && count(e2ee.ReasonToDeviceFlood) >= 1
	})
	t.Logf("refused: olm for another device %d, malformed %d, flood %d", count(e2ee.ReasonOlmNotForDevice), count(e2ee.ReasonToDeviceMalformed), count(e2ee.ReasonToDeviceFlood))
	b := &matrix.Binder{Store: r.st, Client: r.cli, Refresh: r.runner.Refresh, CanEncrypt: true}
	if _, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	alice.WaitRoom(t, room, r.cli.UserID, r.signer.Pub, r.appendN(1, "after the bad to-device input"))
}
