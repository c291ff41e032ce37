package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/backoff"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// InboxStore is what the inbound path reads and writes.
type InboxStore interface {
	MatrixRoomBindings(ctx context.Context, roomID string) ([]store.MatrixBinding, error)
	EnqueueMatrixSubmissions(ctx context.Context, subs []store.MatrixSubmission, syncKey, since string) error
	MatrixSyncToken(ctx context.Context, syncKey string) (string, error)
	ClaimMatrixSubmissions(ctx context.Context, limit int, hold time.Duration) ([]store.MatrixSubmission, error)
	RetryMatrixSubmission(ctx context.Context, matrixEventID string, wait time.Duration, lastError string) error
	GiveUpMatrixSubmission(ctx context.Context, matrixEventID, lastError string) error
	SetMatrixSubmissionOutcome(ctx context.Context, matrixEventID string, outcome []byte) ([]byte, error)
	CompleteMatrixSubmission(ctx context.Context, matrixEventID, replyEventID string) error
}

// Appender is the one append path (ingest.Ingester).
type Appender interface {
	Append(ctx context.Context, projectID string, raw []byte) (ingest.Result, error)
}

// Outcome is a submission's answer, stored before the reply is sent and
// carried in the reply under KeyOutcome: the receipt on success, else the
// status and code POST /v1/correspondence/events gives.
type Outcome struct {
	OK          bool   `json:"ok"`
	EventID     string `json:"event_id,omitempty"`
	ReceivedSeq string `json:"received_seq,omitempty"`
	ReceivedAt  string `json:"received_at,omitempty"`
	Status      int    `json:"status,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Inbox takes room submissions: Accept (pushed application-service
// transactions) or Sync (a bot's /sync long-poll) queue them durably by
// Matrix event id; Run appends each through ingest and replies once.
// Fill Store, Ingest and Client; the rest is optional.
//
// Every submission's retry state (attempts, next attempt, last error) and
// its final outcome are in the store, not in this process: Run claims due
// submissions, so several processes share the work, a restarted one knows
// what failed before, and a room that refuses replies holds back only its
// own submissions, never another room's.
type Inbox struct {
	Store  InboxStore
	Ingest Appender
	Client *mautrix.Client
	Logger *slog.Logger
	// MaxAttempts is how many attempts a submission gets before it is
	// given up (store.MatrixSubmissionGaveUp) while the homeserver refuses
	// its reply (a 4xx other than 429: the relay is not in the room, may
	// not post, the room is gone); default 10 (waits of 1 s doubling: 4
	// to 9 minutes in all). Failures that may pass — a 429, a 5xx, no
	// answer, an unavailable log — never give a submission up: it is
	// retried, at least every 10 minutes, until they pass.
	MaxAttempts int
	// Crypto decrypts submissions sent to end-to-end encrypted rooms and
	// encrypts the replies there (package couriers/matrix/e2ee, goolm
	// builds); nil: an encrypted submission is kept as undecryptable and
	// answered with a notice saying so, never lost.
	Crypto Crypto
	// DeferDecrypt queues every m.room.encrypted event as it came and
	// decrypts it only when answering it (application-service mode: any
	// process takes the homeserver's pushes, only the one driving the
	// relay's device decrypts).
	DeferDecrypt bool
	// OnUndecryptable, when set, is told each time a submission cannot be
	// decrypted (reason: a short, stable phrase) — the relay's metric.
	OnUndecryptable func(reason string)
	// KeyRetry is the backoff between attempts to decrypt a queued
	// m.room.encrypted event whose room key has not come (default 1 s
	// doubling to 30 s, equal jitter). It is the fallback: the key's
	// arrival (KeyArrived, told by the olm machine) makes the event's
	// next attempt due at once.
	KeyRetry backoff.Policy

	rooms   rooms
	errs    logOnce
	once    sync.Once
	wake    chan struct{}
	started time.Time
	keys    keyWaits
}

// Inbox timing: a claim holds a submission for claimHold, longer than one
// answer may take (answerTimeout), so no other claim takes it meanwhile.
const (
	claimBatch      = 16
	claimHold       = 2 * time.Minute
	answerTimeout   = 90 * time.Second
	retryMax        = 10 * time.Minute
	defaultAttempts = 10
	// undecryptableRetryMax bounds the wait between attempts to decrypt
	// a queued m.room.encrypted event (KeyRetry's default).
	undecryptableRetryMax = 30 * time.Second
)

// The inbox's backoffs (internal/backoff, equal jitter): a submission's
// attempts (1 s doubling to retryMax), the bot's /sync after errors (1 s
// doubling to 1 min), and, by default, a queued m.room.encrypted event
// waiting for its room key (KeyRetry).
var (
	retryBackoff    = backoff.Policy{Initial: time.Second, Max: retryMax}
	syncBackoff     = backoff.Policy{Initial: time.Second, Max: time.Minute}
	keyRetryDefault = backoff.Policy{Initial: time.Second, Max: undecryptableRetryMax}
)

func (in *Inbox) init() {
	in.once.Do(func() {
		in.wake = make(chan struct{}, 1)
		in.started = time.Now()
	})
}

func (in *Inbox) logger() *slog.Logger {
	if in.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Logger
}

// submissions picks the submissions out of room events (never the
// courier's own events). An m.room.encrypted event is decrypted first and
// kept when it holds a submission; one that cannot be decrypted is kept
// too, as it came (encryptedSubmission), to be decrypted again when its
// key arrives and answered meanwhile: it may be a submission.
func (in *Inbox) submissions(ctx context.Context, evs []*event.Event, roomID id.RoomID) []store.MatrixSubmission {
	var out []store.MatrixSubmission
	for _, ev := range evs {
		if ev == nil || ev.Sender == in.Client.UserID || ev.ID == "" {
			continue
		}
		room := ev.RoomID
		if room == "" {
			room = roomID
		}
		if ev.Type == event.EventEncrypted && in.DeferDecrypt {
			ev.RoomID = room
			raw, _ := json.Marshal(ev)
			out = append(out, store.MatrixSubmission{MatrixEventID: ev.ID.String(), RoomID: room.String(), Sender: ev.Sender.String(),
				Event: encryptedSubmission(raw)})
			continue
		}
		if ev.Type == event.EventEncrypted {
			ev.RoomID = room
			dec, err := open(ctx, in.Crypto, ev)
			if err != nil {
				in.undecryptable(ev, err)
				raw, _ := json.Marshal(ev)
				out = append(out, store.MatrixSubmission{MatrixEventID: ev.ID.String(), RoomID: room.String(), Sender: ev.Sender.String(),
					Event: encryptedSubmission(raw)})
				continue
			}
			ev = dec
		}
		if ev.Type.Type != EventTypeSubmit {
			continue
		}
		var c struct {
			Event json.RawMessage `json:"event"`
		}
		raw := []byte("null")
		if json.Unmarshal(ev.Content.VeryRaw, &c) == nil && len(c.Event) > 0 {
			raw = c.Event
		}
		out = append(out, store.MatrixSubmission{MatrixEventID: ev.ID.String(), RoomID: room.String(), Sender: ev.Sender.String(), Event: raw})
	}
	return out
}

// Accept queues the submissions among the events of an application-service
// transaction (raw client-format events) and wakes Run. A nil error means
// they are stored: the homeserver may be answered 200.
func (in *Inbox) Accept(ctx context.Context, raws []json.RawMessage) error {
	in.init()
	evs := make([]*event.Event, 0, len(raws))
	for _, r := range raws {
		// Most pushed events are the courier's own record events and
		// notices: read the type and sender first, and decode in full only
		// a submission from someone else.
		var head struct {
			Type   string `json:"type"`
			Sender string `json:"sender"`
		}
		if json.Unmarshal(r, &head) != nil || head.Type != EventTypeSubmit && head.Type != event.EventEncrypted.Type || head.Sender == in.Client.UserID.String() {
			continue
		}
		var ev event.Event
		if json.Unmarshal(r, &ev) != nil {
			continue // not an event we can read: nothing to answer
		}
		evs = append(evs, &ev)
	}
	subs := in.submissions(ctx, evs, "")
	if len(subs) == 0 {
		return nil
	}
	if err := in.Store.EnqueueMatrixSubmissions(ctx, subs, "", ""); err != nil {
		return err
	}
	in.poke()
	return nil
}

func (in *Inbox) poke() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// Sync long-polls /sync as the bot (timeout 30 s), queues the submissions
// of joined rooms together with the next since token (so a restart neither
// loses nor re-reads one), and joins rooms it is invited to. When a room's
// timeline is limited (more submissions since the last sync than the
// filter's 100), it reads the rest back with /messages from the
// timeline's prev_batch to the last since token before storing anything.
// It backs off with jitter on errors (at least what a 429 asks) and
// returns when ctx ends.
func (in *Inbox) Sync(ctx context.Context) error {
	in.init()
	key := "sync:" + in.Client.UserID.String()
	since, err := in.Store.MatrixSyncToken(ctx, key)
	if err != nil {
		return err
	}
	failures := 0
	for ctx.Err() == nil {
		next, err := in.syncOnce(ctx, key, since)
		if err == nil {
			since, failures = next, 0
			continue
		}
		if ctx.Err() != nil {
			break
		}
		failures++
		wait := syncBackoff.Equal(failures)
		if ra := RetryAfter(err); ra > wait {
			wait = ra
		}
		in.logger().Warn("matrix sync failed", "failures", failures, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// syncOnce is one /sync: it stores the submissions it read with the next
// since token, which it returns; on an error nothing is stored and the
// next sync reads the same span again.
func (in *Inbox) syncOnce(ctx context.Context, key, since string) (string, error) {
	resp, err := in.Client.SyncRequest(ctx, 30000, since, SyncFilter(in.Client.UserID), since == "", event.PresenceOffline)
	if err != nil {
		return "", err
	}
	// Room keys and device lists first, so that the timeline's events
	// decrypt.
	if in.Crypto != nil {
		in.Crypto.ProcessSync(ctx, resp, since)
	}
	for room, jr := range resp.Rooms.Join {
		for _, evs := range [][]*event.Event{jr.State.Events, jr.Timeline.Events} {
			for _, ev := range evs {
				if ev == nil || ev.StateKey == nil {
					continue
				}
				ev.RoomID = room
				_ = ev.Content.ParseRaw(ev.Type)
				if ev.Type == event.StateEncryption {
					in.rooms.set(room, true)
				}
				if in.Crypto != nil {
					in.Crypto.HandleState(ctx, ev)
				}
			}
		}
	}
	var subs []store.MatrixSubmission
	for room, jr := range resp.Rooms.Join {
		// Not on the first sync (since ""): it starts at the present.
		if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" && since != "" {
			older, err := in.backfill(ctx, room, jr.Timeline.PrevBatch, since)
			if err != nil {
				return "", fmt.Errorf("read back a limited timeline: %w", err)
			}
			slices.Reverse(older) // oldest first, before the timeline's
			subs = append(subs, older...)
		}
		subs = append(subs, in.submissions(ctx, jr.Timeline.Events, room)...)
	}
	for room := range resp.Rooms.Invite {
		if _, jerr := in.Client.JoinRoomByID(ctx, room); jerr != nil {
			in.logger().Warn("join invited room", "room_id", room, "err", jerr)
		}
	}
	if err := in.Store.EnqueueMatrixSubmissions(ctx, subs, key, resp.NextBatch); err != nil {
		return "", err
	}
	if len(subs) > 0 {
		in.poke()
	}
	return resp.NextBatch, nil
}

// backfillPages bounds one room's read-back after a limited timeline
// (pages of 100 submissions).
const backfillPages = 100

// backfill reads a room's submissions backwards from from (a limited
// timeline's prev_batch) to to (the previous sync's since token), at most
// backfillPages pages; a homeserver that ignores to only makes it read
// further back, which the store's de-duplication by Matrix event id
// absorbs.
func (in *Inbox) backfill(ctx context.Context, room id.RoomID, from, to string) ([]store.MatrixSubmission, error) {
	types := []event.Type{{Type: EventTypeSubmit, Class: event.MessageEventType}, event.EventEncrypted}
	filter := &mautrix.FilterPart{Types: types, NotSenders: []id.UserID{in.Client.UserID}}
	var out []store.MatrixSubmission
	for page := 0; ; page++ {
		if page == backfillPages {
			in.logger().Warn("limited timeline read back only in part", "room_id", room, "submissions", len(out))
			return out, nil
		}
		resp, err := in.Client.Messages(ctx, room, from, to, mautrix.DirectionBackward, filter, 100)
		if err != nil {
			return nil, err
		}
		out = append(out, in.submissions(ctx, resp.Chunk, room)...)
		if resp.End == "" || len(resp.Chunk) == 0 || resp.End == from {
			return out, nil
		}
		from = resp.End
	}
}

// SyncFilter is the inline filter of the bot's (self's) /sync: room timelines
// carry only submissions from others (the homeserver neither reads nor
// serializes the courier's own record events and notices for it), the
// m.room.encrypted events of others (an encrypted room's submissions, and
// its chat, which is decrypted and dropped), and the m.room.encryption
// and m.room.member changes, up to 100 per room and sync; room state only
// m.room.encryption and m.room.member (the room keys' recipients and
// settings); invites, to-device events (room keys, key requests),
// device-list changes and one-time-key counts come regardless.
func SyncFilter(self id.UserID) string {
	f := map[string]any{
		"room": map[string]any{
			"timeline": map[string]any{"types": []string{EventTypeSubmit, event.EventEncrypted.Type, event.StateEncryption.Type, event.StateMember.Type},
				"not_senders": []string{self.String()}, "limit": 100},
			"state":        map[string]any{"types": []string{event.StateEncryption.Type, event.StateMember.Type}},
			"ephemeral":    map[string]any{"types": []string{}},
			"account_data": map[string]any{"types": []string{}},
		},
		"presence":     map[string]any{"types": []string{}},
		"account_data": map[string]any{"types": []string{}},
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// Run answers queued submissions until ctx ends: it claims the due ones
// (store.Matrix.ClaimMatrixSubmissions), appends each through ingest for
// its room's project and answers it with exactly one m.notice reply,
// several at once. A submission that fails is retried with backoff (1 s
// doubling to 10 min, jittered; at least the homeserver's Retry-After or
// retry_after_ms after a 429), and given up after MaxAttempts when the
// homeserver keeps refusing its reply. (Final submissions are deleted
// after a retention by the relay's housekeeping.)
func (in *Inbox) Run(ctx context.Context) error {
	in.init()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		subs, err := in.Store.ClaimMatrixSubmissions(ctx, claimBatch, claimHold)
		if err != nil && ctx.Err() == nil {
			in.logger().Warn("claim matrix submissions", "err", err)
		}
		var wg sync.WaitGroup
		for _, s := range subs {
			wg.Go(func() { in.attempt(ctx, s) })
		}
		wg.Wait()
		if ctx.Err() != nil {
			return nil
		}
		if len(subs) == claimBatch {
			continue // more may be due now
		}
		select {
		case <-ctx.Done():
			return nil
		case <-in.wake:
		case <-tick.C:
		}
	}
}

// attempt answers one claimed submission and stores what became of it.
func (in *Inbox) attempt(ctx context.Context, s store.MatrixSubmission) {
	began := time.Now()
	actx, cancel := context.WithTimeout(ctx, answerTimeout)
	err := in.answer(actx, s)
	cancel()
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		// Stopping: release the claim so the next process takes it at
		// once (it reconciles: this attempt is counted).
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = in.Store.RetryMatrixSubmission(rctx, s.MatrixEventID, 0, "relay stopped mid-answer")
		cancel()
		return
	}
	log := in.logger().With("matrix_event_id", s.MatrixEventID, "room_id", s.RoomID, "attempts", s.Attempts)
	maxAttempts := in.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = defaultAttempts
	}
	reason := shortError(err)
	if errors.Is(err, errNotSubmission) || errors.Is(err, errBadEncrypted) || errors.Is(err, errUnreadable) {
		// Room chat, or an event refused as malformed or replayed: final,
		// nothing appended, no reply.
		if gerr := in.Store.GiveUpMatrixSubmission(ctx, s.MatrixEventID, reason); gerr != nil {
			log.Warn("give up matrix submission", "err", gerr)
		}
		if errors.Is(err, errBadEncrypted) {
			log.Warn("m.room.encrypted event refused: nothing appended", "err", err)
		}
		return
	}
	if refused(err) && s.Attempts >= maxAttempts {
		if gerr := in.Store.GiveUpMatrixSubmission(ctx, s.MatrixEventID, reason); gerr != nil {
			log.Warn("give up matrix submission", "err", gerr)
			return
		}
		log.Warn("matrix submission given up: no reply could be sent", "err", err)
		return
	}
	undecryptable := errors.Is(err, ErrUndecryptable)
	wait := in.retryWait(s.Attempts, err)
	if rerr := in.Store.RetryMatrixSubmission(ctx, s.MatrixEventID, wait, reason); rerr != nil {
		log.Warn("store matrix submission retry", "err", rerr)
		return
	}
	log.Warn("answer matrix submission", "retry_in", wait, "err", err)
	if undecryptable {
		// Its key may arrive any moment (a key request is out): then it
		// is tried again at once, not after wait.
		in.awaitKey(ctx, s, began)
	}
}

// retryWait is the wait before a failed submission's next attempt
// (attempts so far ≥ 1): retryBackoff, at least what a 429 asked; for an
// event whose room key has not come, KeyRetry.
func (in *Inbox) retryWait(attempts int, err error) time.Duration {
	if errors.Is(err, ErrUndecryptable) {
		p := in.KeyRetry
		if p == (backoff.Policy{}) {
			p = keyRetryDefault
		}
		return p.Equal(attempts)
	}
	return max(retryBackoff.Equal(attempts), RetryAfter(err))
}

// refused reports the homeserver refusing the reply path (sending the
// reply, or reading the room's history for an earlier one) with a 4xx
// other than 429: a refusal that retrying does not mend. A 429, a 5xx, no
// answer, or our own store or log unavailable may pass.
func refused(err error) bool {
	var he mautrix.HTTPError
	if !errors.Is(err, errReply) || !errors.As(err, &he) || he.Response == nil {
		return false
	}
	code := he.Response.StatusCode
	return code >= 400 && code < 500 && code != http.StatusTooManyRequests
}

// errReply marks a failure of the reply path (sending it, or reading the
// room's history for an earlier one).
var errReply = errors.New("reply")

// shortError is what the store keeps of err: the Matrix error code or
// HTTP status of a homeserver's answer, else the error's text up to 200
// bytes (our own errors carry no bodies or secrets).
func shortError(err error) string {
	var he mautrix.HTTPError
	if errors.As(err, &he) {
		switch {
		case he.RespError != nil && he.RespError.ErrCode != "":
			return he.RespError.ErrCode
		case he.Response != nil:
			return "HTTP " + strconv.Itoa(he.Response.StatusCode)
		}
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// errTransient marks an outcome not to store: the log could not take the
// event right now, so the submission waits and is tried again.
var errTransient = errors.New("append unavailable; the submission stays queued")

// decide appends the submission and returns its outcome.
func (in *Inbox) decide(ctx context.Context, s store.MatrixSubmission) (Outcome, error) {
	bs, err := in.Store.MatrixRoomBindings(ctx, s.RoomID)
	if err != nil {
		return Outcome{}, err
	}
	if len(bs) == 0 {
		return Outcome{Status: 404, Error: "matrix_room_not_bound"}, nil
	}
	// The room's project is the binding's; with several projects bound to
	// one room, the one the event names, if any. The event's own project_id
	// is still checked by ingest against it.
	project := bs[0].ProjectID
	var head struct {
		ProjectID string `json:"project_id"`
	}
	if json.Unmarshal(s.Event, &head) == nil {
		for _, b := range bs {
			if b.ProjectID == head.ProjectID {
				project = b.ProjectID
			}
		}
	}
	res, err := in.Ingest.Append(ctx, project, s.Event)
	if err != nil {
		code, _ := ingest.Refusal(err)
		status := wire.ErrorStatus(code)
		if status == 503 {
			return Outcome{}, fmt.Errorf("%w: %w", errTransient, err)
		}
		return Outcome{Status: status, Error: code}, nil
	}
	return Outcome{OK: true, EventID: res.Record.EventID, ReceivedSeq: strconv.FormatInt(res.Record.ReceivedSeq, 10),
		ReceivedAt: correspondence.FormatTimestamp(res.Record.ReceivedAt)}, nil
}

// answer decides (once: the outcome is stored before the reply) and
// replies (once: a deterministic transaction id, and a scan for an earlier
// reply when this submission may have been answered before a crash).
func (in *Inbox) answer(ctx context.Context, s store.MatrixSubmission) error {
	raw := s.Outcome
	if raw == nil {
		if ev := queuedEncrypted(s); ev != nil {
			plain, err := in.openQueued(ctx, s, ev)
			if err != nil {
				return err
			}
			s.Event = plain
		}
		o, err := in.decide(ctx, s)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(o)
		if raw, err = in.Store.SetMatrixSubmissionOutcome(ctx, s.MatrixEventID, b); err != nil {
			return err
		}
	}
	var o Outcome
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("stored outcome: %w", err)
	}
	room, mid := id.RoomID(s.RoomID), id.EventID(s.MatrixEventID)
	// A submission tried before, here or by another process, may have
	// been answered by a reply whose completion was not stored.
	if s.Attempts > 1 || s.ReceivedAt.Before(in.started) {
		if prev, err := in.findReply(ctx, room, mid); err != nil {
			return fmt.Errorf("%w: reconcile: %w", errReply, err)
		} else if prev != "" {
			return in.Store.CompleteMatrixSubmission(ctx, s.MatrixEventID, prev.String())
		}
	}
	body := "accepted " + o.EventID + " (received_seq " + o.ReceivedSeq + ", received_at " + o.ReceivedAt + ")"
	if !o.OK {
		body = "refused: " + o.Error
	}
	content := map[string]any{
		"msgtype":      "m.notice",
		"body":         body,
		"m.relates_to": map[string]any{"m.in_reply_to": map[string]any{"event_id": mid}},
		KeyOutcome:     json.RawMessage(raw),
	}
	enc, err := in.rooms.encrypted(ctx, in.Client, room)
	if err != nil {
		return fmt.Errorf("%w: %w", errReply, err)
	}
	if enc && in.Crypto == nil {
		in.errs.error(in.logger(), "noenc-reply:"+s.RoomID, "cannot reply in an end-to-end encrypted room: this relay cannot encrypt (build acrelay with -tags goolm)", "room_id", s.RoomID)
	}
	resp, err := sendTo(ctx, in.Client, in.Crypto, enc, room, event.EventMessage, content, TxnID(s.RoomID, s.MatrixEventID, "reply"))
	if err != nil {
		return fmt.Errorf("%w: send: %w", errReply, err)
	}
	return in.Store.CompleteMatrixSubmission(ctx, s.MatrixEventID, resp.EventID.String())
}

// findReply scans the room's recent history (at most 500 events) for this
// user's reply to mid.
func (in *Inbox) findReply(ctx context.Context, room id.RoomID, mid id.EventID) (id.EventID, error) {
	filter := &mautrix.FilterPart{Senders: []id.UserID{in.Client.UserID}, Types: []event.Type{event.EventMessage, event.EventEncrypted}}
	from := ""
	for read := 0; read < 500; {
		resp, err := in.Client.Messages(ctx, room, from, "", mautrix.DirectionBackward, filter, 100)
		if err != nil {
			return "", err
		}
		for _, ev := range resp.Chunk {
			read++
			if ev.Sender != in.Client.UserID {
				continue
			}
			if ev.RoomID == "" {
				ev.RoomID = room
			}
			ev, err := open(ctx, in.Crypto, ev)
			if err != nil {
				in.logger().Warn("reply scan: cannot decrypt the relay's own past event", "room_id", room, "err", err)
				continue
			}
			var c struct {
				Rel struct {
					InReplyTo struct {
						EventID id.EventID `json:"event_id"`
					} `json:"m.in_reply_to"`
				} `json:"m.relates_to"`
				Outcome json.RawMessage `json:"io.github.acrelay.correspondence.outcome"`
			}
			if ev.Sender == in.Client.UserID && json.Unmarshal(ev.Content.VeryRaw, &c) == nil &&
				c.Rel.InReplyTo.EventID == mid && c.Outcome != nil {
				return ev.ID, nil
			}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			return "", nil
		}
		from = resp.End
	}
	return "", nil
}

// CreateEncryptedRoom creates a private room for a project the way
// Element creates one — m.room.encryption (megolm) in its initial state —
// and invites users. The relay needs its encryption (Crypto) to use it.
func CreateEncryptedRoom(ctx context.Context, cli *mautrix.Client, name string, invite []id.UserID) (id.RoomID, error) {
	resp, err := cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Visibility: "private", Name: name,
		Topic: "agent-correspondence records (acrelay)", Invite: invite, RoomVersion: id.RoomVersion(RoomVersion),
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		return "", fmt.Errorf("create room: %w", err)
	}
	return resp.RoomID, nil
}

// CreateRoom creates a private, unencrypted room for a project and
// invites users (spec/matrix.md "Decisions").
func CreateRoom(ctx context.Context, cli *mautrix.Client, name string, invite []id.UserID) (id.RoomID, error) {
	resp, err := cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Visibility: "private", Name: name,
		Topic: "agent-correspondence records (acrelay)", Invite: invite, RoomVersion: id.RoomVersion(RoomVersion)})
	if err != nil {
		return "", fmt.Errorf("create room: %w", err)
	}
	return resp.RoomID, nil
}
