package correspondence_test

import (
	"errors"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

func TestTypedAccessors(t *testing.T) {
	a, b := eventID(1), eventID(2)
	body := mustParse(t, []byte(`{"claim_id":"66666666-6666-4666-8666-666666666666","generation":4,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`))
	raw, _ := baseEvent(t, correspondence.KindClaimRenew, body, []string{b, a}).CanonicalJSON()
	e, err := correspondence.ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := e.Claim()
	want := correspondence.ClaimFields{ClaimID: "66666666-6666-4666-8666-666666666666", Generation: 4, PredecessorEventID: a, ExpiresAt: "2026-07-19T14:00:00.000Z"}
	if !ok || c != want {
		t.Errorf("Claim = %+v %v", c, ok)
	}
	if got := e.ReferencedEventIDs(); len(got) != 1 || got[0] != a {
		t.Errorf("ReferencedEventIDs = %v", got)
	}
	if e.HandoffID() != "" || len(e.Parents) != 2 || e.Parents[0] != b || e.SessionSeq != 1 ||
		*e.Scope.Branch != "codex/renaissance-correspondence" || e.Scope.Paths[1] != "docs/specs" ||
		e.Sender.SigningKeyID != "33333333-3333-4333-8333-333333333333" || e.IssuedAt != "2026-07-19T10:00:00.000Z" {
		t.Errorf("typed event = %+v", e)
	}
	hb := mustParse(t, []byte(`{"summary":"s","next_safe_action":"n","handoff_id":"77777777-7777-4777-8777-777777777777"}`))
	raw, _ = baseEvent(t, correspondence.KindHandoff, hb, nil).CanonicalJSON()
	h, err := correspondence.ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h.HandoffID() != "77777777-7777-4777-8777-777777777777" || h.ReferencedEventIDs() != nil {
		t.Errorf("handoff accessors: %q %v", h.HandoffID(), h.ReferencedEventIDs())
	}
	if _, ok := h.Claim(); ok {
		t.Error("Claim ok for handoff")
	}
	nb := canonicaljson.NullValue()
	raw, _ = canonicaljson.Canonical(edit(t, h.Value(), "/scope/base_revision", &nb))
	if n, err := correspondence.ParseEvent(raw); err != nil || n.Scope.BaseRevision != nil {
		t.Errorf("null base_revision: %v", err)
	}
}

func TestParseEventProfileError(t *testing.T) {
	for _, in := range []string{`{"a":1,"a":2}`, `[]`, `{"n":1.5}`, ``} {
		_, err := correspondence.ParseEvent([]byte(in))
		var pe *canonicaljson.ProfileError
		if !errors.As(err, &pe) {
			t.Errorf("ParseEvent(%q) err = %v, want ProfileError", in, err)
		}
	}
	_, err := correspondence.ParseEvent([]byte(`{}`))
	var ve *correspondence.ValidationError
	if !errors.As(err, &ve) || ve.Code != "event_invalid" || len(ve.Issues) != 14 {
		t.Errorf("empty object: %v, %d issues", err, len(issuesOf(err)))
	}
}
