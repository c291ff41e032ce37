package tlogwitness_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	whttp "github.com/transparency-dev/witness/client/http"
	tdwitness "github.com/transparency-dev/witness/witness"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// otherLog is another C2SP log, built with x/mod's tlog (the Go checksum
// database's tree code), its checkpoints signed with a note key named
// after its origin.
type otherLog struct {
	t      *testing.T
	origin string
	signer note.Signer
	vkey   string
	stored []tlog.Hash
	n      int64
	leaf   string // the leaves' text: another text is another history
}

func newOtherLog(t *testing.T, origin, leaf string) *otherLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &otherLog{t: t, origin: origin, signer: s, vkey: vkey, leaf: leaf}
}

func (l *otherLog) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = l.stored[x]
		}
		return out, nil
	})
}

// grow appends leaves up to size n.
func (l *otherLog) grow(n int64) *otherLog {
	for ; l.n < n; l.n++ {
		hs, err := tlog.StoredHashes(l.n, fmt.Appendf(nil, "%s %d", l.leaf, l.n), l.reader())
		if err != nil {
			l.t.Fatal(err)
		}
		l.stored = append(l.stored, hs...)
	}
	return l
}

// checkpoint is the log's signed checkpoint at its size (C2SP
// tlog-checkpoint).
func (l *otherLog) checkpoint() []byte {
	root, err := tlog.TreeHash(l.n, l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: l.origin + "\n" + strconv.FormatInt(l.n, 10) + "\n" + root.String() + "\n"}, l.signer)
	if err != nil {
		l.t.Fatal(err)
	}
	return msg
}

// proof is the RFC 6962 consistency proof from old to the log's size,
// as the client takes it.
func (l *otherLog) proof(old int64) [][]byte {
	p, err := tlog.ProveTree(l.n, old, l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	out := make([][]byte, len(p))
	for i, h := range p {
		out[i] = h[:]
	}
	return out
}

// TestTransparencyDevWitnessClient: transparency-dev/witness's HTTP
// client submits another log's checkpoints to acrelay's
// /v1/witness/add-checkpoint. A first checkpoint and a grown one with
// its consistency proof come back cosigned: the answer appended to the
// checkpoint opens under the log's key and acrelay's published witness
// key read as cosignature/v1 by transparency-dev/formats, timestamped
// now. C2SP's refusals reach the client as its own errors: 409 with the
// size held (ErrCheckpointStale and the size), 422 for a checkpoint of
// another history (a fork at a larger size with its own proof, another
// root at the size held, a tampered proof: ErrInvalidProof), 404 for an
// origin acrelay does not witness (ErrUnknownLog), 403 for a checkpoint
// signed by another key (ErrNoValidSignature), 400 for old above the
// size (ErrOldSizeInvalid). A refused checkpoint moves nothing: the
// size held stays the last one cosigned.
func TestTransparencyDevWitnessClient(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lg := newOtherLog(t, "log.example/interop", "entry")
	lv, err := note.NewVerifier(lg.vkey)
	if err != nil {
		t.Fatal(err)
	}
	h := relay.New(st, relay.Config{PublicURL: "http://relay.test", WitnessLogs: map[string][]note.Verifier{lg.origin: {lv}}})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/v1/witness-key")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wv, err := fnote.NewVerifierForCosignatureV1(strings.TrimSpace(string(body)))
	if err != nil || resp.StatusCode != http.StatusOK || wv.Name() != "relay.test/witness" {
		t.Fatalf("witness key %d %q: %v", resp.StatusCode, body, err)
	}

	prefix, _ := url.Parse(srv.URL + "/v1/witness")
	w := whttp.NewWitness(prefix, srv.Client())
	cosigned := func(cp, sigs []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		n, err := note.Open(append(cp, sigs...), note.VerifierList(lv, wv))
		if err != nil || len(n.Sigs) != 2 || n.Sigs[1].Name != wv.Name() || n.Sigs[1].Hash != wv.KeyHash() {
			t.Fatalf("cosigned checkpoint %q: %+v, %v", append(cp, sigs...), n, err)
		}
		at, err := fnote.CoSigV1Timestamp(n.Sigs[1])
		if err != nil || time.Since(at) > time.Minute || time.Until(at) > time.Minute {
			t.Fatalf("cosignature time %v: %v", at, err)
		}
	}
	refused := func(want error, wantSize uint64, sigs []byte, size uint64, err error) {
		t.Helper()
		if !errors.Is(err, want) || size != wantSize || sigs != nil {
			t.Fatalf("Update = %q, %d, %v; want %v with size %d", sigs, size, err, want, wantSize)
		}
	}

	cp := lg.grow(5).checkpoint()
	sigs, _, err := w.Update(ctx, 0, cp, nil)
	cosigned(cp, sigs, err)
	cp = lg.grow(12).checkpoint()
	sigs, size, err := w.Update(ctx, 0, cp, nil)
	refused(tdwitness.ErrCheckpointStale, 5, sigs, size, err)
	sigs, _, err = w.Update(ctx, size, cp, lg.proof(int64(size)))
	cosigned(cp, sigs, err)

	// Another history under the same key: its own consistent proof from
	// 12, and a checkpoint of size 12 with another root.
	fork := newOtherLog(t, lg.origin, "rewritten")
	fork.signer = lg.signer
	fork.grow(20)
	sigs, size, err = w.Update(ctx, 12, fork.checkpoint(), fork.proof(12))
	refused(tdwitness.ErrInvalidProof, 0, sigs, size, err)
	fork.n, fork.stored = 12, fork.stored[:tlog.StoredHashCount(12)]
	sigs, size, err = w.Update(ctx, 12, fork.checkpoint(), nil)
	refused(tdwitness.ErrInvalidProof, 0, sigs, size, err)
	// The honest log's growth with one proof hash altered.
	lg.grow(30)
	proof := lg.proof(12)
	proof[0] = append([]byte(nil), proof[0]...)
	proof[0][0] ^= 1
	sigs, size, err = w.Update(ctx, 12, lg.checkpoint(), proof)
	refused(tdwitness.ErrInvalidProof, 0, sigs, size, err)

	// Nothing refused moved the state: 12 is still the size held.
	sigs, size, err = w.Update(ctx, 0, lg.checkpoint(), nil)
	refused(tdwitness.ErrCheckpointStale, 12, sigs, size, err)
	cp = lg.checkpoint()
	sigs, _, err = w.Update(ctx, 12, cp, lg.proof(12))
	cosigned(cp, sigs, err)

	stranger := newOtherLog(t, "stranger.example/log", "entry").grow(3)
	sigs, size, err = w.Update(ctx, 0, stranger.checkpoint(), nil)
	refused(tdwitness.ErrUnknownLog, 0, sigs, size, err)
	impostor := newOtherLog(t, lg.origin, "entry").grow(31) // the origin, another key
	sigs, size, err = w.Update(ctx, 30, impostor.checkpoint(), impostor.proof(30))
	refused(tdwitness.ErrNoValidSignature, 0, sigs, size, err)
	sigs, size, err = w.Update(ctx, 31, lg.checkpoint(), nil)
	refused(tdwitness.ErrOldSizeInvalid, 0, sigs, size, err)
}
