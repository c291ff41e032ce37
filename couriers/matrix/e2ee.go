package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// End-to-end encrypted rooms (issue 31). The courier and the inbox ask,
// per room, whether it carries m.room.encryption state; in an encrypted
// room every part, notice and reply they send is a megolm
// m.room.encrypted event made by Crypto, and every m.room.encrypted event
// they read (submissions, and their own past events in the history
// scans) is decrypted by it. Crypto is package couriers/matrix/e2ee,
// built only with the goolm tag (mautrix's pure-Go olm): a build without
// it has no Crypto, and then an encrypted room is refused loudly — never
// sent plaintext.

// ErrEncryptionUnavailable: the room is end-to-end encrypted and this
// process has no Matrix encryption (built without -tags goolm, or its
// device failed to start). Nothing is sent to such a room.
var ErrEncryptionUnavailable = errors.New("the room is end-to-end encrypted and this relay has no Matrix encryption " +
	"(build acrelay with -tags goolm): nothing is sent to it, never plaintext")

// ErrUndecryptable wraps a failure to decrypt an m.room.encrypted event.
var ErrUndecryptable = errors.New("undecryptable")

// Crypto is the relay device's end-to-end encryption (package
// couriers/matrix/e2ee). Its methods are safe for concurrent use.
type Crypto interface {
	// Encrypt encrypts content (of event type typ) for room with the
	// room's outbound megolm session, sharing the room key first with the
	// devices of the room's joined (and invited) members that lack it;
	// the session rotates as the room's m.room.encryption
	// rotation_period_ms / rotation_period_msgs say.
	Encrypt(ctx context.Context, room id.RoomID, typ event.Type, content any) (*event.EncryptedEventContent, error)
	// Decrypt decrypts an m.room.encrypted event (megolm). Errors wrap
	// ErrUndecryptable and name the reason (no session, replayed index,
	// malformed content).
	Decrypt(ctx context.Context, ev *event.Event) (*event.Event, error)
	// ProcessSync hands a /sync response of the relay's device to the olm
	// machine: to-device events (room keys, key requests), device-list
	// changes, one-time-key counts; since is the request's since token.
	ProcessSync(ctx context.Context, resp *mautrix.RespSync, since string)
	// HandleState tells the machine a room state event it saw
	// (m.room.member: invalidates the outbound session when a member
	// leaves; m.room.encryption: the room's settings).
	HandleState(ctx context.Context, ev *event.Event)
	// RequestKey asks the sender's devices (and the relay's own) for the
	// room key of an event that could not be decrypted.
	RequestKey(ctx context.Context, ev *event.Event)
	// Status says what the relay's device is (doctor, bindings).
	Status(ctx context.Context) CryptoStatus
}

// CryptoStatus is the relay device's state.
type CryptoStatus struct {
	DeviceID    string `json:"device_id"`
	Ready       bool   `json:"ready"`
	CrossSigned bool   `json:"cross_signed"`
	// Detail is one line for an operator (never a key).
	Detail string `json:"detail,omitempty"`
}

// EventTypeEncrypted is m.room.encrypted.
var EventTypeEncrypted = event.EventEncrypted

// rooms caches, per room, whether it is encrypted: true is kept for good
// (encryption cannot be turned off in a room); false is asked again after
// encCheckEvery, so a room that turns encryption on is seen before long
// (and at once where the sync's state says so).
type rooms struct {
	mu sync.Mutex
	m  map[id.RoomID]encEntry
}

type encEntry struct {
	encrypted bool
	at        time.Time
}

const encCheckEvery = 10 * time.Second

func (r *rooms) set(room id.RoomID, encrypted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[id.RoomID]encEntry{}
	}
	if r.m[room].encrypted {
		return
	}
	r.m[room] = encEntry{encrypted: encrypted, at: time.Now()}
}

// encrypted reports whether room is encrypted, asking the homeserver
// when the cache does not know.
func (r *rooms) encrypted(ctx context.Context, cli *mautrix.Client, room id.RoomID) (bool, error) {
	r.mu.Lock()
	e, ok := r.m[room]
	r.mu.Unlock()
	if ok && (e.encrypted || time.Since(e.at) < encCheckEvery) {
		return e.encrypted, nil
	}
	enc, err := RoomEncrypted(ctx, cli, room)
	if err != nil {
		return false, err
	}
	r.set(room, enc)
	return enc, nil
}

// RoomEncrypted asks the homeserver for room's m.room.encryption state
// event: true when it exists (any algorithm), false on M_NOT_FOUND/404.
// Errors: the homeserver's other answers (the client's user not in the
// room: 403).
func RoomEncrypted(ctx context.Context, cli *mautrix.Client, room id.RoomID) (bool, error) {
	var c json.RawMessage
	err := cli.StateEvent(ctx, room, event.StateEncryption, "", &c)
	if err == nil {
		var enc event.EncryptionEventContent
		return json.Unmarshal(c, &enc) == nil && enc.Algorithm != "", nil
	}
	var he mautrix.HTTPError
	if errors.As(err, &he) && (he.RespError != nil && he.RespError.ErrCode == mautrix.MNotFound.ErrCode ||
		he.Response != nil && he.Response.StatusCode == 404) {
		return false, nil
	}
	return false, fmt.Errorf("read the room's m.room.encryption: %w", err)
}

// sendTo sends one event to room: encrypted with cr when the room is
// encrypted, refused with ErrEncryptionUnavailable when it is and cr is
// nil, as is otherwise (byte for byte what an unencrypted room always
// got). The transaction id is the same for every attempt: a re-encrypted
// retry is still de-duplicated by the homeserver.
func sendTo(ctx context.Context, cli *mautrix.Client, cr Crypto, encrypted bool, room id.RoomID, typ event.Type, content any, txn string) (*mautrix.RespSendEvent, error) {
	if !encrypted {
		return cli.SendMessageEvent(ctx, room, typ, content, mautrix.ReqSendEvent{TransactionID: txn})
	}
	if cr == nil {
		return nil, ErrEncryptionUnavailable
	}
	enc, err := cr.Encrypt(ctx, room, typ, content)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	return cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{TransactionID: txn, DontEncrypt: true})
}

// open returns ev decrypted when it is an m.room.encrypted event (ok
// false when it cannot be, or cr is nil), else ev itself.
func open(ctx context.Context, cr Crypto, ev *event.Event) (*event.Event, error) {
	if ev.Type != event.EventEncrypted {
		return ev, nil
	}
	if cr == nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecryptable, ErrEncryptionUnavailable)
	}
	if err := ev.Content.ParseRaw(ev.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
		return nil, fmt.Errorf("%w: malformed m.room.encrypted content", ErrUndecryptable)
	}
	dec, err := cr.Decrypt(ctx, ev)
	if err != nil {
		return nil, err
	}
	return dec, nil
}

// logOnce logs msg at ERROR once per key in this process.
type logOnce struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *logOnce) error(log *slog.Logger, key, msg string, args ...any) {
	if l.first(key) {
		log.Error(msg, args...)
	}
}

// warn logs msg at WARN once per key in this process.
func (l *logOnce) warn(log *slog.Logger, key, msg string, args ...any) {
	if l.first(key) {
		log.Warn(msg, args...)
	}
}

func (l *logOnce) first(key string) bool {
	l.mu.Lock()
	first := !l.seen[key]
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if len(l.seen) >= logOnceKeys {
		clear(l.seen) // bounded memory: a key may be logged once more
	}
	l.seen[key] = true
	l.mu.Unlock()
	return first
}

// logOnceKeys bounds a logOnce's memory (keys are event ids, bindings,
// rooms).
const logOnceKeys = 10000
