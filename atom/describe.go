package atom

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TitleMax is the most scalar values of an entry title's words; longer
// words are cut and end with "…".
const TitleMax = 140

// Description is a record as a person reads it: what a feed entry's title
// and content and a record page (relay) show. It is a pure function of
// the record's immutable {event, receipt} JSON (Describe), so it never
// changes either. Every string in it is agent-controlled text, unescaped:
// each renderer escapes it for its context.
type Description struct {
	// Label is the kind's short label ("Progress", "Claim released"); the
	// kind itself for a kind this package does not know.
	Label string
	// Words are the event's own words (spec §5's main text field:
	// summary, else detail), else what its body says in words ("paths
	// src/a until …"); "" when it says nothing (a bare pause).
	Words string
	// Text is the event's own full text (summary or detail, with line
	// breaks), "" when it has none.
	Text     string
	Kind     string
	EventID  string
	SenderID string
	// ReceivedAt and ReceivedSeq are the receipt's, as written there.
	ReceivedAt, ReceivedSeq string
	Facts                   []Fact
}

// Fact is one line of a description: a label and its values, each shown
// as an identifier (Code) or as prose.
type Fact struct {
	Label  string
	Values []string
	Code   bool
}

// Title is the entry title: the label, then ": " and the words collapsed
// to one line and cut to TitleMax scalar values.
func (d Description) Title() string {
	w := oneLine(d.Words)
	if w == "" {
		return d.Label
	}
	if utf8.RuneCountInString(w) > TitleMax {
		r := []rune(w)
		w = strings.TrimRightFunc(string(r[:TitleMax]), unicode.IsSpace) + "…"
	}
	return d.Label + ": " + w
}

// kindLabels are the short labels of spec §5's kinds.
var kindLabels = map[string]string{
	"intent": "Intent", "progress": "Progress", "observation": "Observation",
	"claim.open": "Claim", "claim.renew": "Claim renewed", "claim.release": "Claim released",
	"artifact.offer": "Artifact",
	"ack.seen":       "Seen", "ack.understood": "Understood", "ack.accepted": "Accepted",
	"ack.rejected": "Rejected", "ack.applied": "Applied", "resume": "Resume",
	"conflict.raise": "Conflict", "conflict.resolve": "Conflict resolved", "repair": "Repair",
	"pause": "Pause", "rest": "Rest", "refusal": "Refusal", "handoff": "Handoff", "close": "Close",
}

// KindLabel is kind's short label (the kind itself on one line when
// unknown; ingest admits only spec §5's kinds).
func KindLabel(kind string) string {
	if l, ok := kindLabels[kind]; ok {
		return l
	}
	return oneLine(kind)
}

type recordJSON struct {
	Event struct {
		EventID      string   `json:"event_id"`
		RepositoryID string   `json:"repository_id"`
		ThreadID     string   `json:"thread_id"`
		Kind         string   `json:"kind"`
		Parents      []string `json:"parents"`
		IssuedAt     string   `json:"issued_at"`
		Sender       struct {
			IdentityID string `json:"identity_id"`
			DeviceID   string `json:"device_id"`
			SessionID  string `json:"session_id"`
		} `json:"sender"`
		SessionSeq json.Number `json:"session_seq"`
		Scope      struct {
			BaseRevision *string  `json:"base_revision"`
			Branch       *string  `json:"branch"`
			Paths        []string `json:"paths"`
		} `json:"scope"`
		Body struct {
			Summary            string      `json:"summary"`
			Detail             string      `json:"detail"`
			NextSafeAction     string      `json:"next_safe_action"`
			ClaimID            string      `json:"claim_id"`
			Generation         json.Number `json:"generation"`
			ExpiresAt          string      `json:"expires_at"`
			PredecessorEventID string      `json:"predecessor_event_id"`
			TargetEventID      string      `json:"target_event_id"`
			TargetEventIDs     []string    `json:"target_event_ids"`
			ResultRevision     string      `json:"result_revision"`
			Until              *string     `json:"until"`
			HandoffID          string      `json:"handoff_id"`
			Artifact           *struct {
				Kind     string `json:"kind"`
				Revision string `json:"revision"`
				Digest   string `json:"digest"`
				Locator  string `json:"locator"`
			} `json:"artifact"`
		} `json:"body"`
	} `json:"event"`
	Receipt struct {
		ReceivedAt  string `json:"received_at"`
		ReceivedSeq string `json:"received_seq"`
	} `json:"receipt"`
}

// Describe reads a record's {event, receipt} JSON (spec §3, §5) into its
// description. A record that does not decode describes as its kind's
// label and nothing else (ok false); stored records always decode.
func Describe(kind string, record []byte) (d Description, ok bool) {
	var rec recordJSON
	d.Kind, d.Label = kind, KindLabel(kind)
	if err := json.Unmarshal(record, &rec); err != nil {
		return d, false
	}
	ev, b := rec.Event, rec.Event.Body
	if ev.Kind != "" {
		d.Kind, d.Label = ev.Kind, KindLabel(ev.Kind)
	}
	d.EventID, d.SenderID = ev.EventID, ev.Sender.IdentityID
	d.ReceivedAt, d.ReceivedSeq = rec.Receipt.ReceivedAt, rec.Receipt.ReceivedSeq
	d.Text = b.Summary
	if d.Text == "" {
		d.Text = b.Detail
	}
	d.Words = d.Text
	paths := strings.Join(ev.Scope.Paths, ", ")
	if d.Words == "" {
		switch {
		case b.ClaimID != "" && b.ExpiresAt != "":
			d.Words = paths + " until " + b.ExpiresAt
		case b.ClaimID != "":
			d.Words = paths
		case b.Artifact != nil:
			d.Words = b.Artifact.Kind + " " + b.Artifact.Revision + b.Artifact.Digest
		case b.ResultRevision != "":
			d.Words = "as " + b.ResultRevision
		case b.TargetEventID != "":
			d.Words = "on " + b.TargetEventID
		case len(b.TargetEventIDs) > 0:
			d.Words = "on " + strings.Join(b.TargetEventIDs, ", ")
		case b.Until != nil:
			d.Words = "until " + *b.Until
		}
	}
	add := func(label string, code bool, values ...string) {
		var vs []string
		for _, v := range values {
			if v != "" {
				vs = append(vs, v)
			}
		}
		if len(vs) > 0 {
			d.Facts = append(d.Facts, Fact{Label: label, Values: vs, Code: code})
		}
	}
	add("Next safe action", false, b.NextSafeAction)
	if b.Summary != "" {
		add("Detail", false, b.Detail)
	}
	add("Repository", true, ev.RepositoryID)
	add("Thread", true, ev.ThreadID)
	add("Paths", true, ev.Scope.Paths...)
	if r := ev.Scope.BaseRevision; r != nil {
		add("Base revision", true, *r)
	}
	if br := ev.Scope.Branch; br != nil {
		add("Branch", true, *br)
	}
	if b.ClaimID != "" {
		add("Claim", true, b.ClaimID)
		add("Generation", false, b.Generation.String())
	}
	add("Claim expires", true, b.ExpiresAt)
	add("Follows", true, b.PredecessorEventID)
	add("Answers", true, b.TargetEventID)
	add("Answers", true, b.TargetEventIDs...)
	if a := b.Artifact; a != nil {
		add("Artifact", true, a.Kind, a.Revision, a.Digest)
		add("Artifact locator", true, a.Locator)
	}
	add("Result revision", true, b.ResultRevision)
	if b.Until != nil {
		add("Until", true, *b.Until)
	}
	add("Handoff contract", true, b.HandoffID)
	add("Parents", true, ev.Parents...)
	add("Sender", true, ev.Sender.IdentityID)
	add("Device / session", true, ev.Sender.DeviceID, ev.Sender.SessionID)
	add("Session sequence", false, ev.SessionSeq.String())
	add("Issued at (sender's clock)", true, ev.IssuedAt)
	return d, true
}

// oneLine collapses every run of white space and controls to one space.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// ContentMaxValues is the most values of one fact an entry's content
// lists ("… and N more" after them; the record page and the record JSON
// have all): a feed entry stays readable, and a record with 64 long paths
// is not rendered twice over.
const ContentMaxValues = 16

// HTML returns the description as a fragment of HTML for a feed reader:
// who (author), what (title words and full text), and the facts, every
// agent-controlled string escaped (html escaping, then the caller's XML
// escaping); no element carries a link, so nothing in it is live.
func (d Description) HTML(author string) string {
	var b strings.Builder
	b.WriteString("<p><strong>")
	htmlText(&b, author)
	b.WriteString("</strong> · ")
	htmlText(&b, d.Label)
	b.WriteString("</p>\n")
	if d.Text != "" {
		b.WriteString("<p>")
		for i, line := range strings.Split(d.Text, "\n") {
			if i > 0 {
				b.WriteString("<br>")
			}
			htmlText(&b, line)
		}
		b.WriteString("</p>\n")
	} else if d.Words != "" {
		b.WriteString("<p>")
		htmlText(&b, d.Words)
		b.WriteString("</p>\n")
	}
	if len(d.Facts) > 0 {
		b.WriteString("<ul>\n")
		for _, f := range d.Facts {
			b.WriteString("<li>")
			htmlText(&b, f.Label)
			b.WriteString(": ")
			for i, v := range f.Values {
				if i == ContentMaxValues {
					b.WriteString(" and " + strconv.Itoa(len(f.Values)-i) + " more")
					break
				}
				if i > 0 {
					b.WriteString(", ")
				}
				if f.Code {
					b.WriteString("<code>")
				}
				htmlText(&b, v)
				if f.Code {
					b.WriteString("</code>")
				}
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("<p>Received ")
	htmlText(&b, d.ReceivedAt)
	b.WriteString(" as record ")
	htmlText(&b, d.ReceivedSeq)
	b.WriteString(" · <code>")
	htmlText(&b, d.EventID)
	b.WriteString("</code></p>\n")
	return b.String()
}

// htmlText writes s as HTML text: the five markup characters as
// references, everything else as is (the XML writer then replaces what
// XML cannot hold).
func htmlText(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&#34;")
		case '\'':
			b.WriteString("&#39;")
		default:
			b.WriteRune(r)
		}
	}
}
