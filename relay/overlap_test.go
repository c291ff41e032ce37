package relay_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gatom "github.com/mmcdole/gofeed/atom"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/sqlite"
)

// newEnvOn is newEnv on a given store.
func newEnvOn(t *testing.T, st store.Store) *env {
	t.Helper()
	t.Cleanup(func() { st.Close() })
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test",
		Metrics: relay.NewMetrics(prometheus.NewRegistry())})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, srv: srv, url: srv.URL}
}

// TestCurrentDocumentOverlap: the overlap rule of the current document
// (relay/topics.go currentPage, docs/websub.md "No reader misses
// entries") at the edges 0, 1, 199, 200, 201, 399, 400, 401 records, on
// both engines, for a public project's topic read without a token, the
// same topic read with a token, and a feed capability: the document holds
// the records at positions [200·max(n/200-1, 0), n) — always the newest
// min(n, 200) at least — its prev-archive is archive n/200-2 (none below
// 400 records), and the walk along prev-archive meets every record once,
// in receipt order.
func TestCurrentDocumentOverlap(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			var st store.Store
			var err error
			if engine == "postgres" {
				st, err = postgres.Open(context.Background(), pgtest.FreshDatabase(t), slog.New(slog.DiscardHandler))
			} else {
				st, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
			}
			if err != nil {
				t.Fatal(err)
			}
			testOverlap(t, newEnvOn(t, st))
		})
	}
}

func testOverlap(t *testing.T, e *env) {
	pid, tok := e.newProjectVisible("public")
	a := e.newAgent(pid, tok)
	r := e.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, r, 201)
	capURL := strings.TrimPrefix(r.json(t)["url"].(string), "http://relay.test")
	capBase := strings.TrimSuffix(capURL, ".atom?repository_id=repo")
	topic := "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=repo"
	var ids []string
	for _, n := range []int{0, 1, 199, 200, 201, 399, 400, 401} {
		for len(ids) < n {
			ev := a.intent("repo", "record "+strconv.Itoa(len(ids)))
			mustStatus(t, e.post(a, ev), 201)
			ids = append(ids, ev.ID)
			if len(ids)%97 == 0 { // another repository's records are in no document
				mustStatus(t, e.post(a, a.intent("other", "o")), 201)
			}
		}
		start := max(n/200-1, 0) * 200
		for _, doc := range []struct{ name, url, tok, archives string }{
			{"public topic", topic, "", "/v1/correspondence/archives/"},
			{"topic with token", topic, tok, "/v1/correspondence/archives/"},
			{"capability", capURL, "", capBase + "/archives/"},
		} {
			t.Run(strconv.Itoa(n)+"/"+doc.name, func(t *testing.T) {
				get := func(u string) *gatom.Feed {
					t.Helper()
					r := e.do("GET", u, doc.tok, nil)
					mustStatus(t, r, 200)
					f, err := (&gatom.Parser{}).Parse(bytes.NewReader(r.Body))
					if err != nil {
						t.Fatal(err)
					}
					return f
				}
				f := get(doc.url)
				var got []string
				for _, it := range f.Entries {
					got = append(got, it.ID)
				}
				if want := ids[start:n]; strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("current holds %d entries, want positions [%d, %d)", len(got), start, n)
				}
				if len(got) < min(n, 200) {
					t.Fatalf("current holds %d entries, fewer than the newest %d", len(got), min(n, 200))
				}
				prev := strings.TrimPrefix(linkOf(f, "prev-archive"), "http://relay.test")
				wantPrev := ""
				if k := n/200 - 2; k >= 0 {
					wantPrev = doc.archives + strconv.Itoa(k) + ".atom"
					if doc.archives == "/v1/correspondence/archives/" {
						wantPrev += "?project_id=" + pid + "&repository_id=repo"
					}
				}
				if prev != wantPrev {
					t.Fatalf("prev-archive %q, want %q", prev, wantPrev)
				}
				walk := got
				for prev != "" {
					af := get(prev)
					if cur := strings.TrimPrefix(linkOf(af, "current"), "http://relay.test"); cur != doc.url {
						t.Fatalf("archive %s: current %q, want %q", prev, cur, doc.url)
					}
					var page []string
					for _, it := range af.Entries {
						page = append(page, it.ID)
					}
					walk = append(page, walk...)
					prev = strings.TrimPrefix(linkOf(af, "prev-archive"), "http://relay.test")
				}
				if strings.Join(walk, ",") != strings.Join(ids[:n], ",") {
					t.Fatalf("the walk met %d records, want each of the %d once, in order", len(walk), n)
				}
			})
		}
	}
}
