package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/store"
)

// keyEncrypted is the key under which a queued submission keeps an
// m.room.encrypted event it could not decrypt yet: the whole event as the
// homeserver gave it (store.MatrixSubmission.Event is
// {"io.github.acrelay.matrix_encrypted": <event>}). A correspondence event
// never has this member, and ingest would refuse it.
const keyEncrypted = "io.github.acrelay.matrix_encrypted"

func encryptedSubmission(raw []byte) []byte {
	b, _ := json.Marshal(map[string]json.RawMessage{keyEncrypted: raw})
	return b
}

// queuedEncrypted returns the m.room.encrypted event a queued submission
// keeps, or nil when it holds a plain submission.
func queuedEncrypted(s store.MatrixSubmission) *event.Event {
	if !strings.Contains(string(s.Event), keyEncrypted) {
		return nil
	}
	var w map[string]json.RawMessage
	if json.Unmarshal(s.Event, &w) != nil || len(w) != 1 || w[keyEncrypted] == nil {
		return nil
	}
	var ev event.Event
	if json.Unmarshal(w[keyEncrypted], &ev) != nil {
		return nil
	}
	if ev.RoomID == "" {
		ev.RoomID = id.RoomID(s.RoomID)
	}
	return &ev
}

// Reasons an m.room.encrypted event is not read (metric labels, stored
// last_error prefixes).
const (
	ReasonNoSession    = "no_session"     // the room key has not reached the relay's device
	ReasonMalformed    = "malformed"      // not a megolm m.room.encrypted content
	ReasonReplay       = "replayed_index" // a megolm message index seen with another event
	ReasonNoEncryption = "no_encryption"  // this relay was built without encryption
	ReasonOther        = "decrypt_failed" // any other decryption failure
)

// UndecryptableReason classifies a decryption error.
func UndecryptableReason(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, ErrEncryptionUnavailable):
		return ReasonNoEncryption
	case strings.Contains(msg, "malformed"), strings.Contains(msg, "unsupported algorithm"), strings.Contains(msg, "unknown algorithm"):
		return ReasonMalformed
	case strings.Contains(msg, "no session"), strings.Contains(msg, "failed to find"), strings.Contains(msg, "withheld"):
		return ReasonNoSession
	case strings.Contains(msg, "duplicate message index"), strings.Contains(msg, "replay"):
		return ReasonReplay
	}
	return ReasonOther
}

// undecryptable logs (once per event id in this process), counts, and asks
// for the key of an event it could not decrypt.
func (in *Inbox) undecryptable(ev *event.Event, err error) {
	reason := UndecryptableReason(err)
	if in.OnUndecryptable != nil {
		in.OnUndecryptable(reason)
	}
	level := "cannot decrypt a room event; it is kept and retried when its key arrives"
	switch reason {
	case ReasonMalformed, ReasonReplay:
		level = "refusing an m.room.encrypted room event: it is stored with its reason and never appended"
	case ReasonNoEncryption:
		level = "cannot decrypt a room event: this relay has no end-to-end encryption; it is stored with its reason"
	}
	if reason == ReasonNoEncryption {
		in.errs.error(in.logger(), "noenc:"+ev.RoomID.String(), "an end-to-end encrypted room sends submissions and this relay cannot decrypt them (build acrelay with -tags goolm)",
			"room_id", ev.RoomID)
	}
	in.errs.warn(in.logger(), "undecryptable:"+ev.ID.String(), level, "matrix_event_id", ev.ID, "room_id", ev.RoomID,
		"sender", ev.Sender, "reason", reason, "err", err)
}

// openQueued decrypts a queued undecryptable event: the submission's
// event on success; errNotSubmission when it decrypts to something else
// (room chat); an error wrapping ErrUndecryptable while its key is
// missing, after a key request and the notice that says so (sent once).
func (in *Inbox) openQueued(ctx context.Context, s store.MatrixSubmission, ev *event.Event) ([]byte, error) {
	dec, err := open(ctx, in.Crypto, ev)
	if err == nil {
		if dec.Type.Type != EventTypeSubmit {
			return nil, errNotSubmission
		}
		var c struct {
			Event json.RawMessage `json:"event"`
		}
		if json.Unmarshal(dec.Content.VeryRaw, &c) == nil && len(c.Event) > 0 {
			return c.Event, nil
		}
		return []byte("null"), nil
	}
	reason := UndecryptableReason(err)
	switch {
	case in.DeferDecrypt && s.Attempts <= 1:
		in.undecryptable(ev, err) // first read now: counted, logged once, key asked below
	case s.Attempts > 1 && in.OnUndecryptable != nil:
		in.OnUndecryptable(reason) // each retry; the first was counted when it was first read
	}
	if reason == ReasonMalformed || reason == ReasonReplay {
		return nil, fmt.Errorf("%w: %s", errBadEncrypted, reason)
	}
	if reason == ReasonNoEncryption || s.Attempts >= undecryptableAttempts {
		return nil, fmt.Errorf("%w: %s", errUnreadable, reason)
	}
	if in.Crypto != nil && reason == ReasonNoSession {
		in.Crypto.RequestKey(ctx, ev)
	}
	room := id.RoomID(s.RoomID)
	enc, eerr := in.rooms.encrypted(ctx, in.Client, room)
	if eerr == nil && (!enc || in.Crypto != nil) {
		body := "could not read " + s.MatrixEventID + ": it is encrypted and the relay's device has not received its key (" + reason +
			"); it is kept and read once the key arrives — share the room key with the relay's device"
		if reason == ReasonNoEncryption {
			body = "could not read " + s.MatrixEventID + ": this relay has no end-to-end encryption"
		}
		content := map[string]any{"msgtype": "m.notice", "body": body,
			"m.relates_to":   map[string]any{"m.in_reply_to": map[string]any{"event_id": s.MatrixEventID}},
			KeyUndecryptable: reason}
		if _, serr := sendTo(ctx, in.Client, in.Crypto, enc, room, event.EventMessage, content, TxnID(s.RoomID, s.MatrixEventID, "undecryptable")); serr != nil {
			in.logger().Warn("notice of an undecryptable submission not sent", "matrix_event_id", s.MatrixEventID, "err", serr)
		}
	}
	return nil, fmt.Errorf("%s: %w", reason, err)
}

// KeyUndecryptable is the content key of the notice that a submission
// could not be decrypted (its value: the reason).
const KeyUndecryptable = "io.github.acrelay.correspondence.undecryptable"

var (
	errNotSubmission = errors.New("decrypted: not a submission")
	errBadEncrypted  = errors.New("refused m.room.encrypted event")
	// errUnreadable: this relay cannot decrypt it (no encryption), or its
	// key never came in undecryptableAttempts attempts (about an hour).
	errUnreadable = errors.New("m.room.encrypted event never read")
)

// undecryptableAttempts bounds the attempts to decrypt a queued event
// (every 30 s at most: about an hour) before it is given up, its reason
// stored.
const undecryptableAttempts = 120

// keyWaits are the queued m.room.encrypted events waiting for their room
// key, by megolm session, and the sessions whose key came lately; both
// only in this process (the one driving the relay's device): after a
// restart the events are found again at their next attempt.
type keyWaits struct {
	mu      sync.Mutex
	waiting map[id.SessionID][]string  // session → Matrix event ids
	came    map[id.SessionID]time.Time // session → when its key came
}

// keyWaitMax bounds the events keyWaits remembers (beyond it they wait
// for KeyRetry alone); keyCameFor is how long a key's arrival is
// remembered for an attempt under way when it came.
const (
	keyWaitMax = 10000
	keyCameFor = 5 * time.Minute
)

// sessionOf is the megolm session of a queued m.room.encrypted event
// ("" for a plain submission).
func sessionOf(s store.MatrixSubmission) id.SessionID {
	ev := queuedEncrypted(s)
	if ev == nil {
		return ""
	}
	var c struct {
		SessionID id.SessionID `json:"session_id"`
	}
	_ = json.Unmarshal(ev.Content.VeryRaw, &c)
	return c.SessionID
}

// awaitKey remembers that s, tried at began and not decrypted, waits for
// its session's key; when the key came meanwhile, s is made due at once.
func (in *Inbox) awaitKey(ctx context.Context, s store.MatrixSubmission, began time.Time) {
	sid := sessionOf(s)
	if sid == "" {
		return
	}
	k := &in.keys
	k.mu.Lock()
	came, ok := k.came[sid]
	arrived := ok && !came.Before(began)
	if !arrived {
		if k.waiting == nil || len(k.waiting) >= keyWaitMax {
			k.waiting = map[id.SessionID][]string{}
		}
		if ids := k.waiting[sid]; len(ids) < keyWaitMax && !slices.Contains(ids, s.MatrixEventID) {
			k.waiting[sid] = append(ids, s.MatrixEventID)
		}
	}
	k.mu.Unlock()
	if arrived {
		in.retryNow(ctx, []string{s.MatrixEventID})
	}
}

// KeyArrived is told by the relay device's olm machine that it stored the
// room key of megolm session in room (mautrix's OlmMachine.SessionReceived:
// a room key, a forwarded one answering the relay's key request, an
// import): the queued events of that session are made due at once and Run
// is woken, instead of waiting for KeyRetry. Safe for concurrent use; it
// does not block on the homeserver.
func (in *Inbox) KeyArrived(ctx context.Context, room id.RoomID, session id.SessionID) {
	in.init()
	now := time.Now()
	k := &in.keys
	k.mu.Lock()
	if k.came == nil {
		k.came = map[id.SessionID]time.Time{}
	}
	for sid, at := range k.came {
		if now.Sub(at) > keyCameFor {
			delete(k.came, sid)
		}
	}
	if len(k.came) < keyWaitMax {
		k.came[session] = now
	}
	ids := k.waiting[session]
	delete(k.waiting, session)
	k.mu.Unlock()
	if len(ids) > 0 {
		in.logger().Info("room key arrived: decrypting the submissions that waited for it", "room_id", room, "session_id", session, "count", len(ids))
		in.retryNow(ctx, ids)
	}
}

// retryNow makes the pending submissions ids due now and wakes Run.
func (in *Inbox) retryNow(ctx context.Context, ids []string) {
	for _, mid := range ids {
		if err := in.Store.RetryMatrixSubmission(ctx, mid, 0, "room key arrived; decrypting again"); err != nil && !errors.Is(err, store.ErrNotFound) {
			in.logger().Warn("matrix submission not made due on its room key's arrival (it is retried on its timer)", "matrix_event_id", mid, "err", err)
		}
	}
	in.poke()
}
