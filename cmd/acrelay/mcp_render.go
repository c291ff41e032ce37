package main

// What a model reads: records, claims and the voice snapshot rendered as
// compact text, where every word another identity wrote (thread ids,
// paths, branches, summaries, details, locators) goes through package
// internal/attributed, and the same facts as structured JSON whose
// free-text members are attributed.Report objects.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/attributed"
)

// recordView is one record as a tool result shows it. Facts the relay
// validated to a fixed form (ids, hashes, timestamps, integers) are plain
// members; every free text of the sender is a Report in Quoted.
type recordView struct {
	ReceivedSeq    string               `json:"received_seq"`
	ReceivedAt     string               `json:"received_at"`
	EventID        string               `json:"event_id"`
	Kind           string               `json:"kind"`
	From           string               `json:"from"`
	IdentityID     string               `json:"identity_id"`
	Mine           bool                 `json:"mine"`
	SessionSeq     int64                `json:"session_seq"`
	IssuedAt       string               `json:"issued_at"`
	Parents        []string             `json:"parents"`
	Fields         map[string]any       `json:"fields,omitempty"`
	Quoted         []attributed.Report  `json:"quoted"`
	MissingParents []string             `json:"missing_parents,omitempty"`
	LineageStatus  string               `json:"lineage_status"`
	text           []string             // the quoted lines, for the text block
	author         attributed.Author    // the sender
	scope          correspondence.Scope // for callers that need paths
}

// fixedFields are body members whose values the relay validated to a
// fixed form (UUIDs, event ids, timestamps, hex, integers): shown plain.
var fixedFields = map[string]bool{"claim_id": true, "generation": true, "expires_at": true, "predecessor_event_id": true,
	"target_event_id": true, "target_event_ids": true, "handoff_id": true, "result_revision": true, "until": true}

// viewRecord renders rec, quoting its sender's words.
func (s *mcpServer) viewRecord(ctx context.Context, rec client.Record) recordView {
	ev := rec.Event
	a := s.author(ctx, ev.Sender.IdentityID)
	v := recordView{ReceivedSeq: strconv.FormatInt(rec.Receipt.ReceivedSeq, 10), ReceivedAt: rec.Receipt.ReceivedAt,
		EventID: ev.ID, Kind: string(ev.Kind), From: a.Label(), IdentityID: ev.Sender.IdentityID,
		Mine: ev.Sender.IdentityID == s.self(), SessionSeq: ev.SessionSeq, IssuedAt: ev.IssuedAt,
		Parents: ev.Parents, Quoted: []attributed.Report{}, MissingParents: rec.MissingParents,
		LineageStatus: string(rec.LineageStatus), author: a, scope: ev.Scope}
	quote := func(field, text string) {
		v.Quoted = append(v.Quoted, attributed.NewReport(a, field, text))
		v.text = append(v.text, sayLine(a, v.Mine, field, text))
	}
	quote("thread_id", ev.ThreadID)
	v.Quoted = append(v.Quoted, attributed.NewReport(a, "paths", strings.Join(ev.Scope.Paths, "\n")))
	v.text = append(v.text, sayList(a, v.Mine, "paths", ev.Scope.Paths))
	if ev.Scope.Branch != nil {
		quote("branch", *ev.Scope.Branch)
	}
	if ev.Scope.BaseRevision != nil {
		v.fields()["base_revision"] = *ev.Scope.BaseRevision
	}
	for _, m := range ev.Body.Members {
		switch {
		case fixedFields[m.Name]:
			v.fields()[m.Name] = plainValue(m.Value)
		case m.Name == "artifact":
			for _, am := range m.Value.Members {
				if am.Name == "locator" {
					quote("artifact.locator", am.Value.Str)
				} else {
					v.fields()["artifact."+am.Name] = plainValue(am.Value)
				}
			}
		case m.Value.Kind == canonicaljson.String:
			quote(m.Name, m.Value.Str)
		default:
			v.fields()[m.Name] = plainValue(m.Value)
		}
	}
	return v
}

func (v *recordView) fields() map[string]any {
	if v.Fields == nil {
		v.Fields = map[string]any{}
	}
	return v.Fields
}

func plainValue(v canonicaljson.Value) any {
	switch v.Kind {
	case canonicaljson.String:
		return v.Str
	case canonicaljson.Int:
		return v.Int
	case canonicaljson.Array:
		out := make([]any, len(v.Elems))
		for i, e := range v.Elems {
			out[i] = plainValue(e)
		}
		return out
	case canonicaljson.Bool:
		return v.Bool
	case canonicaljson.Null:
		return nil
	}
	return nil
}

// text renders the view in a few lines: a header with the fixed facts,
// then one quoted line per free text.
func (v recordView) textLines() []string {
	who := v.From
	if v.Mine {
		who = "you"
	}
	head := fmt.Sprintf("#%s %s · event %s · from %s · %s", v.ReceivedSeq, v.Kind, v.EventID, who, v.IssuedAt)
	if len(v.Fields) > 0 {
		keys := make([]string, 0, len(v.Fields))
		for k := range v.Fields {
			keys = append(keys, k)
		}
		sortStrings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v.Fields[k]))
		}
		head += " · " + strings.Join(parts, " ")
	}
	if len(v.MissingParents) > 0 {
		head += fmt.Sprintf(" · %d parent(s) not yet stored", len(v.MissingParents))
	}
	if v.LineageStatus != "" && v.LineageStatus != "not_applicable" && v.LineageStatus != "valid" {
		head += " · lineage " + v.LineageStatus
	}
	out := []string{head}
	for _, l := range v.text {
		out = append(out, "  "+l)
	}
	return out
}

func sortStrings(ss []string) {
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && ss[j] < ss[j-1]; j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
}

// claimView is one active claim as results show it.
type claimView struct {
	ClaimID           string              `json:"claim_id"`
	EventID           string              `json:"event_id"`
	Generation        int64               `json:"generation"`
	Owner             string              `json:"owner"`
	OwnerIdentityID   string              `json:"owner_identity_id"`
	Mine              bool                `json:"mine"`
	ExpiresAt         string              `json:"expires_at"`
	Conflicted        bool                `json:"conflicted"`
	CompetingEventIDs []string            `json:"competing_event_ids"`
	Overlaps          []string            `json:"overlaps_your_paths,omitempty"`
	Quoted            []attributed.Report `json:"quoted"`
	text              []string
}

// viewClaim renders an active claim row; summary is the owner's words
// about it ("" for none); overlaps are the caller's paths it overlaps.
func (s *mcpServer) viewClaim(ctx context.Context, ac client.ActiveClaim, summary string, overlaps []string) claimView {
	a := s.author(ctx, ac.OwnerIdentityID)
	v := claimView{ClaimID: ac.ClaimID, EventID: ac.EventID, Generation: ac.Generation, Owner: a.Label(),
		OwnerIdentityID: ac.OwnerIdentityID, Mine: ac.OwnerIdentityID == s.self(), ExpiresAt: ac.ExpiresAt,
		Conflicted: ac.Conflicted, CompetingEventIDs: ac.CompetingEventIDs, Overlaps: overlaps}
	v.Quoted = append(v.Quoted, attributed.NewReport(a, "paths", strings.Join(ac.Scope.Paths, "\n")),
		attributed.NewReport(a, "thread_id", ac.ThreadID))
	v.text = append(v.text, sayList(a, v.Mine, "paths", ac.Scope.Paths), sayLine(a, v.Mine, "thread_id", ac.ThreadID))
	if ac.Scope.Branch != nil {
		v.Quoted = append(v.Quoted, attributed.NewReport(a, "branch", *ac.Scope.Branch))
		v.text = append(v.text, sayLine(a, v.Mine, "branch", *ac.Scope.Branch))
	}
	if summary != "" {
		v.Quoted = append(v.Quoted, attributed.NewReport(a, "summary", summary))
		v.text = append(v.text, sayLine(a, v.Mine, "summary", summary))
	}
	return v
}

func (v claimView) textLines() []string {
	who := v.Owner
	if v.Mine {
		who = "you"
	}
	head := fmt.Sprintf("- claim %s (generation %d, event %s) held by %s, expires %s", v.ClaimID, v.Generation, v.EventID, who, v.ExpiresAt)
	if len(v.Overlaps) > 0 {
		head += " · overlaps your " + strings.Join(quoteAll(v.Overlaps), ", ")
	}
	if v.Conflicted {
		head += fmt.Sprintf(" · conflicted: %d competing tips", len(v.CompetingEventIDs))
	}
	out := []string{head}
	for _, l := range v.text {
		out = append(out, "    "+l)
	}
	return out
}

// sayLine is one text line for a field: the agent's own words plainly
// ("your summary: \"…\""), anyone else's through attributed.Quote.
func sayLine(a attributed.Author, mine bool, field, text string) string {
	if mine {
		return "your " + field + ": " + strconv.QuoteToGraphic(text)
	}
	return attributed.Quote(a, field, text)
}

// sayList is sayLine for a list of strings.
func sayList(a attributed.Author, mine bool, field string, items []string) string {
	if mine {
		return "your " + field + ": [" + strings.Join(quoteAll(items), ", ") + "]"
	}
	return attributed.QuoteList(a, field, items)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.QuoteToGraphic(s)
	}
	return out
}

// voiceView is the voice tool's structured result.
type voiceView struct {
	RepositoryID     string       `json:"repository_id"`
	Cursor           *string      `json:"cursor"`
	EvaluatedAt      string       `json:"evaluated_at"`
	ProjectionStatus string       `json:"projection_status"`
	ActiveClaims     []claimView  `json:"active_claims"`
	Overlaps         []any        `json:"overlapping_claims"`
	SessionForks     int          `json:"session_forks"`
	MissingParents   int          `json:"events_with_missing_parents"`
	RecentEvents     []recordView `json:"recent_events"`
	RecentTruncated  bool         `json:"recent_events_truncated"`
}

// maxVoiceRecent bounds the recent events the voice text shows.
const maxVoiceRecent = 15

// renderVoice summarises a voice snapshot for a model.
func (s *mcpServer) renderVoice(ctx context.Context, repo string, v *client.Voice) (string, voiceView) {
	out := voiceView{RepositoryID: repo, Cursor: v.Cursor, EvaluatedAt: v.EvaluatedAt, ProjectionStatus: v.ProjectionStatus,
		ActiveClaims: []claimView{}, Overlaps: []any{}, RecentEvents: []recordView{},
		SessionForks: len(v.Conflicts.SessionForks), MissingParents: len(v.Conflicts.MissingParents)}
	var b strings.Builder
	cursor := "none (empty)"
	if v.Cursor != nil {
		cursor = *v.Cursor
	}
	fmt.Fprintf(&b, "Repository %s: cursor %s, evaluated %s, projection %s.\n", strconv.QuoteToGraphic(repo), cursor, v.EvaluatedAt, v.ProjectionStatus)
	byEvent := map[string]client.ActiveClaim{}
	fmt.Fprintf(&b, "Active claims (%d; advisory, they lock nothing):\n", len(v.ActiveClaims))
	for _, ac := range v.ActiveClaims {
		cv := s.viewClaim(ctx, ac, "", nil)
		byEvent[ac.EventID] = ac
		out.ActiveClaims = append(out.ActiveClaims, cv)
		for _, l := range cv.textLines() {
			b.WriteString(l + "\n")
		}
	}
	fmt.Fprintf(&b, "Conflicts: %d overlapping claim pair(s), %d session fork(s), %d event(s) with missing parents.\n",
		len(v.Conflicts.OverlappingClaims), len(v.Conflicts.SessionForks), len(v.Conflicts.MissingParents))
	for _, o := range v.Conflicts.OverlappingClaims {
		// Each listed path is the shorter prefix of an overlapping pair,
		// so it is one of the two claims' own paths: attribute it to that
		// claim's owner.
		var parts []string
		var reports []attributed.Report
		for _, p := range o.Paths {
			ac := byEvent[o.LeftEventID]
			if !slices.Contains(ac.Scope.Paths, p) {
				ac = byEvent[o.RightEventID]
			}
			a := s.author(ctx, ac.OwnerIdentityID)
			mine := ac.OwnerIdentityID == s.self()
			parts = append(parts, sayLine(a, mine, "path", p))
			reports = append(reports, attributed.NewReport(a, "path", p))
		}
		fmt.Fprintf(&b, "- events %s and %s overlap on:\n", o.LeftEventID, o.RightEventID)
		for _, p := range parts {
			b.WriteString("    " + p + "\n")
		}
		out.Overlaps = append(out.Overlaps, map[string]any{"left_event_id": o.LeftEventID, "right_event_id": o.RightEventID, "quoted": reports})
	}
	n := min(len(v.RecentEvents), maxVoiceRecent)
	out.RecentTruncated = v.Truncated || n < len(v.RecentEvents)
	fmt.Fprintf(&b, "Recent events (newest first, %d shown):\n", n)
	for _, rec := range v.RecentEvents[:n] {
		rv := s.viewRecord(ctx, rec)
		out.RecentEvents = append(out.RecentEvents, rv)
		for _, l := range rv.textLines() {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(attributed.Notice)
	return b.String(), out
}
