package relay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

// BenchmarkPostEvent measures the whole POST path in process (no network):
// auth, strict parse, validation, signature, group-committed durable
// append, response. Parallel over GOMAXPROCS×4 goroutines.
func BenchmarkPostEvent(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	p, _ := registry.CreateProject(ctx, st, "")
	_, tok, _ := registry.CreateToken(ctx, st, p.ID, []string{store.ScopeRead, store.ScopeAppend})
	ident, _ := registry.CreateIdentity(ctx, st, p.ID, "", "bench")
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, err := registry.AddKey(ctx, st, ident, "", correspondence.EncodePublicKey(pub))
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([][]byte, b.N)
	device := newUUID()
	for i := range bodies {
		ev := &correspondence.Event{ProjectID: p.ID, RepositoryID: "repo:bench", ThreadID: "t" + strconv.Itoa(i%16),
			Sender: correspondence.Sender{IdentityID: ident.ID, SigningKeyID: key.ID, DeviceID: device, SessionID: device},
			Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: int64(i + 1),
			IssuedAt: "2026-11-30T12:00:00.000Z", Scope: correspondence.Scope{Paths: []string{"packages/sdk", "docs"}},
			Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("progress report " + strconv.Itoa(i))})}
		if err := ev.Sign(priv); err != nil {
			b.Fatal(err)
		}
		bodies[i], _ = ev.CanonicalJSON()
	}
	h := relay.New(st, relay.Config{PublicURL: "http://relay.test"}).Handler()
	var next atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			req := httptest.NewRequest("POST", "/v1/correspondence/events", bytes.NewReader(bodies[i]))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				b.Errorf("status %d: %s", rec.Code, rec.Body.Bytes())
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
