package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/acrelay/acrelay/correspondence"
)

// voice reads the body-matrix repository's voice (spec §9).
func (h *httpRun) voice(ctx context.Context, g *Group) {
	r, err := h.do(ctx, "GET", "/v1/correspondence/voice?"+h.query(), h.ro, nil)
	if err != nil {
		g.fail("%v", err)
		return
	}
	var a struct {
		Protocol         string  `json:"protocol"`
		Scope            string  `json:"scope"`
		EvaluatedAt      string  `json:"evaluated_at"`
		Cursor           *string `json:"cursor"`
		ProjectionStatus string  `json:"projection_status"`
		Truncated        bool    `json:"truncated"`
		RecentEvents     []struct {
			Event   json.RawMessage `json:"event"`
			Receipt receipt         `json:"receipt"`
		} `json:"recent_events"`
		ActiveClaims []json.RawMessage `json:"active_claims"`
		Conflicts    struct {
			MissingParents []struct {
				EventID          string   `json:"event_id"`
				MissingParentIDs []string `json:"missing_parent_ids"`
			} `json:"missing_parents"`
			SessionForks []struct {
				EventIDs []string `json:"event_ids"`
			} `json:"session_forks"`
			OverlappingClaims []json.RawMessage `json:"overlapping_claims"`
		} `json:"conflicts"`
	}
	if err := r.decode(http.StatusOK, &a); err != nil {
		g.fail("GET voice: %v", err)
		return
	}
	g.record("headers", checkHeaders(r.header, false))
	g.record("envelope", func() error {
		if a.Protocol != correspondence.Protocol || a.Scope != "project_private" || a.ProjectionStatus != "complete" || a.Truncated ||
			!validTimestamp(a.EvaluatedAt) || a.Cursor == nil || a.ActiveClaims == nil || a.Conflicts.OverlappingClaims == nil {
			return fmt.Errorf("protocol %q scope %q projection_status %q truncated %v", a.Protocol, a.Scope, a.ProjectionStatus, a.Truncated)
		}
		return nil
	}())
	g.record("recent_events newest first", func() error {
		if len(a.RecentEvents) != len(h.posted) {
			return fmt.Errorf("%d recent events, want %d", len(a.RecentEvents), len(h.posted))
		}
		for i, rec := range a.RecentEvents {
			p := h.posted[len(h.posted)-1-i]
			if !bytes.Equal(rec.Event, p.canonical) || rec.Receipt != p.receipt {
				return fmt.Errorf("recent event %d is not the %d-th newest append", i, i+1)
			}
		}
		return nil
	}())
	g.record("missing_parents lists the unknown parents", func() error {
		want := map[string][]string{}
		for _, p := range h.posted {
			if len(p.refs) > 0 {
				want[p.id] = p.refs
			}
		}
		got := map[string][]string{}
		for _, m := range a.Conflicts.MissingParents {
			got[m.EventID] = m.MissingParentIDs
		}
		for id, refs := range want {
			if !sameSet(got[id], refs) {
				return fmt.Errorf("%d rows, want one per event with unknown parents (%d)", len(got), len(want))
			}
		}
		return nil
	}())
	g.record("session_forks lists the fork", func() error {
		for _, f := range a.Conflicts.SessionForks {
			if len(f.EventIDs) == 2 {
				return nil
			}
		}
		return errors.New("no session fork row with the two forked events")
	}())
}
