// Package storetest is the one behavioural suite every store dialect runs
// (store/sqlite always, store/postgres when a database is provided), plus
// helpers to build real signed events (NewSigner, Signer.Event,
// Signer.Claim) that other packages' tests reuse. No mocks: each subtest
// opens a fresh real store.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// Run runs the whole suite; open must return a fresh, empty store and
// arrange its Close with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"registry/projects", testProjects},
		{"registry/identities", testIdentities},
		{"registry/keys", testKeys},
		{"registry/tokens", testTokens},
		{"registry/settings", testSettings},
		{"append/created_and_exact_retry", testAppendCreatedAndRetry},
		{"append/collision", testAppendCollision},
		{"append/unknown_project", testAppendUnknownProject},
		{"append/sender_not_active", testAppendSenderNotActive},
		{"append/retry_after_revocation", testRetryAfterRevocation},
		{"append/received_seq_per_project", testReceivedSeq},
		{"events/paging", testEventsPaging},
		{"events/missing_parents", testMissingParents},
		{"append/session_fork", testSessionFork},
		{"lineage/vectors", testLineageVectors},
		{"lineage/pending_chain", testPendingChain},
		{"lineage/non_claim_predecessor", testNonClaimPredecessor},
		{"append/concurrent", testConcurrentAppends},
		{"append/stream_coordination", testStreamCoordination},
		{"couriers/cursors", testCourierCursors},
		{"couriers/leases", testCourierLeases},
		{"couriers/lease_read_then_take", testCourierLeaseRead},
		{"couriers/lease_reclaim", testCourierLeaseReclaim},
		{"couriers/relay_lease", testRelayLease},
		{"couriers/backoff", testCourierBackoff},
		{"feed", testFeed},
		{"advances", testAdvances},
		{"advances/peer_wakes", testPeerWakes},
		{"handoffs", testHandoffs},
		{"claims/snapshot", testClaimsSnapshot},
		{"claims/path_filter", testClaimsPathFilter},
		{"claims/competing", testClaimsCompeting},
		{"claims/expiry", testClaimsExpiry},
		{"claims/cap", testClaimsCap},
		{"voice/recent", testVoiceRecent},
		{"voice/session_forks", testVoiceSessionForks},
		{"voice/claims", testVoiceClaims},
		{"websub/verifications", testWebSubVerifications},
		{"websub/activate_and_renew", testWebSubActivate},
		{"websub/leases", testWebSubLeases},
		{"websub/delete", testWebSubDelete},
	}
	tests = append(tests, feedTests...)
	tests = append(tests, federationTests...)
	tests = append(tests, limitsTests...)
	tests = append(tests, webSubScanTests...)
	tests = append(tests, treeTests...)
	tests = append(tests, cosignatureTests...)
	tests = append(tests, logWitnessTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func must[T any](t *testing.T, what string) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// checkDBTime asserts a database time is UTC, millisecond precise and
// within a minute of the test's clock.
func checkDBTime(t *testing.T, what string, at time.Time) {
	t.Helper()
	if at.Location() != time.UTC {
		t.Errorf("%s %v: location %v, want UTC", what, at, at.Location())
	}
	if !at.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("%s %v: not millisecond precision", what, at)
	}
	if d := time.Since(at); d < -time.Minute || d > time.Minute {
		t.Errorf("%s %v: %v away from now", what, at, d)
	}
}

var ctx = context.Background()
