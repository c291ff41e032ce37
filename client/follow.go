package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acrelay/acrelay/wire"
)

// FollowQuery says what Follow follows. RepositoryID is required;
// ThreadID optional. IdentityID must be an active identity of the bearer's
// project: the wake stream is addressed to it (spec §9), and every active
// identity receives every change. After is the exclusive received_seq
// cursor to resume from (0: from the start).
//
// IdleTimeout (default 2m) reconnects a stream that sent nothing, not even
// a heartbeat comment, for that long. ResyncInterval (default 5m; negative
// disables) replays /events even without a frame, since wake delivery may
// be missed (spec §9). PollInterval (default 10s) paces replays when the
// relay has no wake stream (404, 405 or 501 on the live URL).
type FollowQuery struct {
	RepositoryID   string
	ThreadID       string
	IdentityID     string
	After          int64
	IdleTimeout    time.Duration
	ResyncInterval time.Duration
	PollInterval   time.Duration
	// Reconnecting, when set, is called (on Follow's goroutine) each time
	// the wake stream failed and Follow waits wait before trying again:
	// the relay is away or refusing for now. err says why.
	Reconnecting func(err error, wait time.Duration)
	// Connected, when set, is called each time the wake stream opens
	// after a call of Reconnecting: the relay is back.
	Connected func()
}

// WakeEvent is the data of one wake SSE "change" frame (spec §9). It is an
// invalidation only: it never carries bodies.
type WakeEvent struct {
	Format      string `json:"_format"`
	Key         string `json:"key"`
	Kind        string `json:"kind"`
	IdentityID  string `json:"identity_id"`
	OccurredAt  string `json:"occurred_at"`
	WakeVersion int64  `json:"wake_version"`
	Context     struct {
		ReceivedSeq string `json:"received_seq"`
	} `json:"context"`
}

// sseFrame is one dispatched server-sent event (WHATWG HTML §9.2).
type sseFrame struct {
	event, data, id string
}

// Follow yields the records of q in ascending received_seq, live: it
// opens the wake SSE stream (the URL comes from the relay's correspondence-
// live Link-Template, falling back to /v1/wake/voice?identity_id=…&keys=
// correspondence), replays GET /events?after=<cursor> once the stream is
// open and again after every change frame newer than the cursor, and
// reconnects with Last-Event-ID and capped exponential backoff when the
// stream ends, fails or stays silent. A relay without a wake stream (404,
// 405, 501) is polled every q.PollInterval instead; a 404
// identity_not_found (q.IdentityID is no identity of the token's project)
// is yielded as an error, not polled around. Each record is yielded exactly once
// per call even when frames repeat or replays overlap: records at or
// below the cursor are skipped.
//
// It ends when the consumer stops, after yielding (Record{}, err) for a
// refusal that retrying cannot cure (an *APIError that is not retryable,
// a verification failure, ErrMalformedRecord), or with the context's
// error when ctx ends. Client.HTTP must have no overall Timeout.
func (c *Client) Follow(ctx context.Context, q FollowQuery) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		f := &follower{c: c, q: q, cursor: q.After, yield: yield}
		if f.q.IdleTimeout <= 0 {
			f.q.IdleTimeout = 2 * time.Minute
		}
		if f.q.ResyncInterval == 0 {
			f.q.ResyncInterval = 5 * time.Minute
		}
		if f.q.PollInterval <= 0 {
			f.q.PollInterval = 10 * time.Second
		}
		if err := f.run(ctx); err != nil && !errors.Is(err, errStopped) {
			yield(Record{}, err)
		}
	}
}

var errStopped = errors.New("consumer stopped")

type follower struct {
	c           *Client
	q           FollowQuery
	cursor      int64
	lastEventID string
	retryDelay  time.Duration // the stream's "retry:" field, if any
	away        bool          // Reconnecting was called and Connected not since
	yield       func(Record, error) bool
}

// fatal reports an error that retrying cannot cure.
func fatal(err error) bool { return !retryableErr(err) }

func (f *follower) run(ctx context.Context) error {
	live, err := f.liveURL(ctx)
	if err != nil {
		return err
	}
	attempt := 0
	for {
		start := time.Now()
		err := f.session(ctx, live)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && fatal(err) {
			return err
		}
		if time.Since(start) > 30*time.Second {
			attempt = 0 // the stream worked for a while: start backing off afresh
		}
		d := f.c.Retry.delay(attempt, f.retryDelay)
		attempt++
		if err != nil && f.q.Reconnecting != nil {
			f.away = true
			f.q.Reconnecting(err, d)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// liveURL expands the correspondence-live template, or builds the
// documented default when the relay advertises none.
func (f *follower) liveURL(ctx context.Context) (string, error) {
	vars := map[string]string{"identity_id": f.q.IdentityID, "keys": "correspondence"}
	links, err := f.c.Discover(ctx, f.q.RepositoryID, f.q.ThreadID)
	if err != nil && fatal(err) {
		return "", err
	}
	if err == nil {
		if u, err := links.Expand(RelLive, vars); err == nil {
			return u, nil
		}
	}
	return f.c.endpoint("/v1/wake/voice", url.Values{"identity_id": {f.q.IdentityID}, "keys": {"correspondence"}}).String(), nil
}

// session runs one stream connection: connect, replay, then read frames
// until the stream ends. A nil error means the stream ended after
// working; the caller reconnects.
func (f *follower) session(ctx context.Context, live string) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, err := f.connect(sctx, live)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == wire.CodeIdentityNotFound {
		return err // the stream exists; the identity does not: fatal, not a reason to poll
	}
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed || ae.Status == http.StatusNotImplemented) {
		return f.poll(ctx)
	}
	if err != nil {
		// The stream is unreachable for now (a relay whose public URL is
		// wrong, a proxy dropping SSE, a restart): catch up from the log
		// anyway, so each reconnect attempt also polls, with its backoff.
		if !fatal(err) {
			if rerr := f.replay(ctx); rerr != nil {
				return rerr
			}
		}
		return err
	}
	defer body.Close()
	if f.away && f.q.Connected != nil {
		f.away = false
		f.q.Connected()
	}
	// Subscribe first, then replay: a change committed in between is
	// either in the replay or announced on the open stream.
	if err := f.replay(ctx); err != nil {
		return err
	}
	frames := make(chan sseFrame)
	readErr := make(chan error, 1)
	go func() { readErr <- readSSE(body, frames, sctx.Done()) }()
	idle := time.NewTimer(f.q.IdleTimeout)
	defer idle.Stop()
	var resync <-chan time.Time
	if f.q.ResyncInterval > 0 {
		tk := time.NewTicker(f.q.ResyncInterval)
		defer tk.Stop()
		resync = tk.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			if err == nil || errors.Is(err, io.EOF) {
				return nil
			}
			return &transientError{fmt.Errorf("wake stream: %w", err)}
		case <-idle.C:
			return &transientError{errors.New("wake stream silent past the idle timeout")}
		case <-resync:
			if err := f.replay(ctx); err != nil {
				return err
			}
		case fr := <-frames:
			idle.Reset(f.q.IdleTimeout)
			if fr.id != "" {
				f.lastEventID = fr.id
			}
			if fr.event == "" && fr.data == "" {
				continue // heartbeat comment or retry-only frame
			}
			if fr.event != "change" {
				continue
			}
			var we WakeEvent
			if err := json.Unmarshal([]byte(fr.data), &we); err == nil && we.Context.ReceivedSeq != "" {
				if seq, err := parseSeq(we.Context.ReceivedSeq); err == nil && seq <= f.cursor {
					continue // a repeated or old frame: nothing new
				}
			}
			if err := f.replay(ctx); err != nil {
				return err
			}
		}
	}
}

// poll replays every PollInterval, for relays without a wake stream.
func (f *follower) poll(ctx context.Context) error {
	t := time.NewTicker(f.q.PollInterval)
	defer t.Stop()
	for {
		if err := f.replay(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (f *follower) connect(ctx context.Context, live string) (io.ReadCloser, error) {
	u, err := url.Parse(live)
	if err != nil {
		return nil, fmt.Errorf("live url: %w", err)
	}
	req, err := f.c.newRequest(ctx, http.MethodGet, u, "", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", MediaTypeSSE)
	req.Header.Set("Cache-Control", "no-cache")
	if f.lastEventID != "" {
		req.Header.Set("Last-Event-ID", f.lastEventID)
	}
	hc := f.c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, &transientError{fmt.Errorf("wake stream: %w", err)}
	}
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
		res.Body.Close()
		f.retryDelay = retryAfterOf(res.Header)
		return nil, ParseAPIError(res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), MediaTypeSSE) {
		res.Body.Close()
		return nil, fmt.Errorf("%w: wake stream served %q", ErrMalformedRecord, ct)
	}
	return res.Body, nil
}

// replay pages /events after the cursor and yields the new records.
func (f *follower) replay(ctx context.Context) error {
	q := EventsQuery{RepositoryID: f.q.RepositoryID, ThreadID: f.q.ThreadID, After: f.cursor}
	for {
		p, err := f.c.EventsPage(ctx, q)
		if err != nil {
			return err
		}
		for _, r := range p.Records {
			if r.Receipt.ReceivedSeq <= f.cursor {
				continue
			}
			f.cursor = r.Receipt.ReceivedSeq
			if !f.yield(r, nil) {
				return errStopped
			}
		}
		if !p.HasMore {
			return nil
		}
		q.After = p.NextAfter
	}
}

// readSSE parses an event stream (WHATWG HTML §9.2.6) from r and sends
// each dispatched frame, and an empty frame for each comment (a
// heartbeat), on out until r ends or done closes.
func readSSE(r io.Reader, out chan<- sseFrame, done <-chan struct{}) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var fr sseFrame
	var data strings.Builder
	hasData := false
	send := func(x sseFrame) bool {
		select {
		case out <- x:
			return true
		case <-done:
			return false
		}
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if hasData {
				fr.data = data.String()
				if fr.event == "" {
					fr.event = "message"
				}
				if !send(fr) {
					return nil
				}
			} else if fr.id != "" && !send(sseFrame{id: fr.id}) {
				return nil
			}
			fr, hasData = sseFrame{}, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			if !send(sseFrame{}) {
				return nil
			}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			fr.event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				fr.id = value
			}
		}
		// "retry" is not used: reconnection follows the Client's RetryPolicy
		// and any Retry-After of a refused connect.
	}
}
