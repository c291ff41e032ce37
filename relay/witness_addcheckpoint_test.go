package relay_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/relay"
)

// otherLog is another C2SP log, built with x/mod's tlog (the Go checksum
// database's tree code) and signed with a note key named after its
// origin: the client side of a log that submits to a witness.
type otherLog struct {
	t      *testing.T
	origin string
	signer note.Signer
	vkey   string
	stored []tlog.Hash
	n      int64
	forked bool // leaves after a fork differ
}

func newOtherLog(t *testing.T, origin string) *otherLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{3}, 32)), origin)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	return &otherLog{t: t, origin: origin, signer: s, vkey: vkey}
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
		leaf := fmt.Sprintf("entry %d", l.n)
		if l.forked {
			leaf += " (forked)"
		}
		hs, err := tlog.StoredHashes(l.n, []byte(leaf), l.reader())
		if err != nil {
			l.t.Fatal(err)
		}
		l.stored = append(l.stored, hs...)
	}
	return l
}

func (l *otherLog) root(n int64) tlog.Hash {
	if n == 0 {
		return sha256.Sum256(nil)
	}
	h, err := tlog.TreeHash(n, l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	return h
}

func (l *otherLog) checkpoint(n int64, s note.Signer) []byte {
	msg, err := note.Sign(&note.Note{Text: l.origin + "\n" + strconv.FormatInt(n, 10) + "\n" + l.root(n).String() + "\n"}, s)
	if err != nil {
		l.t.Fatal(err)
	}
	return msg
}

// request is an add-checkpoint body from old to the log's size.
func (l *otherLog) request(old int64) []byte {
	var b strings.Builder
	b.WriteString("old " + strconv.FormatInt(old, 10) + "\n")
	if old > 0 && old < l.n {
		p, err := tlog.ProveTree(l.n, old, l.reader())
		if err != nil {
			l.t.Fatal(err)
		}
		for _, h := range p {
			b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
		}
	}
	b.WriteString("\n")
	b.Write(l.checkpoint(l.n, l.signer))
	return []byte(b.String())
}

// TestWitnessAddCheckpoint: the relay as a C2SP tlog-witness of a log its
// operator lists. Checkpoints of a log built with x/mod's tlog are
// cosigned (the cosignature verified with transparency-dev/formats under
// the relay's /v1/witness-key, and as a note with x/mod); the statuses
// are C2SP's: 409 text/x.tlog.size with the size cosigned, 422 for a bad
// proof, a fork at one size, a proof with old 0; 404 for an unlisted
// origin; 403 for another key; 400 for a malformed body. Two servers on
// one store given two different trees of one size from one old size
// cosign exactly one.
func TestWitnessAddCheckpoint(t *testing.T) {
	st := openTestStore(t)
	l := newOtherLog(t, "log.example/tree")
	lv, _ := note.NewVerifier(l.vkey)
	newSrv := func() string {
		h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test",
			WitnessLogs: map[string][]note.Verifier{l.origin: {lv}}})
		srv := httptest.NewServer(h.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	e := &env{t: t, st: st, url: newSrv()}
	second := &env{t: t, st: st, url: newSrv()}
	r := e.do("GET", "/v1/witness-key", "", nil)
	mustStatus(t, r, 200)
	wvkey := strings.TrimSpace(string(r.Body))
	wv, err := fnote.NewVerifierForCosignatureV1(wvkey)
	if err != nil || !strings.HasPrefix(wvkey, "relay.test/witness+") {
		t.Fatalf("witness key %q: %v", wvkey, err)
	}
	post := func(e *env, body []byte) resp {
		t.Helper()
		return e.do("POST", "/v1/witness/add-checkpoint", "", body, "Content-Type", "text/plain")
	}
	cosigned := func(r resp, n int64) {
		t.Helper()
		mustStatus(t, r, 200)
		if r.Header.Get("Content-Type") != "text/plain; charset=utf-8" || !bytes.HasPrefix(r.Body, []byte("— relay.test/witness ")) || bytes.Count(r.Body, []byte("\n")) != 1 {
			t.Fatalf("answer %q %v", r.Body, r.Header)
		}
		// As C2SP says a client may: the answer appended to the checkpoint,
		// opened with the keys it trusts.
		n2, err := note.Open(append(l.checkpoint(n, l.signer), r.Body...), note.VerifierList(lv, wv))
		if err != nil || len(n2.Sigs) != 2 {
			t.Fatalf("cosigned checkpoint of size %d: %v", n, err)
		}
		at, err := fnote.CoSigV1Timestamp(n2.Sigs[1])
		if err != nil || time.Since(at) > time.Minute || n2.Sigs[1].Name != wv.Name() {
			t.Fatalf("cosignature %+v at %v, %v", n2.Sigs[1], at, err)
		}
	}
	conflict := func(r resp, size string) {
		t.Helper()
		if r.Status != 409 || r.Header.Get("Content-Type") != "text/x.tlog.size" || string(r.Body) != size+"\n" {
			t.Fatalf("want 409 %q: %d %q %v", size, r.Status, r.Body, r.Header)
		}
	}

	l.grow(3)
	cosigned(post(e, l.request(0)), 3)
	conflict(post(e, l.request(0)), "3")
	cosigned(post(e, l.request(3)), 3) // the same tree again
	l.grow(10)
	conflict(post(second, l.request(5)), "3")
	cosigned(post(second, l.request(3)), 10)

	// A proof that does not verify.
	l.grow(20)
	bad := l.request(10)
	i := bytes.Index(bad, []byte("\n")) + 1
	bad[i] ^= 'A' ^ 'B'
	if bad[i] == '+' || bad[i] == '/' {
		bad[i] = 'C'
	}
	wantCode(t, post(e, bad), 422, "witness_inconsistent")
	// A fork: the log rewrites history; checkpoints of its other tree are
	// signed by the same key but no proof joins them.
	fork := newOtherLog(t, l.origin)
	fork.forked = true
	fork.grow(20)
	wantCode(t, post(e, fork.request(10)), 422, "witness_inconsistent")
	// The same size with another root.
	fork.n = 10
	fork.stored = fork.stored[:tlog.StoredHashCount(10)]
	wantCode(t, post(e, fork.request(10)), 422, "witness_inconsistent")
	// Old 0 after the log moved on: 409 names the size.
	conflict(post(e, l.request(0)), "10")

	// Two servers, one store: two trees of size 20 from 10.
	other := newOtherLog(t, l.origin)
	other.forked = true
	other.stored, other.n = append([]tlog.Hash(nil), l.stored[:tlog.StoredHashCount(10)]...), 10
	other.grow(20)
	var wg sync.WaitGroup
	results := make([]resp, 2)
	for i, body := range [][]byte{l.request(10), other.request(10)} {
		wg.Go(func() { results[i] = post([]*env{e, second}[i], body) })
	}
	wg.Wait()
	if s := []int{results[0].Status, results[1].Status}; !(s[0] == 200 && s[1] == 409 || s[0] == 409 && s[1] == 200) {
		t.Fatalf("two trees of one size from one old size: %d %q, %d %q", s[0], results[0].Body, s[1], results[1].Body)
	}

	// Refusals before any state: unknown origin, another key, malformed.
	stranger := newOtherLog(t, "stranger.example/log").grow(2)
	wantCode(t, post(e, stranger.request(0)), 404, "witness_log_unknown")
	skey, _, _ := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{4}, 32)), l.origin)
	wrong, _ := note.NewSigner(skey)
	body := append([]byte("old 20\n\n"), l.checkpoint(20, wrong)...)
	wantCode(t, post(e, body), 403, "witness_signature_invalid")
	for _, b := range []string{"old 1\n", "old x\n\n" + string(l.checkpoint(20, l.signer)), "old 21\n\n" + string(l.checkpoint(20, l.signer))} {
		wantCode(t, post(e, []byte(b)), 400, "witness_request_invalid")
	}
	// A size-0 checkpoint needs the empty tree's root.
	empty := newOtherLog(t, "empty.example/log")
	ev, _ := note.NewVerifier(empty.vkey)
	h := relay.New(st, relay.Config{PublicURL: "http://relay.test", WitnessLogs: map[string][]note.Verifier{empty.origin: {ev}}})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	ee := &env{t: t, st: st, url: srv.URL}
	mustStatus(t, post(ee, empty.request(0)), 200)
	zero, _ := note.Sign(&note.Note{Text: empty.origin + "\n0\n" + tlog.Hash{}.String() + "\n"}, empty.signer)
	wantCode(t, post(ee, append([]byte("old 0\n\n"), zero...)), 422, "witness_inconsistent")
	// Old 0 with a proof line.
	empty.grow(2)
	withProof := append([]byte("old 0\n"+empty.root(1).String()+"\n\n"), empty.checkpoint(2, empty.signer)...)
	wantCode(t, post(ee, withProof), 422, "witness_inconsistent")
	mustStatus(t, post(ee, empty.request(0)), 200)
}
