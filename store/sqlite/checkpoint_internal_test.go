package sqlite

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// TestRegistryWritesAreCheckpointed: writes that are not appends (here
// tokens) reach the database file at the next idle checkpoint cycle;
// before, only appends started a checkpoint, and a relay that only minted
// tokens grew its WAL without bound.
func TestRegistryWritesAreCheckpointed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acrelay.db")
	db, err := OpenWith(context.Background(), path, nil, Options{CheckpointIdle: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// cycleAfterNow waits until a checkpoint cycle that started after the
	// call has ended: one more than the cycle possibly running now.
	cycleAfterNow := func() {
		t.Helper()
		want := db.ckCycles.Load() + 2
		for deadline := time.Now().Add(10 * time.Second); db.ckCycles.Load() < want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no checkpoint cycle ended within 10 s")
			}
		}
	}
	p, err := db.CreateProject(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	cycleAfterNow() // copies the migrations and the project
	before := size()
	sum := sha256.Sum256([]byte("x"))
	for i := range 2000 {
		if _, err := db.CreateToken(context.Background(), store.Token{ID: fmt.Sprintf("token%05d", i), ProjectID: p.ID, Scopes: []string{store.ScopeRead}, Hash: sum[:]}); err != nil {
			t.Fatal(err)
		}
	}
	cycleAfterNow()
	if got := size(); got == before {
		t.Fatalf("after 2,000 tokens and an idle checkpoint cycle the database file is still %d bytes: the WAL was not checkpointed", got)
	}
}
