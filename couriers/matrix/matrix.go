package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/store"
)

// Name is the courier's name in cursors and leases.
const Name = "matrix"

// Store is what the courier reads and writes.
type Store interface {
	MatrixBoundProjects(ctx context.Context) ([]string, error)
	MatrixBindings(ctx context.Context, projectID string) ([]store.MatrixBinding, error)
	MatrixBinding(ctx context.Context, projectID, id string) (store.MatrixBinding, error)
	RecordMatrixSent(ctx context.Context, s store.MatrixSent) error
	RecordMatrixSentBound(ctx context.Context, s store.MatrixSent, projectID, bindingID string) (bool, error)
	MatrixSentParts(ctx context.Context, roomID string, eventIDs []string) ([]store.MatrixSent, error)
}

// NewClient returns a mautrix client for the courier: with the
// application service's as_token (userID is its sender) or a bot's access
// token. Its own retries are off: the courier owns every retry (a 429
// waits what the homeserver asks, Retry-After or retry_after_ms in the body,
// the longer; mautrix's own retry reads only the header).
func NewClient(homeserverURL string, userID id.UserID, accessToken string) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(homeserverURL, userID, accessToken)
	if err != nil {
		return nil, fmt.Errorf("matrix client: %w", err)
	}
	cli.DefaultHTTPRetries = 0
	cli.Client = &http.Client{Timeout: 90 * time.Second}
	cli.UserAgent = "acrelay-matrix"
	return cli, nil
}

// Courier sends records to bound rooms. Fill Store, Client and PublicURL;
// Host (the homeserver's host, for the runner's per-host limit) and Logger
// are optional. Its methods are safe for concurrent use.
type Courier struct {
	Store     Store
	Client    *mautrix.Client
	PublicURL string // the relay's public URL, no trailing slash
	Host      string
	// ScanLimit bounds the room history read when reconciling (events);
	// default 1000.
	ScanLimit int
	// SettleDelay is how long after Started the first reconciliation
	// waits, so that a send the previous process had in flight when it
	// died has landed in the room (and in the homeserver's transaction-id
	// cache) before the history is read and anything is re-sent; default
	// 2s, negative none. A process that takes a dead process's lease once
	// it lapsed, long after its own start, waits nothing: the dead
	// process's sends were cut at its lease's safe time, before the lapse.
	SettleDelay time.Duration
	// Started is when this process started (the settle counts from it);
	// zero: from this courier's first delivery.
	Started time.Time
	Logger  *slog.Logger
	// Crypto encrypts for, and decrypts from, end-to-end encrypted rooms
	// (package couriers/matrix/e2ee, goolm builds); nil: an encrypted
	// room is refused (ErrEncryptionUnavailable, logged at ERROR once per
	// binding), never sent plaintext.
	Crypto Crypto

	rooms rooms
	errs  logOnce

	bornOnce sync.Once
	born     time.Time

	mu      sync.Mutex
	trusted map[string]bool // binding id: what the store says is sent is all that was sent
	joined  map[id.RoomID]bool
}

var _ couriers.Courier = (*Courier)(nil)

// Name implements couriers.Courier.
func (c *Courier) Name() string { return Name }

// Projects implements couriers.Courier: the projects with bindings.
func (c *Courier) Projects(ctx context.Context) ([]string, error) {
	return c.Store.MatrixBoundProjects(ctx)
}

// Targets implements couriers.Courier: one target per binding.
func (c *Courier) Targets(ctx context.Context, projectID string) ([]couriers.Target, error) {
	bs, err := c.Store.MatrixBindings(ctx, projectID)
	if err != nil {
		return nil, err
	}
	ts := make([]couriers.Target, 0, len(bs))
	for _, b := range bs {
		ts = append(ts, couriers.Target{ID: b.ID, Host: c.Host})
	}
	return ts, nil
}

// Deliver implements couriers.Courier: each record of recs that the
// binding covers goes to its room as a record event and a notice, in
// order, each part once. After a failure (or at the first delivery since
// the process started) the room's recent history is read first, so a part
// that reached the room without its record in the store is not sent
// again.
func (c *Courier) Deliver(ctx context.Context, projectID string, t couriers.Target, recs []store.Record) (err error) {
	b, err := c.Store.MatrixBinding(ctx, projectID, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("binding removed: %w", couriers.ErrTargetGone)
	}
	if err != nil {
		return err
	}
	var todo []store.Record
	for _, r := range recs {
		if b.RepositoryID == "" || r.RepositoryID == b.RepositoryID {
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			c.setTrusted(b.ID, false)
			err = classify(err)
		}
	}()
	room := id.RoomID(b.RoomID)
	if err := c.join(ctx, room); err != nil {
		return fmt.Errorf("join room: %w", err)
	}
	enc, err := c.rooms.encrypted(ctx, c.Client, room)
	if err != nil {
		return err
	}
	if enc && c.Crypto == nil {
		c.errs.error(c.logger(), b.ID, "matrix room is end-to-end encrypted and this relay cannot encrypt: nothing is sent to it",
			"binding_id", b.ID, "room_id", b.RoomID, "fix", "build acrelay with -tags goolm")
		return fmt.Errorf("binding %s: %w", b.ID, ErrEncryptionUnavailable)
	}
	ids := make([]string, len(todo))
	for i, r := range todo {
		ids[i] = r.EventID
	}
	parts, err := c.Store.MatrixSentParts(ctx, b.RoomID, ids)
	if err != nil {
		return err
	}
	sent := make(map[string]bool, len(parts))
	for _, p := range parts {
		sent[p.EventID+"\x00"+p.Part] = true
	}
	if !c.isTrusted(b.ID) {
		if err := c.settle(ctx); err != nil {
			return err
		}
		found, err := c.scan(ctx, room, todo[0].ReceivedSeq)
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		for _, s := range found {
			k := s.EventID + "\x00" + s.Part
			if sent[k] || !wanted(ids, s.EventID) {
				continue
			}
			if err := c.Store.RecordMatrixSent(ctx, s); err != nil {
				return err
			}
			sent[k] = true
		}
		c.setTrusted(b.ID, true)
	}
	// An unbinding takes effect before the next record. Each part's write
	// (RecordMatrixSentBound) says whether the binding still exists, so
	// that costs no read per record; only after a record whose parts had
	// all been sent before is the binding read.
	bound, known := true, true
	for i, r := range todo {
		if i > 0 && !known {
			_, err := c.Store.MatrixBinding(ctx, projectID, t.ID)
			bound = !errors.Is(err, store.ErrNotFound)
		}
		if !bound {
			return fmt.Errorf("binding removed: %w", couriers.ErrTargetGone)
		}
		known = false
		content, full := recordContentMax(c.PublicURL, r, maxContent(enc))
		for _, part := range []string{store.MatrixPartRecord, store.MatrixPartNotice} {
			if sent[r.EventID+"\x00"+part] {
				continue
			}
			typ, body := event.Type{Type: EventTypeRecord, Class: event.MessageEventType}, any(content)
			if part == store.MatrixPartNotice {
				typ, body = event.EventMessage, noticeContent(r, content, full)
			}
			resp, err := sendTo(ctx, c.Client, c.Crypto, enc, room, typ, body, TxnID(b.RoomID, r.EventID, part))
			if err != nil {
				return fmt.Errorf("send %s %s: %w", part, r.EventID, err)
			}
			bound, err = c.Store.RecordMatrixSentBound(ctx, store.MatrixSent{RoomID: b.RoomID, EventID: r.EventID, Part: part, MatrixEventID: resp.EventID.String()}, projectID, b.ID)
			if err != nil {
				return err
			}
			known = true
		}
	}
	return nil
}

func (c *Courier) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func wanted(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (c *Courier) isTrusted(bindingID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trusted[bindingID]
}

func (c *Courier) setTrusted(bindingID string, v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trusted == nil {
		c.trusted = map[string]bool{}
	}
	c.trusted[bindingID] = v
}

// join joins room once per process (a no-op when already joined; the
// courier's user created or was invited to it).
func (c *Courier) join(ctx context.Context, room id.RoomID) error {
	c.mu.Lock()
	done := c.joined[room]
	c.mu.Unlock()
	if done {
		return nil
	}
	if _, err := c.Client.JoinRoomByID(ctx, room); err != nil {
		return err
	}
	c.mu.Lock()
	if c.joined == nil {
		c.joined = map[id.RoomID]bool{}
	}
	c.joined[room] = true
	c.mu.Unlock()
	return nil
}

// scan reads the room's history backwards, newest first, for the parts
// this courier's user sent, until it passes a record older than fromSeq
// (records go in receipt order, so nothing older is in doubt) or reads
// ScanLimit events.
func (c *Courier) scan(ctx context.Context, room id.RoomID, fromSeq int64) ([]store.MatrixSent, error) {
	limit := c.ScanLimit
	if limit <= 0 {
		limit = 1000
	}
	filter := &mautrix.FilterPart{Senders: []id.UserID{c.Client.UserID},
		Types: []event.Type{{Type: EventTypeRecord, Class: event.MessageEventType}, event.EventMessage, event.EventEncrypted}}
	var out []store.MatrixSent
	from := ""
	for read := 0; read < limit; {
		resp, err := c.Client.Messages(ctx, room, from, "", mautrix.DirectionBackward, filter, 100)
		if err != nil {
			return nil, err
		}
		for _, ev := range resp.Chunk {
			read++
			if ev.Sender != c.Client.UserID {
				continue
			}
			if ev.RoomID == "" {
				ev.RoomID = room
			}
			ev, err := open(ctx, c.Crypto, ev)
			if err != nil {
				// Its own past event: only a lost crypto store makes it
				// unreadable (then it may be sent again).
				c.logger().Warn("history scan: cannot decrypt the relay's own past event", "room_id", room, "err", err)
				continue
			}
			raw := json.RawMessage(ev.Content.VeryRaw)
			part := store.MatrixPartRecord
			if ev.Type.Type != EventTypeRecord {
				var n map[string]json.RawMessage
				if json.Unmarshal(raw, &n) != nil || n[KeyRecord] == nil {
					continue
				}
				raw, part = n[KeyRecord], store.MatrixPartNotice
			}
			rec, ok := parseRecord(raw)
			if !ok {
				continue
			}
			if rec.seq < fromSeq && part == store.MatrixPartRecord {
				return out, nil
			}
			out = append(out, store.MatrixSent{RoomID: room.String(), EventID: rec.eventID, Part: part, MatrixEventID: ev.ID.String()})
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			return out, nil
		}
		from = resp.End
	}
	return out, nil
}

// classify turns a homeserver's 429 M_LIMIT_EXCEEDED into a
// *couriers.RetryAfterError waiting as long as the homeserver asks: the
// Retry-After header (Synapse; delay-seconds or an HTTP date, RFC 9110
// §10.2.3) or retry_after_ms in the body (Synapse, Conduit), the longer
// when both are present, 1 s when neither is. The rest stays short (no
// bodies beyond the Matrix error code).
func classify(err error) error {
	var he mautrix.HTTPError
	if !errors.As(err, &he) {
		return err
	}
	if he.Response != nil && he.Response.StatusCode == http.StatusTooManyRequests ||
		he.RespError != nil && he.RespError.ErrCode == mautrix.MLimitExceeded.ErrCode {
		wait := time.Duration(0)
		if he.RespError != nil {
			if ms, ok := he.RespError.ExtraData["retry_after_ms"].(float64); ok && ms > 0 {
				wait = time.Duration(ms) * time.Millisecond
			}
		}
		if he.Response != nil {
			wait = max(wait, retryAfterHeader(he.Response.Header.Get("Retry-After"), time.Now()))
		}
		if wait <= 0 {
			wait = time.Second
		}
		return &couriers.RetryAfterError{After: wait, Err: err}
	}
	return err
}

// retryAfterHeader reads a Retry-After value (RFC 9110 §10.2.3):
// delay-seconds or an HTTP date, relative to now; 0 when absent, in the
// past or malformed. At most a day, so a bad header cannot park the
// courier for years.
func retryAfterHeader(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(min(n, 86400)) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), 24*time.Hour)
}

// RetryAfter is how long to wait after err, a homeserver's answer: what
// its 429 asks (Retry-After or retry_after_ms, the longer), or 0 when err
// says nothing about it.
func RetryAfter(err error) time.Duration {
	var ra *couriers.RetryAfterError
	if errors.As(classify(err), &ra) {
		return ra.After
	}
	return 0
}

// settle waits, once per process start, until SettleDelay has passed since
// Started, or since the first delivery when Started is zero (see
// SettleDelay).
func (c *Courier) settle(ctx context.Context) error {
	c.bornOnce.Do(func() {
		c.born = c.Started
		if c.born.IsZero() {
			c.born = time.Now()
		}
	})
	d := c.SettleDelay
	if d == 0 {
		d = 2 * time.Second
	}
	wait := d - time.Since(c.born)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
