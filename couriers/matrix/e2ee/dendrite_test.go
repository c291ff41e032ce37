//go:build goolm

package e2ee_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/sqlstatestore"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/couriers/matrix/e2ee"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/dendritetest"
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

// member is a room member's client doing encryption as Element does: a
// mautrix goolm OlmMachine on its own SQLite file (modernc, through
// dbutil), fed by its own /sync loop (room keys, device lists, member
// changes). (mautrix's cryptohelper is not used: it links a cgo SQLite
// driver.)
type member struct {
	cli  *mautrix.Client
	mach *crypto.OlmMachine
}

func newMember(t *testing.T, hs *dendritetest.Server, localpart string) *member {
	t.Helper()
	cli := hs.CreateUser(localpart)
	sdb, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "member.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	sdb.SetMaxOpenConns(1)
	db, err := dbutil.NewWithDB(sdb, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	pk := make([]byte, 32)
	_, _ = rand.Read(pk)
	nop := zerolog.Nop()
	cs := crypto.NewSQLCryptoStore(db, dbutil.ZeroLogger(nop), "", cli.DeviceID, pk)
	if err := cs.DB.Upgrade(ctx); err != nil {
		t.Fatal(err)
	}
	ss := sqlstatestore.NewSQLStateStore(db, dbutil.ZeroLogger(nop), false)
	if err := ss.Upgrade(ctx); err != nil {
		t.Fatal(err)
	}
	cli.StateStore, cli.Store = ss, cs
	mach := crypto.NewOlmMachine(cli, &nop, cs, ss)
	if err := mach.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mach.ShareKeys(ctx, -1); err != nil {
		t.Fatal(err)
	}
	syncer := cli.Syncer.(*mautrix.DefaultSyncer)
	syncer.OnSync(mach.ProcessSyncResponse)
	syncer.OnEventType(event.StateMember, mach.HandleMemberEvent)
	syncer.OnEvent(cli.StateStoreSyncHandler)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = cli.SyncWithContext(sctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = sdb.Close() })
	return &member{cli: cli, mach: mach}
}

// encrypt encrypts content for room, sharing the room key with the
// members' devices first when needed (as Element does before sending).
func (m *member) encrypt(room id.RoomID, typ event.Type, content any) (*event.EncryptedEventContent, error) {
	enc, err := m.mach.EncryptMegolmEvent(ctx, room, typ, content)
	if crypto.IsShareError(err) {
		users, err := m.cli.StateStore.(*sqlstatestore.SQLStateStore).GetRoomJoinedOrInvitedMembers(ctx, room)
		if err != nil {
			return nil, err
		}
		if err := m.mach.ShareGroupSession(ctx, room, users); err != nil {
			return nil, err
		}
		return m.mach.EncryptMegolmEvent(ctx, room, typ, content)
	}
	return enc, err
}

// send sends content to room encrypted.
func (m *member) send(room id.RoomID, typ event.Type, content any) (*mautrix.RespSendEvent, error) {
	enc, err := m.encrypt(room, typ, content)
	if err != nil {
		return nil, err
	}
	return m.cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
}

// relayEnv is one relay process in bot mode with encryption: courier
// runner, inbox, /sync, all on one crypto machine.
type relayEnv struct {
	t      *testing.T
	hs     *dendritetest.Server
	st     relayStore
	signer *storetest.Signer
	cli    *mautrix.Client
	cr     matrix.Crypto
	runner *couriers.Runner
	stop   context.CancelFunc
	done   chan struct{}
	undec  sync.Map // reason → count
}

func (r *relayEnv) start() {
	r.t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cr, err := e2ee.Open(ctx, e2ee.Options{Client: r.cli, Store: r.st, Logger: log})
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
	in := &matrix.Inbox{Store: r.st, Ingest: ingest.New(r.st, ingest.Options{}), Client: r.cli, Crypto: cr, Logger: log,
		OnUndecryptable: func(reason string) {
			v, _ := r.undec.LoadOrStore(reason, new(int))
			*(v.(*int))++
		}}
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

// seen is what a member reads of the relay's events in a room, each
// decrypted with the member's own keys.
type seen struct {
	plaintext int      // events of the relay that were not m.room.encrypted
	undecr    int      // m.room.encrypted events of the relay the member cannot decrypt (yet)
	records   []string // event ids of the record events, oldest first
	notices   []string // event ids carried by the notices
	replies   map[id.EventID][]matrix.Outcome
	undecNote map[id.EventID]string // "could not read" notices, by the event they answer
	trail     []string              // kind, event id and Matrix event id of each part, for failures
}

func (m *member) read(t *testing.T, room id.RoomID, relay id.UserID, pub []byte) seen {
	t.Helper()
	s := seen{replies: map[id.EventID][]matrix.Outcome{}, undecNote: map[id.EventID]string{}}
	var evs []*event.Event
	from := ""
	for {
		resp, err := m.cli.Messages(ctx, room, from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			t.Logf("messages: %v", err)
			return seen{undecr: -1}
		}
		evs = append(evs, resp.Chunk...)
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	slices.Reverse(evs)
	for _, ev := range evs {
		if ev.Sender != relay || ev.StateKey != nil {
			continue
		}
		if ev.Type != event.EventEncrypted {
			s.plaintext++
			continue
		}
		ev.RoomID = room
		if err := ev.Content.ParseRaw(ev.Type); err != nil {
			s.undecr++
			continue
		}
		dec, err := m.mach.DecryptMegolmEvent(ctx, ev)
		if err != nil {
			s.undecr++
			continue
		}
		raw := json.RawMessage(dec.Content.VeryRaw)
		var kind string
		switch {
		case dec.Type.Type == matrix.EventTypeRecord:
			kind = "record"
		case dec.Type == event.EventMessage:
			var n map[string]json.RawMessage
			_ = json.Unmarshal(raw, &n)
			switch {
			case n[matrix.KeyRecord] != nil:
				kind, raw = "notice", n[matrix.KeyRecord]
			case n[matrix.KeyOutcome] != nil:
				var o matrix.Outcome
				_ = json.Unmarshal(n[matrix.KeyOutcome], &o)
				var rel struct {
					R struct {
						I struct {
							E id.EventID `json:"event_id"`
						} `json:"m.in_reply_to"`
					} `json:"m.relates_to"`
				}
				_ = json.Unmarshal(dec.Content.VeryRaw, &rel)
				s.replies[rel.R.I.E] = append(s.replies[rel.R.I.E], o)
				continue
			case n[matrix.KeyUndecryptable] != nil:
				var rel struct {
					R struct {
						I struct {
							E id.EventID `json:"event_id"`
						} `json:"m.in_reply_to"`
					} `json:"m.relates_to"`
				}
				_ = json.Unmarshal(dec.Content.VeryRaw, &rel)
				var reason string
				_ = json.Unmarshal(n[matrix.KeyUndecryptable], &reason)
				s.undecNote[rel.R.I.E] = reason
				continue
			}
		}
		if kind == "" {
			continue
		}
		var c struct {
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("record content: %v", err)
		}
		pe, err := correspondence.ParseEvent(c.Event)
		if err != nil {
			t.Fatalf("record event: %v", err)
		}
		if err := pe.Verify(pub); err != nil {
			t.Fatalf("record event does not verify: %v", err)
		}
		if kind == "record" {
			s.records = append(s.records, pe.ID)
		} else {
			s.notices = append(s.notices, pe.ID)
		}
		s.trail = append(s.trail, kind+" "+pe.ID[7:13]+" "+ev.ID.String()[:8])
	}
	return s
}

// waitRoom waits until the member decrypts exactly ids as record events
// and as notices, in order, and the relay sent no plaintext event.
func (m *member) waitRoom(t *testing.T, r *relayEnv, room id.RoomID, ids []string) seen {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	want := strings.Join(ids, ",")
	for {
		s := m.read(t, room, r.cli.UserID, r.signer.Pub)
		if s.plaintext != 0 {
			t.Fatalf("the relay sent %d plaintext events into the encrypted room", s.plaintext)
		}
		if s.undecr == 0 && strings.Join(s.records, ",") == want && strings.Join(s.notices, ",") == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member decrypts %d records, %d notices (%d undecryptable), want exactly these %d once each, in order: %v",
				len(s.records), len(s.notices), s.undecr, len(ids), s.trail)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// newRelay starts Dendrite, the relay's store (engine: "sqlite" or
// "postgres") and its bot user; the relay is not started.
func newRelay(t *testing.T, engine string) *relayEnv {
	t.Helper()
	hs := dendritetest.Start(t, dendritetest.Options{})
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
	if r.cli, err = matrix.NewClient(hs.URL, bot.UserID, bot.AccessToken); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEncryptedRoomBotDendriteSQLite: bot mode with the crypto store in
// the relay's SQLite database.
func TestEncryptedRoomBotDendriteSQLite(t *testing.T) { testEncryptedRoomBot(t, "sqlite") }

// TestEncryptedRoomBotDendritePostgres: the same on PostgreSQL.
func TestEncryptedRoomBotDendritePostgres(t *testing.T) { testEncryptedRoomBot(t, "postgres") }

// testEncryptedRoomBot: a member creates a private room the way Element
// does (m.room.encryption megolm in its initial state) and invites the
// relay's bot, whose /sync joins it; every record reaches the member as
// m.room.encrypted that decrypts to the record event and the notice, in
// receipt order, exactly once, and the relay sends no plaintext; an
// encrypted submission is appended and answered with exactly one
// encrypted reply naming its event id; after a restart (a new olm
// machine on the same store) records still arrive exactly once and
// decryptable.
func testEncryptedRoomBot(t *testing.T, engine string) {
	if testing.Short() {
		t.Skip("runs Dendrite; skipped with -short")
	}
	r := newRelay(t, engine)
	r.start()
	alice := newMember(t, r.hs, "alice")
	resp, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "encrypted project room",
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
	alice.waitRoom(t, r, room, ids)

	// An encrypted submission: alice's client encrypts it (its state
	// store knows the room is encrypted and the relay is joined).
	waitFor(t, 30*time.Second, "alice's client saw the relay join", func() bool {
		return alice.cli.StateStore.IsInRoom(ctx, room, r.cli.UserID)
	})
	_, raw := r.signer.Event(t, storetest.Spec{Summary: "submitted encrypted"})
	sub, err := alice.send(room, event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType},
		json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	var s seen
	waitFor(t, 60*time.Second, "one encrypted reply to the submission", func() bool {
		s = alice.read(t, room, r.cli.UserID, r.signer.Pub)
		return len(s.replies[sub.EventID]) > 0
	})
	time.Sleep(time.Second) // a second reply would come right after the first
	s = alice.read(t, room, r.cli.UserID, r.signer.Pub)
	if got := s.replies[sub.EventID]; len(got) != 1 || !got[0].OK || got[0].EventID == "" {
		t.Fatalf("replies to the submission: %+v, want exactly one accepting it", got)
	}
	ids = append(ids, s.replies[sub.EventID][0].EventID)
	if head, _, _ := r.st.Head(ctx, r.signer.ProjectID); head != int64(len(ids)) {
		t.Fatalf("head %d, want %d", head, len(ids))
	}
	alice.waitRoom(t, r, room, ids) // the submission's record too, once

	// Restart: a new olm machine on the same store; records while down.
	r.halt()
	ids = append(ids, r.appendN(3, "while down")...)
	r.start()
	ids = append(ids, r.appendN(2, "after restart")...)
	s = alice.waitRoom(t, r, room, ids)
	if len(s.replies[sub.EventID]) != 1 {
		t.Fatalf("%d replies to the submission after the restart, want 1", len(s.replies[sub.EventID]))
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

// encryptedRoom: alice creates a room the way Element does and invites
// the relay's bot, which joins (with r's /sync, or by hand when r is not
// running); alice's client waits until it sees the bot joined.
func encryptedRoom(t *testing.T, r *relayEnv, alice *member, joinByHand bool) id.RoomID {
	t.Helper()
	resp, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "encrypted project room",
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
		return alice.cli.StateStore.IsInRoom(ctx, room, r.cli.UserID)
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
// alice's client answers the key request, it is decrypted, appended and
// answered exactly once.
func TestUndecryptableSubmissionDendrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Dendrite; skipped with -short")
	}
	r := newRelay(t, "sqlite")
	alice := newMember(t, r.hs, "alice")
	room := encryptedRoom(t, r, alice, true)
	b := &matrix.Binder{Store: r.st, Client: r.cli, CanEncrypt: true}
	if _, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	// Alice's client answers no key request until told to (as Element
	// answers only devices it shared the session with).
	var allow sync.Mutex
	allowed := false
	mach := alice.mach
	deflt := mach.AllowKeyShare
	mach.AllowKeyShare = func(ctx context.Context, d *id.Device, info event.RequestedKeyInfo) *crypto.KeyShareRejection {
		allow.Lock()
		ok := allowed
		allow.Unlock()
		if ok && d.UserID == r.cli.UserID {
			return nil
		}
		return deflt(ctx, d, info)
	}
	_, raw := r.signer.Event(t, storetest.Spec{Summary: "encrypted before the relay had a device"})
	sub, err := alice.send(room, event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType},
		json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	r.start()
	var s seen
	waitFor(t, 60*time.Second, "the notice that the submission could not be read", func() bool {
		s = alice.read(t, room, r.cli.UserID, r.signer.Pub)
		return s.undecNote[sub.EventID] != ""
	})
	if got := s.undecNote[sub.EventID]; got != matrix.ReasonNoSession {
		t.Fatalf("notice reason %q, want %q", got, matrix.ReasonNoSession)
	}
	if r.count(matrix.ReasonNoSession) == 0 {
		t.Fatal("the undecryptable submission was not counted")
	}
	q, err := r.st.MatrixSubmission(ctx, sub.EventID.String())
	if err != nil {
		t.Fatal(err)
	}
	if q.Final != "" || !strings.Contains(q.LastError, matrix.ReasonNoSession) {
		t.Fatalf("stored submission: final %q, last_error %q; want pending with reason %s", q.Final, q.LastError, matrix.ReasonNoSession)
	}
	if head, _, _ := r.st.Head(ctx, r.signer.ProjectID); head != 0 {
		t.Fatalf("head %d before the key arrived", head)
	}

	allow.Lock()
	allowed = true
	allow.Unlock()
	waitFor(t, 90*time.Second, "the submission decrypted and answered", func() bool {
		s = alice.read(t, room, r.cli.UserID, r.signer.Pub)
		return len(s.replies[sub.EventID]) > 0
	})
	time.Sleep(time.Second)
	s = alice.read(t, room, r.cli.UserID, r.signer.Pub)
	if got := s.replies[sub.EventID]; len(got) != 1 || !got[0].OK {
		t.Fatalf("replies %+v, want exactly one accepting it", got)
	}
	if s.plaintext != 0 {
		t.Fatalf("%d plaintext events from the relay", s.plaintext)
	}
	alice.waitRoom(t, r, room, []string{s.replies[sub.EventID][0].EventID})
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
	alice := newMember(t, r.hs, "alice")
	room := encryptedRoom(t, r, alice, false)
	b := &matrix.Binder{Store: r.st, Client: r.cli, CanEncrypt: true}
	if _, err := b.Bind(ctx, r.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	_, raw := r.signer.Event(t, storetest.Spec{Summary: "the genuine one"})
	content := json.RawMessage(`{"event":` + string(raw) + `}`)
	submit := event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType}
	enc, err := alice.encrypt(room, submit, content)
	if err != nil {
		t.Fatal(err)
	}
	genuine, err := alice.cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	var s seen
	waitFor(t, 60*time.Second, "the genuine submission answered", func() bool {
		s = alice.read(t, room, r.cli.UserID, r.signer.Pub)
		return len(s.replies[genuine.EventID]) > 0
	})
	// The same ciphertext (session, message index) as a new event.
	replay, err := alice.cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	malformed, err := alice.cli.SendMessageEvent(ctx, room, event.EventEncrypted, json.RawMessage(
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
	s = alice.read(t, room, r.cli.UserID, r.signer.Pub)
	if len(s.replies[replay.EventID]) != 0 || len(s.replies[malformed.EventID]) != 0 || len(s.replies[genuine.EventID]) != 1 {
		t.Fatalf("replies: genuine %d, replay %d, malformed %d; want 1, 0, 0", len(s.replies[genuine.EventID]), len(s.replies[replay.EventID]), len(s.replies[malformed.EventID]))
	}
	if head, _, _ := r.st.Head(ctx, r.signer.ProjectID); head != 1 {
		t.Fatalf("head %d, want 1 (only the genuine submission)", head)
	}
	// Still working: a record reaches alice.
	ids := []string{s.replies[genuine.EventID][0].EventID}
	ids = append(ids, r.appendN(1, "after the bad input")...)
	alice.waitRoom(t, r, room, ids)
}
