package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/store"
)

// InboxStore is what the inbound path reads and writes.
type InboxStore interface {
	MatrixRoomBindings(ctx context.Context, roomID string) ([]store.MatrixBinding, error)
	EnqueueMatrixSubmissions(ctx context.Context, subs []store.MatrixSubmission, syncKey, since string) error
	MatrixSyncToken(ctx context.Context, syncKey string) (string, error)
	PendingMatrixSubmissions(ctx context.Context, limit int) ([]store.MatrixSubmission, error)
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
// Fill Store, Ingest and Client; Logger is optional.
type Inbox struct {
	Store  InboxStore
	Ingest Appender
	Client *mautrix.Client
	Logger *slog.Logger

	once     sync.Once
	wake     chan struct{}
	started  time.Time
	mu       sync.Mutex
	attempts map[string]retry // matrix event id → failed attempts in this process
}

func (in *Inbox) init() {
	in.once.Do(func() {
		in.wake = make(chan struct{}, 1)
		in.started = time.Now()
		in.attempts = map[string]retry{}
	})
}

func (in *Inbox) logger() *slog.Logger {
	if in.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Logger
}

// submissions picks the submissions out of room events (never the
// courier's own events).
func (in *Inbox) submissions(evs []*event.Event, roomID id.RoomID) []store.MatrixSubmission {
	var out []store.MatrixSubmission
	for _, ev := range evs {
		if ev == nil || ev.Type.Type != EventTypeSubmit || ev.Sender == in.Client.UserID || ev.ID == "" {
			continue
		}
		room := ev.RoomID
		if room == "" {
			room = roomID
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
		if json.Unmarshal(r, &head) != nil || head.Type != EventTypeSubmit || head.Sender == in.Client.UserID.String() {
			continue
		}
		var ev event.Event
		if json.Unmarshal(r, &ev) != nil {
			continue // not an event we can read: nothing to answer
		}
		evs = append(evs, &ev)
	}
	subs := in.submissions(evs, "")
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
// loses nor re-reads one), and joins rooms it is invited to. It backs off
// with jitter on errors (at least retry_after_ms on a 429) and returns
// when ctx ends.
func (in *Inbox) Sync(ctx context.Context) error {
	in.init()
	key := "sync:" + in.Client.UserID.String()
	since, err := in.Store.MatrixSyncToken(ctx, key)
	if err != nil {
		return err
	}
	failures := 0
	for ctx.Err() == nil {
		resp, err := in.Client.SyncRequest(ctx, 30000, since, SyncFilter(in.Client.UserID), since == "", event.PresenceOffline)
		if err == nil {
			var subs []store.MatrixSubmission
			for room, jr := range resp.Rooms.Join {
				subs = append(subs, in.submissions(jr.Timeline.Events, room)...)
			}
			for room := range resp.Rooms.Invite {
				if _, jerr := in.Client.JoinRoomByID(ctx, room); jerr != nil {
					in.logger().Warn("join invited room", "room_id", room, "err", jerr)
				}
			}
			err = in.Store.EnqueueMatrixSubmissions(ctx, subs, key, resp.NextBatch)
			if err == nil {
				since, failures = resp.NextBatch, 0
				if len(subs) > 0 {
					in.poke()
				}
				continue
			}
		}
		if ctx.Err() != nil {
			break
		}
		failures++
		wait := backoff(failures, time.Second, time.Minute)
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

// SyncFilter is the inline filter of the bot's (self's) /sync: room timelines
// carry only submissions from others (the homeserver neither reads nor
// serializes the courier's own record events and notices for it), up to
// 100 per room and sync; invites come regardless.
func SyncFilter(self id.UserID) string {
	f := map[string]any{
		"room": map[string]any{
			"timeline":     map[string]any{"types": []string{EventTypeSubmit}, "not_senders": []string{self.String()}, "limit": 100},
			"state":        map[string]any{"types": []string{}},
			"ephemeral":    map[string]any{"types": []string{}},
			"account_data": map[string]any{"types": []string{}},
		},
		"presence":     map[string]any{"types": []string{}},
		"account_data": map[string]any{"types": []string{}},
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// backoff is the n-th wait (n ≥ 1): exponential from initial up to max,
// drawn from its upper half.
func backoff(n int, initial, max time.Duration) time.Duration {
	d := initial
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + rand.N(d/2+1)
}

// Run answers queued submissions until ctx ends: each is appended through
// ingest for its room's project and answered with exactly one m.notice
// reply. A submission that fails transiently (the log or the homeserver
// unavailable) stays queued and is retried with backoff.
func (in *Inbox) Run(ctx context.Context) error {
	in.init()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		pending, err := in.Store.PendingMatrixSubmissions(ctx, 100)
		if err != nil && ctx.Err() == nil {
			in.logger().Warn("read matrix submissions", "err", err)
		}
		for _, s := range pending {
			if ctx.Err() != nil {
				return nil
			}
			if !in.due(s.MatrixEventID) {
				continue
			}
			if err := in.answer(ctx, s); err != nil && ctx.Err() == nil {
				n := in.failed(s.MatrixEventID, err)
				in.logger().Warn("answer matrix submission", "matrix_event_id", s.MatrixEventID, "failures", n, "err", err)
			} else {
				in.mu.Lock()
				delete(in.attempts, s.MatrixEventID)
				in.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-in.wake:
		case <-tick.C:
		}
	}
}

// retry is a failing submission's backoff.
type retry struct {
	n         int
	notBefore time.Time
}

// due reports whether a submission may be tried now.
func (in *Inbox) due(mid string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return !time.Now().Before(in.attempts[mid].notBefore)
}

// failed counts a failure and sets the next attempt (1 s doubling to 1 min,
// jittered; at least retry_after_ms after a 429).
func (in *Inbox) failed(mid string, err error) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	r := in.attempts[mid]
	r.n++
	wait := max(backoff(r.n, time.Second, time.Minute), RetryAfter(err))
	r.notBefore = time.Now().Add(wait)
	in.attempts[mid] = r
	return r.n
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
		status, code, _ := ingest.Refusal(err)
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
	in.mu.Lock()
	retried := in.attempts[s.MatrixEventID].n > 0
	in.mu.Unlock()
	if retried || s.ReceivedAt.Before(in.started) {
		if prev, err := in.findReply(ctx, room, mid); err != nil {
			return fmt.Errorf("reconcile reply: %w", err)
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
	resp, err := in.Client.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: TxnID(s.RoomID, s.MatrixEventID, "reply")})
	if err != nil {
		return fmt.Errorf("send reply: %w", err)
	}
	return in.Store.CompleteMatrixSubmission(ctx, s.MatrixEventID, resp.EventID.String())
}

// findReply scans the room's recent history (at most 500 events) for this
// user's reply to mid.
func (in *Inbox) findReply(ctx context.Context, room id.RoomID, mid id.EventID) (id.EventID, error) {
	filter := &mautrix.FilterPart{Senders: []id.UserID{in.Client.UserID}, Types: []event.Type{event.EventMessage}}
	from := ""
	for read := 0; read < 500; {
		resp, err := in.Client.Messages(ctx, room, from, "", mautrix.DirectionBackward, filter, 100)
		if err != nil {
			return "", err
		}
		for _, ev := range resp.Chunk {
			read++
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
