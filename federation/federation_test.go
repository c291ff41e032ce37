package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// activeClaims is the sorted event ids of repo's active-claims projection.
func activeClaims(t *testing.T, r *testRelay, pid, repo string) []string {
	t.Helper()
	if _, err := r.st.ReconcileLineage(ctx, pid, 1000); err != nil {
		t.Fatal(err)
	}
	snap, err := r.st.ClaimsSnapshot(ctx, store.ClaimsQuery{ProjectID: pid, RepositoryID: repo})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range snap.Claims {
		ids = append(ids, c.EventID)
	}
	sort.Strings(ids)
	return ids
}

// TestTwoRelaysConverge: A (SQLite) and B (PostgreSQL when configured)
// linked both ways, whole project; events posted to both, interleaved and
// concurrently, end as the same event-id sets and the same active claims,
// each relay storing each record exactly once (head == count), and the
// heads stay still afterwards: a record pushed back to where it came from
// is a no-op that announces nothing (no echo loop).
func TestTwoRelaysConverge(t *testing.T) {
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", fast)
	b := startRelay(t, "B", openStore(t, pgOr(), ""), "127.0.0.1:0", fast)
	readA, readB := a.project(pid), b.project(pid)
	appendA, appendB := a.appendToken(pid), b.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)
	sb := storetest.NewSigner(t, pid).Register(t, b.st)

	// History before the links.
	for i := range 5 {
		_, raw := sa.Event(t, storetest.Spec{RepositoryID: fmt.Sprintf("repo-%d", i%2), Summary: "before"})
		a.post(appendA, raw)
	}
	a.peer(pid, b, readB, "")
	b.peer(pid, a, readA, "")

	const n = 40
	var wg sync.WaitGroup // one goroutine per signer: a Signer hands out session_seq
	wg.Go(func() {
		for i := range n {
			_, raw := sa.Event(t, storetest.Spec{RepositoryID: fmt.Sprintf("repo-%d", i%3), Summary: "from A"})
			a.post(appendA, raw)
		}
	})
	wg.Go(func() {
		for i := range n {
			_, raw := sb.Event(t, storetest.Spec{RepositoryID: fmt.Sprintf("repo-%d", i%3), Summary: "from B"})
			b.post(appendB, raw)
		}
	})
	wg.Wait()
	// Claims on both sides: the projection must agree too.
	_, claimA := sa.Claim(t, "repo-0", storetest.NewUUID(), 1, "", []string{"src"}, time.Now().Add(time.Hour))
	a.post(appendA, claimA)
	_, claimB := sb.Claim(t, "repo-0", storetest.NewUUID(), 1, "", []string{"docs"}, time.Now().Add(time.Hour))
	b.post(appendB, claimB)

	total := 5 + 2*n + 2
	converged(t, pid, total, 30*time.Second, a, b)
	if ha, hb := a.head(pid), b.head(pid); ha != int64(total) || hb != int64(total) {
		t.Fatalf("heads %d and %d, want %d each: a record was stored twice", ha, hb, total)
	}
	ca, cb := activeClaims(t, a, pid, "repo-0"), activeClaims(t, b, pid, "repo-0")
	if len(ca) != 2 || strings.Join(ca, ",") != strings.Join(cb, ",") {
		t.Fatalf("active claims differ: A %v, B %v", ca, cb)
	}
	// No echo: nothing more is stored or announced once converged.
	time.Sleep(2 * time.Second)
	if ha, hb := a.head(pid), b.head(pid); ha != int64(total) || hb != int64(total) {
		t.Fatalf("heads moved after convergence: %d, %d", ha, hb)
	}
	// The peer listing redacts the token and reports the link.
	status, body := a.do("GET", "/v1/admin/projects/"+pid+"/peers", operatorToken, nil)
	if status != http.StatusOK || strings.Contains(string(body), readB) || !strings.Contains(string(body), `"token":"[redacted]"`) {
		t.Fatalf("peer listing: %d %s", status, body)
	}
	var list struct {
		Peers []struct {
			Status struct {
				Stored, Duplicates, Refused int64
				Subscription                string
			} `json:"status"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Peers) != 1 {
		t.Fatalf("peer listing: %s", body)
	}
	st := list.Peers[0].Status
	t.Logf("A's link to B: stored %d, duplicates %d, refused %d, subscription %s", st.Stored, st.Duplicates, st.Refused, st.Subscription)
	if st.Stored != int64(n+1) || st.Refused != 0 {
		t.Fatalf("A's link stored %d (want %d, B's records), refused %d", st.Stored, n+1, st.Refused)
	}
}

// TestLineOfThree: A↔B↔C; C has no link to A, yet verifies A's events
// with A's keys as B imported them (listed by B as source "imported").
func TestLineOfThree(t *testing.T) {
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", fast)
	b := startRelay(t, "B", openStore(t, pgOr(), ""), "127.0.0.1:0", fast)
	c := startRelay(t, "C", openStore(t, "sqlite", tempDB(t, "c")), "127.0.0.1:0", fast)
	readA, readB, readC := a.project(pid), b.project(pid), c.project(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)
	sc := storetest.NewSigner(t, pid).Register(t, c.st)
	a.peer(pid, b, readB, "")
	b.peer(pid, a, readA, "")
	b.peer(pid, c, readC, "")
	c.peer(pid, b, readB, "")
	appendA, appendC := a.appendToken(pid), c.appendToken(pid)
	for range 10 {
		_, raw := sa.Event(t, storetest.Spec{})
		a.post(appendA, raw)
		_, raw = sc.Event(t, storetest.Spec{})
		c.post(appendC, raw)
	}
	converged(t, pid, 20, 30*time.Second, a, b, c)
	status, body := b.do("GET", "/v1/correspondence/keys?project_id="+pid, readB, nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"source":"imported"`) {
		t.Fatalf("B's registry: %d %s", status, body)
	}
	if k, err := c.st.GetKey(ctx, pid, sa.KeyID); err != nil || k.PublicKey != correspondence.EncodePublicKey(sa.Pub) {
		t.Fatalf("C holds A's key: %+v, %v", k, err)
	}
}
