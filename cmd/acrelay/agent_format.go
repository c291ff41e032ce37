package main

// --format of the reading commands (events, follow, claims, voice): text
// for a person at a terminal, JSON lines for a program. Text names people
// by the display names the relay's key registry carries
// (GET /v1/correspondence/keys), never proves anything and is not stable
// for parsing; JSON is the relay's shapes, unchanged.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

// outputFormat is the --format flag: "text", "json", or "" (auto: text
// when stdout is a terminal, JSON lines otherwise).
type outputFormat struct{ value string }

func (f *outputFormat) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.value, "format", "", "text (for people; the default on a terminal) or json (JSON lines; the default when piped)")
}

// text resolves the format for out. Errors: a value other than text or json.
func (f *outputFormat) text(out io.Writer) (bool, error) {
	switch f.value {
	case "text":
		return true, nil
	case "json":
		return false, nil
	case "":
		return isTerminal(out), nil
	}
	return false, fmt.Errorf("--format %q: want text or json", f.value)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// identityNames maps identity ids to display names for text output, read
// from the relay once and again (at most every 10 s) when an unknown id
// shows up. A failed read leaves ids as they are: names are a courtesy.
type identityNames struct {
	c      *client.Client
	names  map[string]string
	loaded time.Time
}

func (n *identityNames) name(ctx context.Context, id string) string {
	if nm, ok := n.names[id]; ok {
		return nm
	}
	if time.Since(n.loaded) > 10*time.Second {
		n.loaded = time.Now()
		if m, err := n.c.DisplayNames(ctx); err == nil {
			n.names = m
		}
		if nm, ok := n.names[id]; ok {
			return nm
		}
	}
	return shortID(id)
}

// shortID is the first 8 characters of an id, as a person scans it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// eventText is the part of an event's JSON the text line shows.
type eventText struct {
	Kind     string `json:"kind"`
	ThreadID string `json:"thread_id"`
	Sender   struct {
		IdentityID string `json:"identity_id"`
	} `json:"sender"`
	Scope struct {
		Paths []string `json:"paths"`
	} `json:"scope"`
	Body struct {
		Summary        string   `json:"summary"`
		Detail         string   `json:"detail"`
		ClaimID        string   `json:"claim_id"`
		Generation     int64    `json:"generation"`
		ExpiresAt      string   `json:"expires_at"`
		Until          *string  `json:"until"`
		TargetEventID  string   `json:"target_event_id"`
		TargetEventIDs []string `json:"target_event_ids"`
	} `json:"body"`
}

// recordLine is one record as a line of text:
// "#SEQ YYYY-MM-DD HH:MM:SSZ NAME KIND [THREAD] WHAT (paths …)".
func recordLine(ctx context.Context, names *identityNames, r client.Record) string {
	var ev eventText
	_ = json.Unmarshal(r.Raw, &ev)
	at := r.Receipt.ReceivedAt
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		at = t.UTC().Format("2006-01-02 15:04:05Z")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %-16s %-16s [%s]", r.Receipt.ReceivedSeq, at, oneLine(names.name(ctx, ev.Sender.IdentityID)), ev.Kind, oneLine(ev.ThreadID))
	if what := eventWhat(ev); what != "" {
		b.WriteString(" " + what)
	}
	if len(ev.Scope.Paths) > 0 {
		fmt.Fprintf(&b, " (paths %s)", oneLine(strings.Join(ev.Scope.Paths, ", ")))
	}
	if len(r.MissingParents) > 0 {
		fmt.Fprintf(&b, " — missing parents %s", strings.Join(shortIDs(r.MissingParents), ", "))
	}
	return b.String()
}

// eventWhat says what an event is about in words: its own text, else its
// claim or target.
func eventWhat(ev eventText) string {
	b := ev.Body
	switch {
	case b.Summary != "":
		return oneLine(b.Summary)
	case b.Detail != "":
		return oneLine(b.Detail)
	case b.ClaimID != "" && b.ExpiresAt != "":
		return "claim " + b.ClaimID + " generation " + strconv.FormatInt(b.Generation, 10) + " until " + b.ExpiresAt
	case b.ClaimID != "":
		return "claim " + b.ClaimID + " released (generation " + strconv.FormatInt(b.Generation, 10) + ")"
	case b.TargetEventID != "":
		return "on " + shortEventID(b.TargetEventID)
	case len(b.TargetEventIDs) > 0:
		return "on " + strings.Join(shortIDs(b.TargetEventIDs), ", ")
	case b.Until != nil:
		return "until " + *b.Until
	}
	return ""
}

// oneLine keeps agent text on one terminal line: control characters
// (newlines, escapes that would drive the terminal) become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
}

// shortEventID is "sha256:" and the first 12 hex digits, as the demo prints.
func shortEventID(id string) string {
	if len(id) > 19 {
		return id[:19] + "…"
	}
	return id
}

func shortIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = shortEventID(id)
	}
	return out
}

// claimLine is one active claim: "NAME claim CLAIM_ID gen N on PATHS,
// expires in 46m (AT) [THREAD]" and its conflict, if any.
func claimLine(ctx context.Context, names *identityNames, c client.ActiveClaim, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s claim %s gen %d on %s, expires %s [%s]", oneLine(names.name(ctx, c.OwnerIdentityID)), oneLine(c.ClaimID), c.Generation,
		oneLine(strings.Join(c.Scope.Paths, ", ")), expiresText(c.ExpiresAt, now), oneLine(c.ThreadID))
	if c.Conflicted {
		fmt.Fprintf(&b, " — CONFLICTED: %d competing tip(s)", len(c.CompetingEventIDs))
	}
	return b.String()
}

func expiresText(at string, now time.Time) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return at
	}
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "now (" + at + ")"
	}
	return "in " + d.String() + " (" + at + ")"
}

// writeClaimsText prints the claims answer for a person.
func writeClaimsText(ctx context.Context, w io.Writer, names *identityNames, repo string, res *client.Claims, now time.Time) error {
	fmt.Fprintf(w, "active claims of %s: %d (evaluated %s, cursor %s, projection %s)\n", repo, len(res.Claims), res.EvaluatedAt, cursorText(res.Cursor), res.ProjectionStatus)
	for _, c := range res.Claims {
		fmt.Fprintf(w, "  %s\n", claimLine(ctx, names, c, now))
	}
	return nil
}

func cursorText(c *string) string {
	if c == nil {
		return "none"
	}
	return *c
}

// writeVoiceText prints the voice snapshot for a person: claims,
// conflicts named by who holds which claim, recent events.
func writeVoiceText(ctx context.Context, w io.Writer, names *identityNames, repo string, v *client.Voice, now time.Time) error {
	fmt.Fprintf(w, "voice of %s (evaluated %s, cursor %s, projection %s)\n", repo, v.EvaluatedAt, cursorText(v.Cursor), v.ProjectionStatus)
	fmt.Fprintf(w, "active claims: %d\n", len(v.ActiveClaims))
	byEvent := make(map[string]client.ActiveClaim, len(v.ActiveClaims))
	for _, c := range v.ActiveClaims {
		byEvent[c.EventID] = c
		fmt.Fprintf(w, "  %s\n", claimLine(ctx, names, c, now))
	}
	claimText := func(eventID string) string {
		if c, ok := byEvent[eventID]; ok {
			return oneLine(names.name(ctx, c.OwnerIdentityID)) + "'s claim " + oneLine(c.ClaimID)
		}
		return "claim event " + shortEventID(eventID)
	}
	cf := v.Conflicts
	n := len(cf.OverlappingClaims) + len(cf.SessionForks) + len(cf.MissingParents)
	fmt.Fprintf(w, "conflicts: %d\n", n)
	for _, o := range cf.OverlappingClaims {
		fmt.Fprintf(w, "  overlapping claims on %s: %s and %s\n", oneLine(strings.Join(o.Paths, ", ")), claimText(o.LeftEventID), claimText(o.RightEventID))
	}
	for _, f := range cf.SessionForks {
		fmt.Fprintf(w, "  session fork by %s at session_seq %d: %s\n", oneLine(names.name(ctx, f.IdentityID)), f.SessionSeq, strings.Join(shortIDs(f.EventIDs), ", "))
	}
	for _, m := range cf.MissingParents {
		fmt.Fprintf(w, "  missing parents of %s: %s\n", shortEventID(m.EventID), strings.Join(shortIDs(m.MissingParentIDs), ", "))
	}
	fmt.Fprintf(w, "recent events (newest first): %d\n", len(v.RecentEvents))
	for _, r := range v.RecentEvents {
		fmt.Fprintf(w, "  %s\n", recordLine(ctx, names, r))
	}
	return nil
}
