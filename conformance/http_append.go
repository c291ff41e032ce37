package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// bodyMatrix appends one event per body_matrix entry of seed 000: 201,
// the event echoed byte for byte, a fresh increasing receipt, the unknown
// referenced ids as missing_parents, and the kind's lineage_status.
func (h *httpRun) bodyMatrix(ctx context.Context, g *Group) {
	file, err := seedVectors()
	if err != nil {
		g.fail("%v", err)
		return
	}
	var vs []kindBody
	if !decodeList(g, file["body_matrix"], &vs) {
		return
	}
	for _, v := range vs {
		body, err := canonicaljson.ParseObject(v.Body)
		if err != nil {
			g.fail("%s: %v", v.Kind, err)
			continue
		}
		_, _, err = h.append(ctx, h.event(h.repo, v.Kind, body), lineageOf(v.Kind), true)
		g.record(v.Kind, err)
	}
}

// reserialize writes e's members in reverse order with spaces: the same
// event, other bytes (spec §6: order and whitespace do not matter).
func reserialize(e *correspondence.Event) []byte {
	v := e.Value()
	var b bytes.Buffer
	b.WriteString("{ ")
	for i := len(v.Members) - 1; i >= 0; i-- {
		name, _ := json.Marshal(v.Members[i].Name)
		val, _ := canonicaljson.Canonical(v.Members[i].Value)
		b.Write(name)
		b.WriteString(" : ")
		b.Write(val)
		if i > 0 {
			b.WriteString(" ,\n")
		}
	}
	b.WriteString(" }")
	return b.Bytes()
}

// retry checks idempotent reposts and the session-fork warning (spec §7).
func (h *httpRun) retry(ctx context.Context, g *Group) {
	if len(h.posted) == 0 {
		g.fail("no event was appended")
		return
	}
	first := h.posted[0]
	check := func(name string, raw []byte) {
		r, err := h.post(ctx, raw)
		if err == nil {
			var a appendAnswer
			if err = r.decode(http.StatusOK, &a); err == nil && (a.Receipt != first.receipt || !bytes.Equal(a.Event, first.canonical)) {
				err = errors.New("the retry's receipt or event differs from the first acceptance")
			}
		}
		g.record(name, err)
	}
	check("exact retry answers 200 with the original receipt", first.canonical)
	r, err := h.post(ctx, first.canonical)
	if err == nil {
		err = checkCacheControl(r.header, "private", "no-store")
	}
	g.record("POST answers are private, no-store", err)
	var compact bytes.Buffer
	_ = json.Indent(&compact, first.canonical, "", "  ")
	check("indented retry answers 200 with the original receipt", compact.Bytes())
	ev, err := correspondence.ParseEvent(first.canonical)
	if err != nil {
		g.fail("reparse own event: %v", err)
		return
	}
	check("reordered retry answers 200 with the original receipt", reserialize(ev))

	// Two events with one (identity, device, session, session_seq).
	a := h.event(h.repo, "progress", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("fork left")}))
	b := h.event(h.repo, "progress", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("fork right")}))
	b.SessionSeq = a.SessionSeq
	_ = b.Sign(h.priv)
	_, _, err = h.append(ctx, a, "not_applicable", false)
	g.record("fork left appended", err)
	_, ans, err := h.append(ctx, b, "not_applicable", false)
	if err == nil {
		err = errors.New("no session_fork warning naming both events")
		for _, w := range ans.Warnings {
			if w.Code == "session_fork" && slices.Contains(w.EventIDs, a.ID) && slices.Contains(w.EventIDs, b.ID) {
				err = nil
			}
		}
	}
	g.record("fork right appended with a session_fork warning", err)
}
