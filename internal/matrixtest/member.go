//go:build goolm

// Package matrixtest is a Matrix room member for tests of end-to-end
// encrypted rooms (issue 31): a user of a real homeserver (Dendrite or
// Synapse, internal/hstest) whose client does
// encryption the way Element does (mautrix's goolm OlmMachine), and what
// it reads of the relay's events in a room, each decrypted with its own
// keys. Built only with the goolm tag.
package matrixtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/sqlstatestore"
	_ "modernc.org/sqlite" // the member's own crypto store

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/internal/hstest"
)

var ctx = context.Background()

// Member is a room member's client doing encryption as Element does: a
// mautrix goolm OlmMachine on its own SQLite file (modernc, through
// dbutil), fed by its own /sync loop (room keys, device lists, member
// changes). (mautrix's cryptohelper is not used: it links a cgo SQLite
// driver.)
type Member struct {
	Cli  *mautrix.Client
	Mach *crypto.OlmMachine
}

func NewMember(t *testing.T, hs hstest.Homeserver, localpart string) *Member {
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
	return &Member{Cli: cli, Mach: mach}
}

// Encrypt encrypts content for room, sharing the room key with the
// members' devices first when needed (as Element does before sending).
func (m *Member) Encrypt(room id.RoomID, typ event.Type, content any) (*event.EncryptedEventContent, error) {
	enc, err := m.Mach.EncryptMegolmEvent(ctx, room, typ, content)
	if crypto.IsShareError(err) {
		users, err := m.Cli.StateStore.(*sqlstatestore.SQLStateStore).GetRoomJoinedOrInvitedMembers(ctx, room)
		if err != nil {
			return nil, err
		}
		if err := m.Mach.ShareGroupSession(ctx, room, users); err != nil {
			return nil, err
		}
		return m.Mach.EncryptMegolmEvent(ctx, room, typ, content)
	}
	return enc, err
}

// Send sends content to room encrypted.
func (m *Member) Send(room id.RoomID, typ event.Type, content any) (*mautrix.RespSendEvent, error) {
	enc, err := m.Encrypt(room, typ, content)
	if err != nil {
		return nil, err
	}
	return m.Cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
}

// Seen is what a member reads of the relay's events in a room, each
// decrypted with the member's own keys.
type Seen struct {
	Plaintext int      // events of the relay that were not m.room.encrypted
	Undecr    int      // m.room.encrypted events of the relay the member cannot decrypt (yet)
	Records   []string // event ids of the record events, oldest first
	Notices   []string // event ids carried by the notices
	Replies   map[id.EventID][]matrix.Outcome
	UndecNote map[id.EventID]string // "could not read" notices, by the event they answer
	// References are the event ids of the records that came as
	// references (too large for the room once encrypted).
	References []string
	Trail      []string // kind, event id and Matrix event id of each part, for failures
}

func (m *Member) Read(t *testing.T, room id.RoomID, relay id.UserID, pub []byte) Seen {
	t.Helper()
	s := Seen{Replies: map[id.EventID][]matrix.Outcome{}, UndecNote: map[id.EventID]string{}}
	var evs []*event.Event
	from := ""
	for {
		resp, err := m.Cli.Messages(ctx, room, from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			t.Logf("messages: %v", err)
			return Seen{Undecr: -1}
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
			s.Plaintext++
			continue
		}
		ev.RoomID = room
		if err := ev.Content.ParseRaw(ev.Type); err != nil {
			s.Undecr++
			continue
		}
		dec, err := m.Mach.DecryptMegolmEvent(ctx, ev)
		if err != nil {
			s.Undecr++
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
				s.Replies[rel.R.I.E] = append(s.Replies[rel.R.I.E], o)
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
				s.UndecNote[rel.R.I.E] = reason
				continue
			}
		}
		if kind == "" {
			continue
		}
		var c struct {
			Event     json.RawMessage   `json:"event"`
			Reference *matrix.Reference `json:"reference"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("record content: %v", err)
		}
		var eid string
		if c.Reference != nil && c.Event == nil {
			// A record too large for the room: its id and where to read it.
			eid = c.Reference.EventID
			if kind == "record" {
				s.References = append(s.References, eid)
			}
		} else {
			pe, err := correspondence.ParseEvent(c.Event)
			if err != nil {
				t.Fatalf("record event: %v", err)
			}
			if err := pe.Verify(pub); err != nil {
				t.Fatalf("record event does not verify: %v", err)
			}
			eid = pe.ID
		}
		if kind == "record" {
			s.Records = append(s.Records, eid)
		} else {
			s.Notices = append(s.Notices, eid)
		}
		s.Trail = append(s.Trail, kind+" "+eid[7:13]+" "+ev.ID.String()[:8])
	}
	return s
}

// WaitRoom waits (up to a minute) until the member decrypts exactly ids
// as record events and as notices, in order, from relay (whose records
// verify under pub), failing the test at once when the relay sent a
// plaintext event into the room.
func (m *Member) WaitRoom(t *testing.T, room id.RoomID, relay id.UserID, pub []byte, ids []string) Seen {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	want := strings.Join(ids, ",")
	for {
		s := m.Read(t, room, relay, pub)
		if s.Plaintext != 0 {
			t.Fatalf("the relay sent %d plaintext events into the encrypted room", s.Plaintext)
		}
		if s.Undecr == 0 && strings.Join(s.Records, ",") == want && strings.Join(s.Notices, ",") == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member decrypts %d records, %d notices (%d undecryptable), want exactly these %d once each, in order: %v",
				len(s.Records), len(s.Notices), s.Undecr, len(ids), s.Trail)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
