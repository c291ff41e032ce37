package relay

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/store"
)

// readiness is GET /readyz's body.
type readiness struct {
	Ready bool `json:"ready"`
	// Store is "ok", "unreachable" or "migrations_pending".
	Store string `json:"store"`
	// Couriers are each courier's progress (couriers.Status: lag, failing
	// targets, the last error's short description, never a secret). They
	// do not decide readiness: a courier behind or failing still lets the
	// relay take appends and serve reads.
	Couriers []couriers.Status `json:"couriers"`
	// Degraded names what is wrong while the relay still serves (it does
	// not decide readiness): "federation_split_view" while a peer link is
	// stopped by a split view of its remote's log (SplitViews counts
	// them; the evidence: store.SplitViews, federation/witness.go);
	// "log_witness_split_view" while a configured external witness holds
	// a refusal of our own log's checkpoint as inconsistent (package
	// logwitness).
	Degraded   []string `json:"degraded"`
	SplitViews int      `json:"split_views"`
}

// readyTimeout bounds the store checks of one /readyz.
const readyTimeout = 5 * time.Second

// handleReady: GET /readyz → 200 {"ready":true,…} when the store answers a
// read and has every migration applied, else 503 with "ready":false and
// what failed. The cause is logged, never sent. Unlike /healthz (a failed
// liveness probe restarts the process) a 503 here only takes the process
// out of a load balancer until the store is back.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	body := readiness{Ready: true, Store: "ok", Couriers: []couriers.Status{}, Degraded: []string{}}
	if s.cfg.Couriers != nil {
		body.Couriers = append(body.Couriers, s.cfg.Couriers()...)
	}
	if _, err := s.st.CountProjects(ctx); err != nil {
		s.log.Warn("readiness: store unreachable", "err", err)
		body.Ready, body.Store = false, "unreachable"
	} else if mc, ok := s.st.(store.MigrationChecker); ok {
		switch n, err := mc.PendingMigrations(ctx); {
		case err != nil:
			s.log.Warn("readiness: migrations unreadable", "err", err)
			body.Ready, body.Store = false, "unreachable"
		case n > 0:
			s.log.Warn("readiness: migrations pending", "pending", n)
			body.Ready, body.Store = false, "migrations_pending"
		}
	}
	if body.Store == "ok" {
		if views, err := s.st.SplitViews(ctx, ""); err != nil {
			s.log.Warn("readiness: split views unreadable", "err", err)
		} else {
			witnessViews := 0
			for _, v := range views {
				if name, ok := strings.CutPrefix(v.PeerID, store.LogWitnessPeerPrefix); ok {
					// An external witness refused our own checkpoint
					// (package logwitness): degraded while that witness
					// is configured.
					if slices.Contains(s.cfg.LogWitnessNames, name) {
						witnessViews++
					}
					continue
				}
				if !v.LinkRemoved {
					body.SplitViews++
				}
			}
			if body.SplitViews > 0 {
				body.Degraded = append(body.Degraded, "federation_split_view")
			}
			if witnessViews > 0 {
				body.Degraded = append(body.Degraded, "log_witness_split_view")
			}
		}
	}
	status := http.StatusOK
	if !body.Ready {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, status, "application/json", body)
}
